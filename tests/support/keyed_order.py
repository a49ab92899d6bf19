"""Keyed messages for migration tests: payloads ``key:seq``, reading them off the official and
Braid consumers, and the per-key order check.

A payload names its key and its sequence number, so a test can tell, from the messages alone,
which were delivered, whether one came twice, and whether a key's messages arrived in order.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable

import pulsar

import braid


def payload(key: str, seq: int) -> bytes:
    """The payload of message ``seq`` of ``key``."""
    return f"{key}:{seq}".encode()


def take_official(consumer: pulsar.Consumer, count: int) -> set[bytes]:
    """Receive and acknowledge ``count`` messages with the official client."""
    taken = set()
    for _ in range(count):
        message = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(message)
        taken.add(message.data())
    return taken


def drain_braid(
    consumer: braid.StreamConsumer | braid.QueueConsumer, count: int, within: float = 120.0
) -> list[bytes]:
    """Receive and acknowledge ``count`` messages (in arrival order), then check that nothing
    more comes (exactly once)."""
    got: list[bytes] = []
    deadline = time.monotonic() + within
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.receive(timeout=1)
        if message is not None:
            got.append(bytes(message.value))
            if isinstance(consumer, braid.StreamConsumer):
                consumer.acknowledge_cumulative(message)
            else:
                consumer.acknowledge(message)
    extra = consumer.receive(timeout=1)
    assert extra is None, f"unexpected extra message {extra.value!r}"
    return got


def assert_each_key_in_order(payloads: Iterable[bytes]) -> None:
    """Every key's sequence numbers arrive ascending."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for raw in payloads:
        key, seq = raw.decode().rsplit(":", 1)
        by_key[key].append(int(seq))
    for key, seqs in by_key.items():
        assert seqs == sorted(seqs), f"{key} reordered: {seqs}"


__all__ = ["assert_each_key_in_order", "drain_braid", "payload", "take_official"]
