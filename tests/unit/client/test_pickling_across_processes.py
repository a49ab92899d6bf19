"""MessageId and Checkpoint survive cloudpickle (what Spark uses) into another process."""

from __future__ import annotations

import subprocess
import sys

import pytest

import braid

cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="pyspark (the spark extra)")


def _in_another_process(payload: bytes) -> str:
    code = "import pickle, sys; print(repr(pickle.loads(sys.stdin.buffer.read())))"
    done = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def test_a_checkpoint_pickled_by_cloudpickle_loads_in_another_process() -> None:
    checkpoint = braid.Checkpoint.earliest()
    assert _in_another_process(cloudpickle.dumps(checkpoint)) == repr(checkpoint)


def test_a_message_id_pickled_by_cloudpickle_loads_in_another_process() -> None:
    message_id = braid.MessageId.earliest()
    assert _in_another_process(cloudpickle.dumps(message_id)) == repr(message_id)
