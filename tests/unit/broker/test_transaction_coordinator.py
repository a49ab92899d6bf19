"""The transaction coordinator on the injected clock and a real (in-memory) metadata store:
timeouts abort, an end recorded before a crash is finished by the next coordinator, an open
transaction keeps its deadline across a restart, ids are never reused, wrong transitions are
refused with Pulsar's errors. The participant records what the topics would be told (the real
topics are exercised end to end in tests/interop/test_transactions*.py)."""

from __future__ import annotations

import asyncio

import pytest

from braid.broker.errors import InvalidTxnStatus, TransactionNotFound
from braid.broker.transactions.coordinator import COORDINATORS_ROOT, TransactionCoordinator
from braid.broker.transactions.ids import TxnId
from braid.clock import ManualClock
from braid.metadata.memory import MemoryMetadataStore
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import AuthorizationDenied
from tests.support.polling import eventually

COMMIT, ABORT = pb.TxnAction.COMMIT, pb.TxnAction.ABORT


class RecordingParticipants:
    """Records each end; fails the first ``failures`` calls (a topic not loadable yet)."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.ends: list[tuple[str, TxnId, int]] = []

    def _maybe_fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("topic unavailable")

    async def end_on_partition(
        self, topic: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        self._maybe_fail()
        self.ends.append((topic, txn, action))

    async def end_on_subscription(
        self, topic: str, subscription: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        self._maybe_fail()
        self.ends.append((f"{topic}/{subscription}", txn, action))


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_an_open_transaction_is_aborted_at_its_deadline_and_then_unknown() -> None:
    clock, store, topics = ManualClock(), MemoryMetadataStore(), RecordingParticipants()
    tc = TransactionCoordinator(0, store, topics, clock)
    txn = await tc.new_transaction(1000)
    await tc.add_partitions(txn, ["persistent://t/n/a"])
    await tc.add_subscriptions(txn, [("persistent://t/n/a", "sub")])
    clock.advance(0.9)
    await _settle()
    assert topics.ends == []
    clock.advance(0.2)
    await eventually(lambda: tc.timed_out == 1)
    await eventually(lambda: len(topics.ends) == 2)
    assert topics.ends == [
        ("persistent://t/n/a", txn, ABORT),
        ("persistent://t/n/a/sub", txn, ABORT),
    ]
    with pytest.raises(TransactionNotFound):
        await tc.end(txn, COMMIT)
    assert await store.children(f"{COORDINATORS_ROOT}/0/txns") == []
    await tc.close()


async def test_a_commit_recorded_before_a_crash_is_finished_by_the_next_coordinator() -> None:
    clock, store = ManualClock(), MemoryMetadataStore()
    failing = RecordingParticipants(failures=100)
    first = TransactionCoordinator(0, store, failing, clock)
    txn = await first.new_transaction(60_000)
    await first.add_partitions(txn, ["persistent://t/n/a"])
    with pytest.raises(ConnectionError):
        await first.end(txn, COMMIT)
    # A commit once recorded cannot turn into an abort.
    with pytest.raises(InvalidTxnStatus):
        await first.end(txn, ABORT)
    await first.close()  # the "crash": the record says COMMITTING

    topics = RecordingParticipants()
    second = TransactionCoordinator(0, store, topics, clock)
    await second.recover()
    await eventually(lambda: topics.ends == [("persistent://t/n/a", txn, COMMIT)])
    await eventually(
        lambda: second.stats()["transactions"] == {"OPEN": 0, "COMMITTING": 0, "ABORTING": 0}
    )
    with pytest.raises(TransactionNotFound):
        await second.end(txn, COMMIT)
    await second.close()


async def test_an_open_transaction_keeps_its_deadline_across_a_restart_and_ids_are_not_reused() -> (
    None
):
    clock, store, topics = ManualClock(), MemoryMetadataStore(), RecordingParticipants()
    first = TransactionCoordinator(0, store, topics, clock)
    txn = await first.new_transaction(10_000)
    await first.add_partitions(txn, ["persistent://t/n/a"])
    before = {await first.new_transaction(60_000) for _ in range(3)} | {txn}
    clock.advance(4)
    await first.close()

    second = TransactionCoordinator(0, store, topics, clock)
    await second.recover()
    clock.advance(5)
    await _settle()
    assert topics.ends == []
    clock.advance(1.5)
    await eventually(lambda: ("persistent://t/n/a", txn, ABORT) in topics.ends)
    after = {await second.new_transaction(60_000) for _ in range(3)}
    assert not before & after
    assert all(t.most_bits == 0 for t in after)
    await second.close()


async def test_a_transaction_can_be_committed_by_its_id_after_a_restart() -> None:
    clock, store, topics = ManualClock(), MemoryMetadataStore(), RecordingParticipants()
    first = TransactionCoordinator(3, store, topics, clock)
    txn = await first.new_transaction(60_000)
    assert txn.coordinator_id == 3
    await first.add_partitions(txn, ["persistent://t/n/a", "persistent://t/n/b"])
    await first.close()
    second = TransactionCoordinator(3, store, topics, clock)
    await second.recover()
    await second.end(txn, COMMIT)
    assert topics.ends == [("persistent://t/n/a", txn, COMMIT), ("persistent://t/n/b", txn, COMMIT)]
    with pytest.raises(TransactionNotFound):
        await second.add_partitions(txn, ["persistent://t/n/c"])
    await second.close()


async def test_max_active_transactions_per_coordinator_is_enforced() -> None:
    tc = TransactionCoordinator(
        0, MemoryMetadataStore(), RecordingParticipants(), ManualClock(), max_active=2
    )
    await tc.new_transaction(1000)
    txn = await tc.new_transaction(1000)
    with pytest.raises(Exception, match="maxActiveTransactionsPerCoordinator"):
        await tc.new_transaction(1000)
    await tc.end(txn, ABORT)
    await tc.new_transaction(1000)
    await tc.close()


async def test_only_the_role_that_began_a_transaction_or_a_super_user_may_act_on_it() -> None:
    clock, store = ManualClock(), MemoryMetadataStore()
    tc = TransactionCoordinator(0, store, RecordingParticipants(), clock)
    txn = await tc.new_transaction(60_000, owner="alice")
    tc.check_owner(txn, "alice", super_user=False)
    tc.check_owner(txn, "admin", super_user=True)
    with pytest.raises(AuthorizationDenied):
        tc.check_owner(txn, "mallory", super_user=False)
    with pytest.raises(AuthorizationDenied):
        tc.check_owner(txn, None, super_user=False)
    # Without authentication a transaction has no owner; the owner survives a restart.
    anonymous = await tc.new_transaction(60_000)
    tc.check_owner(anonymous, "anyone", super_user=False)
    await tc.close()
    again = TransactionCoordinator(0, store, RecordingParticipants(), clock)
    await again.recover()
    with pytest.raises(AuthorizationDenied):
        again.check_owner(txn, "mallory", super_user=False)
    await again.close()
