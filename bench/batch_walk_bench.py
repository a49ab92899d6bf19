"""Microbenchmark of the broker's batch walk (``check_batch``): compiled vs pure Python.

Every batched SEND is walked message by message so the broker never stores a batch that does not
split into ``num_messages_in_batch`` messages (ADR 0032). This times the walk on 1,000-message
batches of the shapes clients write, each message's metadata as protobuf serializes it:

* *bench*: ``payload_size`` alone (what ``bench/broker_bench.py``'s pre-built batches hold);
* *official client*: ``payload_size`` and ``sequence_id`` (the official client, no key);
* *official client, keyed*: ``partition_key``, ``payload_size``, ``sequence_id``;
* *properties*: two properties and an ``event_time`` - the shape the compiled walk leaves to the
  pure-Python walk (and protobuf), one message at a time;

and, for the bench's shape, the whole ``SendValidator.validate`` of a 1000 x 100 B entry.

Command: ``.venv/bin/python bench/batch_walk_bench.py`` (a few seconds; best of 5 per figure).
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable, Sequence

from braid.broker.send_validation import SendValidator
from braid.protocol.batch import (
    NATIVE_BATCH_WALK,
    build_entry,
    check_batch,
    check_batch_python,
    encode_batch,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

MESSAGES = 1000
PAYLOAD = bytes(range(100))


def _shapes() -> dict[str, list[pb.SingleMessageMetadata]]:
    single = pb.SingleMessageMetadata
    props = [pb.KeyValue(key="trace", value="abc123"), pb.KeyValue(key="app", value="braid")]
    return {
        "bench (payload_size)": [single() for _ in range(MESSAGES)],
        "official client": [single(sequence_id=1_000_000 + i) for i in range(MESSAGES)],
        "official client, keyed": [
            single(sequence_id=1_000_000 + i, partition_key=f"user-{i % 97}")
            for i in range(MESSAGES)
        ],
        "properties + event_time": [
            single(properties=props, event_time=1_764_000_000_000 + i) for i in range(MESSAGES)
        ],
    }


def _best_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200, help="walks per timing")
    args = parser.parse_args(argv)
    print(f"compiled walk installed: {NATIVE_BATCH_WALK}")
    print()
    print(f"| {MESSAGES}-message batch | compiled µs/message | pure Python µs/message |")
    print("|---|---:|---:|")
    for name, singles in _shapes().items():
        data = encode_batch([(one, PAYLOAD) for one in singles])
        compiled = _best_us(lambda data=data: check_batch(data, MESSAGES), args.number)
        python = _best_us(lambda data=data: check_batch_python(data, MESSAGES), args.number)
        print(f"| {name} | {compiled / MESSAGES:.4f} | {python / MESSAGES:.3f} |")
    meta = pb.MessageMetadata(producer_name="bench", sequence_id=0, publish_time=1)
    body = build_entry(meta, [(pb.SingleMessageMetadata(), PAYLOAD)] * MESSAGES)
    validator = SendValidator(5 * 1024 * 1024)
    whole = _best_us(lambda: validator.validate(body), args.number)
    print()
    print(f"SendValidator.validate, {MESSAGES} x {len(PAYLOAD)} B entry: {whole:.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
