"""Client transactions benchmark: producing inside transactions through Braid's client, against
plain sends of the same client, same broker, same run.

An in-process broker with the scalable-topic layer (SQLite metadata, a local bookie on disk,
``transactionCoordinatorEnabled``) and one ``braid.AsyncClient``; a ``topic://`` topic of 4
segments, 100 B keyed messages (spread over every segment), ``send_async`` pipelined. Rows, each
over the same number of messages:

* **plain**: ``send_async`` without a transaction, client batching on (the peer);
* **txn of N**: ``new_transaction``, N ``send_async(..., txn=txn)``, ``commit()`` (which waits for
  the sends), for N = 10, 100, 1000. A transactional message travels alone in its entry (no
  batching), and each transaction adds every segment it writes to (one ADD_PARTITION_TO_TXN per
  segment) and ends on each;
* **plain, again**: the peer once more, last, to show how much the machine's load moved.

Prints messages/s, the ratio to *plain* measured in the same run, and the load average.
Run: ``.venv/bin/python bench/client_transactions_bench.py [--messages 3000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import braid
from braid.core.names import TopicName
from tests.support.scalable_stack import open_scalable_stack


async def _row(client: braid.AsyncClient, topic: str, messages: int, per_txn: int | None) -> float:
    producer = await client.create_producer(topic)
    payload = b"x" * 100
    start = time.perf_counter()
    if per_txn is None:
        await asyncio.gather(
            *(producer.send_async(payload, key=f"k{i % 64}") for i in range(messages))
        )
    else:
        for first in range(0, messages, per_txn):
            txn = await client.new_transaction(timeout=120)
            for i in range(first, min(first + per_txn, messages)):
                producer.send_async(payload, key=f"k{i % 64}", txn=txn)
            await txn.commit()
    elapsed = time.perf_counter() - start
    await producer.close()
    return messages / elapsed


async def main(messages: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stack = await open_scalable_stack(Path(tmp), transaction_coordinator_enabled=True)
        try:
            async with braid.AsyncClient(stack.broker.service.service_url) as client:
                print(f"load before: {os.getloadavg()}")
                rows: list[tuple[str, float]] = []
                for label, per_txn in (
                    ("plain", None),
                    ("txn of 10", 10),
                    ("txn of 100", 100),
                    ("txn of 1000", 1000),
                    ("plain, again", None),
                ):
                    topic = (
                        f"topic://public/default/bench-{label.replace(' ', '-').replace(',', '')}"
                    )
                    await stack.scalable.create_topic(TopicName.parse(topic), 4)
                    rows.append((label, await _row(client, topic, messages, per_txn)))
                print(f"load after: {os.getloadavg()}")
            plain = rows[0][1]
            print("| row | msg/s | vs plain |\n|---|---|---|")
            for label, rate in rows:
                print(f"| {label} | {rate:,.0f} | {rate / plain:.2f} |")
        finally:
            await stack.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000, help="messages per row")
    args = parser.parse_args()
    asyncio.run(main(args.messages))
