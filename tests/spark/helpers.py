"""Shared steps of the spark tier: publishing numbered keyed messages, topology changes, reading
a topic back, waiting on streaming queries, an interpreter that has Braid's dependencies but not
Braid."""

from __future__ import annotations

import itertools
import json
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import braid
from braid.admin.client import AdminClient
from braid.client import Client
from braid.core.checkpoint import Checkpoint
from braid.core.layout_codec import layout_from_metadata
from tests.support.standalone import StandaloneProcess


def options(process: StandaloneProcess, topic: str, **extra: str) -> dict[str, str]:
    return {
        "service.url": process.service_url,
        "admin.url": process.web_url,
        "topic": topic,
        **extra,
    }


class Publisher:
    """Publishes ``<key>:<n>`` values, ``n`` counting up per key, so order can be checked."""

    def __init__(self, process: StandaloneProcess, topic: str, keys: int = 40) -> None:
        self.client = Client(process.service_url)
        self.producer = self.client.create_producer(topic)
        self.keys = [f"k{i}" for i in range(keys)]
        self.counts = dict.fromkeys(self.keys, 0)
        self._next = 0

    def publish(self, count: int) -> None:
        keys, values = [], []
        for _ in range(count):
            key = self.keys[self._next % len(self.keys)]
            self._next += 1
            keys.append(key)
            values.append(f"{key}:{self.counts[key]}".encode())
            self.counts[key] += 1
        self.producer.send_many(values, keys=keys)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def expected(self) -> set[bytes]:
        return {f"{k}:{n}".encode() for k, c in self.counts.items() for n in range(c)}

    def close(self) -> None:
        self.producer.close()
        self.client.close()


def split_any(admin: AdminClient, topic: str) -> None:
    """Split the widest active segment."""
    layout = layout_from_metadata(admin.scalable_topics.get(topic))
    widest = max(layout.active_segments, key=lambda s: s.hash_range.end - s.hash_range.start)
    admin.scalable_topics.split(topic, widest.segment_id)


def merge_any(admin: AdminClient, topic: str) -> None:
    """Merge the first two hash-adjacent active segments."""
    layout = layout_from_metadata(admin.scalable_topics.get(topic))
    active = sorted(layout.active_segments, key=lambda s: s.hash_range.start)
    for a, b in itertools.pairwise(active):
        if a.hash_range.end + 1 == b.hash_range.start:
            admin.scalable_topics.merge(topic, [a.segment_id, b.segment_id])
            return
    raise AssertionError(f"no adjacent active segments in {topic}")


def read_topic(process: StandaloneProcess, topic: str, expected: int) -> list[Any]:
    """Every message of ``topic`` (parents before children, each segment in order), read with a
    checkpoint consumer from the start: ``expected`` of them, then whatever else came."""
    out: list[Any] = []
    with (
        Client(process.service_url) as client,
        client.create_checkpoint_consumer(topic, start=Checkpoint.earliest()) as consumer,
    ):
        while len(out) < expected:
            got = consumer.receive_many(1000, timeout=10.0)
            if not got:
                break
            out.extend(got)
        out.extend(consumer.receive_many(1000, timeout=0.5))  # nothing more, if all is well
    return out


def values_in_order(rows: Sequence[Any]) -> dict[str, list[int]]:
    """Per key, the counters of ``<key>:<n>`` values in row order."""
    out: dict[str, list[int]] = {}
    for row in rows:
        key, n = row.value.decode().split(":")
        assert row.key == key
        out.setdefault(key, []).append(int(n))
    return out


def end_offsets(query: Any) -> list[tuple[int, str, str, int]]:
    """(batch id, start offset JSON, end offset JSON, rows) of every progress report with rows."""
    out = []
    for progress in query.recentProgress:
        source = progress["sources"][0]
        start, end = source["startOffset"], source["endOffset"]
        start = start if isinstance(start, str) or start is None else json.dumps(start)
        end = end if isinstance(end, str) else json.dumps(end)
        out.append((progress["batchId"], start, end, progress["numInputRows"]))
    return out


def python_without_braid(directory: Path) -> Path:
    """A ``python`` for Spark's workers that has Braid's dependencies (and PySpark) but not Braid,
    as on a cluster node where only the dependencies are installed.

    It runs this interpreter with ``-S`` (so the site directory's ``.pth`` files, among them an
    editable install of Braid, are not read), puts the site directory on ``PYTHONPATH`` after
    whatever Spark put there (``pyspark.zip``, ``--py-files``), and drops Braid's source tree from
    ``PYTHONPATH``. Anything that gives it Braid must come from Spark.
    """
    source_tree = str(Path(braid.__file__).resolve().parents[1])
    site = sysconfig.get_paths()["purelib"]
    wrapper = directory / "python-without-braid"
    wrapper.write_text(
        "#!/bin/sh\n"
        "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' "
        f"| grep -v -x -F -e '{source_tree}' | paste -sd: -)\n"
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}"\n'
        f'exec "{sys.executable}" -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
