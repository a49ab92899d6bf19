"""Transaction buffer snapshots (ADR 0071) over a real managed ledger (sqlite metadata, a local
bookie): a load after a snapshot replays only the entries after its max read position and still
knows every aborted and open transaction; aborted transactions whose marker's ledger was trimmed
are dropped; the time rule takes a snapshot on the injected clock; a snapshot past the ledger's end
is ignored (whole replay)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.broker.transactions.buffer import SnapshotPolicy, TransactionBuffer
from braid.broker.transactions.buffer_snapshot import BufferSnapshot, BufferSnapshots
from braid.broker.transactions.ids import TxnId
from braid.ledger import EARLIEST, ManagedLedgerConfig
from braid.ledger.api import ManagedLedger, Position
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.ledger.conftest import LedgerEnv
from tests.support.polling import eventually

TOPIC = "persistent://public/default/txn-snapshots"
ML_NAME = "public/default/persistent/txn-snapshots"
COMMIT, ABORT = pb.TxnAction.COMMIT, pb.TxnAction.ABORT


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[LedgerEnv]:
    ledger_env = LedgerEnv(tmp_path)
    await ledger_env.start()
    yield ledger_env
    await ledger_env.stop()


def _buffer(env: LedgerEnv, ledger: ManagedLedger, **policy: int) -> TransactionBuffer:
    assert env.metadata is not None
    return TransactionBuffer(
        TOPIC,
        ledger,
        env.clock,
        BufferSnapshots(env.metadata, TOPIC),
        SnapshotPolicy(**policy),
    )


async def _send(buffer: TransactionBuffer, txn: TxnId | None, payload: bytes) -> Position:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn.most_bits, txn.least_bits
        buffer.on_send(txn)
    position = await buffer.ledger.append(encode_message_body(meta, payload))
    if txn is not None:
        buffer.on_appended(txn, position)
    return position


async def test_a_load_after_a_snapshot_replays_only_the_tail_and_keeps_every_outcome(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ledger = await env.factory.open(ML_NAME)
    buffer = _buffer(env, ledger, max_transactions=3)
    await buffer.recover()
    t1, t2, t3, t4, t5 = (TxnId(0, n) for n in range(1, 6))
    await _send(buffer, None, b"plain")
    await _send(buffer, t1, b"a")
    await buffer.end(t1, ABORT)
    await _send(buffer, t2, b"b")
    await buffer.end(t2, COMMIT)
    await _send(buffer, t3, b"c")
    assert buffer.snapshot is None
    await buffer.end(t3, ABORT)  # the third end: a snapshot, durable before end returns
    snapshot = buffer.snapshot
    assert snapshot is not None and set(snapshot.aborted) == {t1, t3}
    assert snapshot.max_read_position == snapshot.position == ledger.last_confirmed_position
    first_open = await _send(buffer, t4, b"d")  # open across the "crash"
    await _send(buffer, t5, b"e")
    await buffer.end(t5, ABORT)
    limit = buffer.max_read_position()
    assert limit is not None and limit < first_open

    reloaded = _buffer(env, ledger, max_transactions=3)
    await reloaded.recover()
    assert reloaded.recovered_from_snapshot
    assert reloaded.replayed_entries == 3  # t4's entry, t5's entry and its marker
    assert all(reloaded.is_aborted(t) for t in (t1, t3, t5))
    assert not reloaded.is_aborted(t2)
    assert reloaded.open_transactions() == [t4]
    assert reloaded.max_read_position() == limit

    # Without the snapshot the same state costs the whole ledger.
    assert env.metadata is not None
    await BufferSnapshots(env.metadata, TOPIC).delete()
    full = _buffer(env, ledger)
    await full.recover()
    assert not full.recovered_from_snapshot
    assert full.replayed_entries == ledger.number_of_entries == 10
    assert full.open_transactions() == [t4] and full.max_read_position() == limit


async def test_aborted_transactions_in_trimmed_ledgers_leave_the_next_snapshot(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ledger = await env.factory.open(ML_NAME, ManagedLedgerConfig(max_entries_per_ledger=2))
    cursor = await ledger.open_cursor("sub", EARLIEST)
    buffer = _buffer(env, ledger, max_transactions=1)
    await buffer.recover()
    old, recent = TxnId(0, 1), TxnId(0, 2)
    await _send(buffer, old, b"old")
    await buffer.end(old, ABORT)  # fills the first ledger
    assert buffer.snapshot is not None and set(buffer.snapshot.aborted) == {old}
    await _send(buffer, None, b"x")
    await _send(buffer, recent, b"recent")
    await buffer.end(recent, ABORT)
    first_ledger = ledger.ledgers[0].ledger_id
    await cursor.mark_delete(ledger.last_confirmed_position)
    await ledger.trim()
    await eventually(
        lambda: ledger.ledgers[0].ledger_id > first_ledger, message="the first ledger trimmed"
    )

    snapshot = await buffer.take_snapshot()
    assert snapshot is not None and set(snapshot.aborted) == {recent}
    assert not buffer.is_aborted(old) and buffer.is_aborted(recent)
    reloaded = _buffer(env, ledger)
    await reloaded.recover()
    assert reloaded.is_aborted(recent) and not reloaded.is_aborted(old)


async def test_the_time_rule_takes_a_snapshot_on_the_injected_clock(env: LedgerEnv) -> None:
    assert env.factory is not None
    ledger = await env.factory.open(ML_NAME)
    buffer = _buffer(env, ledger, max_transactions=1000, min_interval_ms=5000)
    await buffer.recover()
    txn = TxnId(0, 7)
    await _send(buffer, txn, b"a")
    await buffer.end(txn, ABORT)
    assert buffer.snapshot is None
    env.clock.advance(4.9)
    assert buffer.snapshot is None
    env.clock.advance(0.2)
    await eventually(lambda: buffer.snapshot is not None, message="the timed snapshot")
    assert buffer.snapshot is not None and set(buffer.snapshot.aborted) == {txn}
    first = buffer.snapshot
    later = TxnId(0, 8)
    await _send(buffer, later, b"b")
    await buffer.end(later, COMMIT)
    await buffer.close()  # unloading: the armed timer is cancelled
    env.clock.advance(10)
    assert buffer.snapshot is first


async def test_a_snapshot_past_the_ledgers_end_is_ignored(env: LedgerEnv) -> None:
    assert env.factory is not None and env.metadata is not None
    ledger = await env.factory.open(ML_NAME)
    buffer = _buffer(env, ledger)
    await buffer.recover()
    txn = TxnId(0, 9)
    await _send(buffer, txn, b"a")
    await buffer.end(txn, ABORT)
    foreign = BufferSnapshot({}, Position(10**9, 5), Position(10**9, 5), 1)
    store = BufferSnapshots(env.metadata, TOPIC)
    await store.load()
    await store.save(foreign)
    reloaded = _buffer(env, ledger)
    await reloaded.recover()
    assert not reloaded.recovered_from_snapshot
    assert reloaded.replayed_entries == 2 and reloaded.is_aborted(txn)
