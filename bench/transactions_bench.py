"""Transactions benchmark: what producing inside transactions costs against plain sends.

An in-process broker (SQLite metadata, a local bookie on disk, ``transactionCoordinatorEnabled``)
and one wire connection (:mod:`tests.support.txn_wire`, the Java client's command order). Rows,
each over the same number of messages, sends pipelined ``--window`` at a time:

* **plain**: SENDs without a transaction (the peer);
* **txn of N**: NEW_TXN, ADD_PARTITION_TO_TXN, N SENDs in the transaction, END_TXN COMMIT (the
  coordinator records the commit, writes the marker, deletes its record), for N = 10, 100, 1000;
* **plain, again**: the peer once more, last, to show how much the machine's load moved meanwhile.

Prints messages/s and the ratio to *plain* measured in the same run, and the load average (the
machine is shared). Run: ``.venv/bin/python bench/transactions_bench.py [--messages 3000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from braid.protocol import commands
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import open_broker_stack
from tests.support.txn_wire import Txn, TxnWire


async def _send_window(
    wire: TxnWire, name: str, first_seq: int, count: int, window: int, txn: Txn | None
) -> None:
    """SEND ``count`` messages keeping ``window`` in flight; wait for every receipt."""
    sent = received = 0
    while received < count:
        while sent < count and sent - received < window:
            seq = first_seq + sent
            meta = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=1)
            cmd = commands.send(1, seq)
            if txn is not None:
                meta.txnid_most_bits, meta.txnid_least_bits = txn.most, txn.least
                cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = txn.most, txn.least
            await wire.raw.send(cmd, encode_message_body(meta, b"x" * 100))
            sent += 1
        reply = await wire.raw.next_command(
            lambda c: c.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
        )
        if reply.type == pb.BaseCommand.SEND_ERROR:
            raise RuntimeError(f"send refused: {reply.send_error.message}")
        received += 1


async def _row(wire: TxnWire, topic: str, messages: int, window: int, per_txn: int | None) -> float:
    name = f"bench-{per_txn}"
    await wire.create_producer(topic, 1, name)
    start = time.perf_counter()
    if per_txn is None:
        await _send_window(wire, name, 0, messages, window, None)
    else:
        for first in range(0, messages, per_txn):
            txn = await wire.new_txn()
            await wire.add_partition(txn, topic)
            await _send_window(wire, name, first, min(per_txn, messages - first), window, txn)
            response = await wire.end(txn, pb.TxnAction.COMMIT)
            if response.HasField("error"):
                raise RuntimeError(f"commit failed: {response.message}")
    elapsed = time.perf_counter() - start
    rid = wire.next_id()
    await wire.request(commands.wrap(pb.CommandCloseProducer(producer_id=1, request_id=rid)), rid)
    return messages / elapsed


async def main(messages: int, window: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stack = await open_broker_stack(Path(tmp), transaction_coordinator_enabled=True)
        try:
            url = urlparse(stack.service.service_url)
            wire = await TxnWire.open(url.hostname or "127.0.0.1", url.port or 6650)
            await wire.connect_coordinator()
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
                    f"persistent://public/default/bench-{label.replace(' ', '-').replace(',', '')}"
                )
                rows.append((label, await _row(wire, topic, messages, window, per_txn)))
            await wire.close()
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
    parser.add_argument("--window", type=int, default=100, help="SENDs in flight")
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.window))
