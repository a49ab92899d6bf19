"""``braid standalone`` with PIP-483's ingest thresholds lowered for a small deployment.

The split threshold comes from ``broker.conf`` and the merge threshold from a ``BRAID_<key>``
variable, as a new user would set them: the pair is consistent only together (300 alone is below
the default merge threshold of 1000), so the broker must start and serve the official client; a
truly inconsistent pair must stop start-up with both keys named.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pulsar

from braid.cli.process import StandaloneProcess
from tests.support.standalone import run_standalone_to_exit

SPLIT_IN = "scalableTopicSplitMsgRateInThreshold"
MERGE_IN = "scalableTopicMergeMsgRateInThreshold"


def _config_and_env(tmp_path: Path, split: str, merge: str) -> tuple[Path, dict[str, str]]:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"# a small deployment\n{SPLIT_IN}={split}\n", encoding="utf-8")
    return conf, {**os.environ, f"BRAID_{MERGE_IN}": merge}


def test_standalone_starts_with_a_threshold_pair_consistent_only_together(tmp_path: Path) -> None:
    conf, env = _config_and_env(tmp_path, "300", "30")
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data",
        extra_args=["--config", str(conf)],
        env=env,
        log_path=tmp_path / "standalone.log",
    )
    try:
        client = pulsar.Client(
            process.service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            topic = "persistent://public/default/small-deployment"
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic)
            producer.send(b"hello")
            message = consumer.receive(timeout_millis=30_000)
            assert message.data() == b"hello"
            consumer.acknowledge(message)
        finally:
            client.close()
        # The start-up log records both values as configured.
        output = process.output()
        assert re.search(rf"\b{SPLIT_IN}=300\b", output)
        assert re.search(rf"\b{MERGE_IN}=30\b", output)
    finally:
        assert process.stop() == 0


def test_standalone_refuses_an_inconsistent_pair_naming_both_keys(tmp_path: Path) -> None:
    conf, env = _config_and_env(tmp_path, "300", "500")
    result = run_standalone_to_exit(tmp_path / "data", env, ["--config", str(conf)])
    assert result.returncode == 2, result.stderr
    assert f"{SPLIT_IN}=300 must be above {MERGE_IN}=500" in result.stderr
    assert "Traceback" not in result.stderr
