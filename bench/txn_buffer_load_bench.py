"""Transaction buffer load benchmark (ADR 0071): loading a topic from its snapshot against
replaying its whole ledger.

A managed ledger over real storage (SQLite metadata, a local bookie on disk) receives
``--transactions`` transactions of one message each (every third aborted), their markers and as
many plain messages; the buffer takes a snapshot at the end (as the count rule would), then
``--tail`` more transactions follow that the snapshot does not cover. Rows, each a fresh
:class:`TransactionBuffer` recovering the same ledger (median of ``--runs``):

* **whole ledger**: no snapshot (ADR 0065's load: the peer);
* **snapshot + tail**: the snapshot, then the entries after its max read position.

Prints the time, the entries each load read, the ratio to the peer measured in the same run, and
the load average (the machine is shared). Run:
``.venv/bin/python bench/txn_buffer_load_bench.py [--transactions 5000] [--tail 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from braid.broker.transactions.buffer import SnapshotPolicy, TransactionBuffer
from braid.broker.transactions.buffer_snapshot import BufferSnapshots
from braid.broker.transactions.ids import TxnId
from braid.clock import SystemClock
from braid.ledger import DefaultManagedLedgerFactory
from braid.ledger.api import ManagedLedger
from braid.metadata import open_store
from braid.metadata.api import MetadataStore
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.storage import StorageRouter, open_local_cluster

TOPIC = "persistent://public/default/txn-load-bench"
_CHUNK = 500


def _body(txn: TxnId | None) -> bytes:
    meta = pb.MessageMetadata(producer_name="bench", sequence_id=0, publish_time=1)
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn.most_bits, txn.least_bits
    return encode_message_body(meta, b"x" * 100)


async def _fill(buffer: TransactionBuffer, first: int, count: int) -> None:
    """``count`` transactions of one message each plus one plain message per transaction."""
    for start in range(first, first + count, _CHUNK):
        txns = [TxnId(0, n) for n in range(start, min(start + _CHUNK, first + count))]
        for txn in txns:
            buffer.on_send(txn)
        positions = await asyncio.gather(
            *(buffer.ledger.append(_body(t)) for t in txns),
            *(buffer.ledger.append(_body(None)) for _ in txns),
        )
        for txn, position in zip(txns, positions, strict=False):
            buffer.on_appended(txn, position)
        for txn in txns:
            action = pb.TxnAction.ABORT if txn.least_bits % 3 == 0 else pb.TxnAction.COMMIT
            await buffer.end(txn, action)


async def _load(
    ledger: ManagedLedger, store: MetadataStore, runs: int, snapshots: bool
) -> tuple[float, int]:
    times: list[float] = []
    replayed = 0
    for _ in range(runs):
        buffer = TransactionBuffer(
            TOPIC, ledger, SystemClock(), BufferSnapshots(store, TOPIC) if snapshots else None
        )
        began = time.perf_counter()
        await buffer.recover()
        times.append(time.perf_counter() - began)
        replayed = buffer.replayed_entries
    return statistics.median(times), replayed


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = await open_store(f"sqlite:///{root}/metadata.db")
        storage = await open_local_cluster(store, root / "data")
        router = StorageRouter([storage])
        factory = DefaultManagedLedgerFactory(store, router)
        try:
            ledger = await factory.open("public/default/persistent/txn-load-bench")
            never = SnapshotPolicy(max_transactions=10**9, min_interval_ms=10**9)
            writer = TransactionBuffer(
                TOPIC, ledger, SystemClock(), BufferSnapshots(store, TOPIC), never
            )
            await writer.recover()
            await _fill(writer, 0, args.transactions)
            await writer.take_snapshot()
            await _fill(writer, args.transactions, args.tail)
            await writer.close()
            whole, whole_read = await _load(ledger, store, args.runs, snapshots=False)
            snap, snap_read = await _load(ledger, store, args.runs, snapshots=True)
        finally:
            await factory.close()
            await router.close()
            await store.close()
    print(f"ledger: {ledger.number_of_entries} entries, {args.transactions + args.tail} txns")
    print(f"{'row':<18}{'load (ms)':>12}{'entries read':>15}{'ratio':>8}")
    print(f"{'whole ledger':<18}{whole * 1000:>12.1f}{whole_read:>15}{1.0:>8.2f}")
    print(f"{'snapshot + tail':<18}{snap * 1000:>12.1f}{snap_read:>15}{snap / whole:>8.3f}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=5000)
    parser.add_argument("--tail", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
