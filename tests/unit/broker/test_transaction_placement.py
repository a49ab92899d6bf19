"""Transaction coordinators on several brokers (ADR 0070), on one real in-memory metadata tree
with one session per "broker" and the real bundle ownership: each coordinator is served by
exactly one broker, moves when its broker's session ends (fenced there first), a stale coordinator
that meets the new owner's write fences itself without changing the recorded decision, and the
coordinator-assignment watch sends the whole map again on every change, leaving out a
coordinator mid-election."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.bundles import NamespaceBundle, NamespaceBundles
from braid.broker.errors import CoordinatorNotFound
from braid.broker.ownership import BundleOwnership, LookupAnswer, OwnerData
from braid.broker.transactions.assignments import TcAssignments, build_snapshot
from braid.broker.transactions.coordinator import (
    COORDINATORS_ROOT,
    TransactionCoordinator,
    TransactionCoordinators,
)
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.placement import BundleCoordinatorPlacement, CoordinatorKeeper
from braid.clock import ManualClock
from braid.core.names import TopicName
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.polling import eventually
from tests.unit.broker.test_transaction_coordinator import RecordingParticipants

COMMIT, ABORT = pb.TxnAction.COMMIT, pb.TxnAction.ABORT
COUNT = 4


async def _bundles_of(topic: TopicName) -> NamespaceBundles:
    return NamespaceBundles.of(topic.namespace_name, 4)


@dataclass
class Broker:
    name: str
    store: MemoryMetadataStore
    ownership: BundleOwnership
    coordinators: TransactionCoordinators
    placement: BundleCoordinatorPlacement
    keeper: CoordinatorKeeper
    participants: RecordingParticipants

    @property
    def url(self) -> str:
        return f"pulsar://{self.name}:6650"

    def served(self) -> set[int]:
        return {tc for tc in range(COUNT) if self.coordinators.serving(tc) is not None}

    async def close(self) -> None:
        await self.keeper.close()
        await self.coordinators.close()
        self.ownership.close()


async def _broker(
    backend: MemoryBackend, name: str, clock: ManualClock, others: dict[str, BundleOwnership]
) -> Broker:
    """One "broker" on its own session of ``backend``; ``others`` (URL -> ownership) is how a
    lookup redirected to another broker reaches that broker's real lookup."""
    store = MemoryMetadataStore.shared(backend)
    registry = BrokerRegistry(store, cluster="c1")
    url = f"pulsar://{name}:6650"
    await registry.register(url, f"http://{name}:8080", f"pulsar+ssl://{name}:6651")
    participants = RecordingParticipants()
    coordinators = TransactionCoordinators(store, participants, clock, count=COUNT)
    lost: list[NamespaceBundle] = []
    ownership = BundleOwnership(
        store, registry, _bundles_of, on_lost=lost.append, on_session_lost=lambda: None
    )
    ownership.announce(OwnerData(url, f"http://{name}:8080", http_url_tls=f"https://{name}:8443"))
    others[url] = ownership

    async def lookup(topic: str) -> LookupAnswer:
        return await ownership.lookup(TopicName.parse(topic), authoritative=False)

    async def follow(url: str, topic: str, authoritative: bool) -> str:
        answer = await others[url].lookup(TopicName.parse(topic), authoritative=authoritative)
        assert not answer.redirect or answer.authoritative
        if answer.redirect:
            return await follow(answer.service_url, topic, True)
        return answer.service_url

    placement = BundleCoordinatorPlacement(ownership, registry, lookup, follow)
    coordinators.placement = placement
    keeper = CoordinatorKeeper(coordinators, placement, store, clock)
    ownership._on_lost = keeper.bundle_lost  # what BrokerService.unload_bundle does
    return Broker(name, store, ownership, coordinators, placement, keeper, participants)


async def _two_brokers(clock: ManualClock) -> tuple[Broker, Broker]:
    backend = MemoryBackend(clock)
    others: dict[str, BundleOwnership] = {}
    a, b = await _broker(backend, "a", clock, others), await _broker(backend, "b", clock, others)
    for broker in (a, b):  # a's lookups place some on b: b loads them on its pass
        await broker.keeper.keep()
    await a.keeper.keep()
    return a, b


async def test_each_coordinator_is_served_by_one_broker_and_moves_when_its_session_ends() -> None:
    clock = ManualClock()
    a, b = await _two_brokers(clock)
    try:
        assert a.served() | b.served() == set(range(COUNT))
        assert not a.served() & b.served()
        tc = min(a.served()) if a.served() else min(b.served())
        first, second = (a, b) if tc in a.served() else (b, a)
        coordinator = await first.coordinators.acquire(tc)
        txn = await coordinator.new_transaction(60_000)
        await coordinator.add_partitions(txn, ["persistent://t/n/x"])
        with pytest.raises(CoordinatorNotFound):
            await second.coordinators.acquire(tc)  # the other broker sends the client away

        first.store.expire()  # its session ends: its ownership nodes go, it learns it
        await eventually(lambda: coordinator.fenced)
        assert not first.served()
        with pytest.raises(CoordinatorNotFound):
            await coordinator.add_partitions(txn, ["persistent://t/n/y"])
        await second.keeper.keep()
        assert second.served() == set(range(COUNT))
        # The new owner recovered the transaction and ends it on its participants.
        await (await second.coordinators.acquire(tc)).end(txn, COMMIT)
        assert second.participants.ends == [("persistent://t/n/x", txn, COMMIT)]
        assert first.participants.ends == []
    finally:
        await a.close()
        await b.close()


async def test_a_stale_coordinator_meets_the_new_owners_write_and_fences_itself() -> None:
    clock, store = ManualClock(), MemoryMetadataStore()
    stale_topics, failing = RecordingParticipants(), RecordingParticipants(failures=1_000)
    stale = TransactionCoordinator(0, store, stale_topics, clock)
    by_end = await stale.new_transaction(60_000)
    by_timeout = await stale.new_transaction(1_000)
    for txn in (by_end, by_timeout):
        await stale.add_partitions(txn, ["persistent://t/n/x"])

    # The new owner recovers both and commits them; the participants are unreachable, so the
    # records stay COMMITTING.
    owner = TransactionCoordinator(0, store, failing, clock)
    await owner.recover()
    for txn in (by_end, by_timeout):
        with pytest.raises(ConnectionError):
            await owner.end(txn, COMMIT)

    # The stale one (it never learnt it lost the coordinator) tries to abort: its CAS meets the
    # newer version, it fences itself, and the recorded decision stands.
    with pytest.raises(CoordinatorNotFound):
        await stale.end(by_end, ABORT)
    assert stale.fenced
    clock.advance(2.0)  # the stale one's timer would abort the other: fenced, it does nothing
    for _ in range(20):
        await asyncio.sleep(0)
    assert stale_topics.ends == []
    for txn in (by_end, by_timeout):
        got = await store.get(f"{COORDINATORS_ROOT}/0/txns/{txn.key}")
        assert got is not None and b'"COMMITTING"' in got[0]
    await stale.close()
    await owner.close()


async def test_a_fenced_coordinator_stops_retrying_an_end() -> None:
    clock, store = ManualClock(), MemoryMetadataStore()
    failing = RecordingParticipants(failures=1_000_000)
    coordinator = TransactionCoordinator(0, store, failing, clock)
    txn = await coordinator.new_transaction(60_000)
    await coordinator.add_partitions(txn, ["persistent://t/n/x"])
    with pytest.raises(ConnectionError):
        await coordinator.end(txn, COMMIT)
    for _ in range(5):  # retried, backing off
        clock.advance(10.0)
        await asyncio.sleep(0)
    await eventually(lambda: failing.failures < 1_000_000 - 2)
    coordinator.fence()
    tried = failing.failures
    for _ in range(5):
        clock.advance(10.0)
        await asyncio.sleep(0)
    assert failing.failures == tried
    await coordinator.close()


async def test_the_assignment_watch_sends_the_whole_map_again_on_each_change() -> None:
    clock = ManualClock()
    a, b = await _two_brokers(clock)
    watch = TcAssignments(a.coordinators, lambda: ("", ""))
    watch.place_by(a.placement)
    sent: list[pb.BaseCommand] = []
    try:
        watch.watch(1, 9, sent.append)
        await eventually(lambda: len(sent) == 1)

        def owners(cmd: pb.BaseCommand) -> dict[int, tuple[str, str]]:
            update = cmd.watchTcAssignmentsUpdate
            assert update.watch_id == 9 and update.snapshot.parallelism == COUNT
            return {
                x.tc_id: (x.broker_service_url, x.broker_service_url_tls)
                for x in update.snapshot.assignments
            }

        expected = {tc: ("pulsar://a:6650", "pulsar+ssl://a:6651") for tc in a.served()}
        expected |= {tc: ("pulsar://b:6650", "pulsar+ssl://b:6651") for tc in b.served()}
        assert owners(sent[0]) == expected

        b.store.expire()  # b's coordinators are mid-election: absent from the next map
        watch.changed()
        await eventually(lambda: len(sent) == 2)
        assert owners(sent[1]) == {tc: o for tc, o in expected.items() if tc in a.served()}

        await a.keeper.keep()  # a takes them over one by one: the whole map after each
        everything = {tc: ("pulsar://a:6650", "pulsar+ssl://a:6651") for tc in range(COUNT)}
        await eventually(lambda: owners(sent[-1]) == everything)
        assert all(len(owners(cmd)) >= len(owners(sent[1])) for cmd in sent[2:])

        pushed = len(sent)
        watch.changed()  # nothing changed: nothing sent
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(sent) == pushed
        watch.unwatch(1)
        assert watch.watching == 0
    finally:
        await watch.close()
        await a.close()
        await b.close()


async def test_a_snapshot_lists_coordinators_in_order_and_leaves_out_those_without_a_broker() -> (
    None
):
    async def owner_of(tc: int) -> tuple[str, str] | None:
        return None if tc == 1 else (f"pulsar://b{tc}:6650", "")

    snapshot = await build_snapshot(3, owner_of)
    assert snapshot.parallelism == 3
    assert [(x.tc_id, x.broker_service_url) for x in snapshot.assignments] == [
        (0, "pulsar://b0:6650"),
        (2, "pulsar://b2:6650"),
    ]
    assert not snapshot.assignments[0].HasField("broker_service_url_tls")
    assert TxnId(0, 1).coordinator_id == 0


async def test_an_unloaded_coordinator_is_fenced_before_its_bundle_is_free_for_another_broker() -> (
    None
):
    clock = ManualClock()
    a, b = await _two_brokers(clock)
    try:
        first, second = (a, b) if a.served() else (b, a)
        tc = min(first.served())
        coordinator = await first.coordinators.acquire(tc)
        txn = await coordinator.new_transaction(60_000)
        bundle = await first.placement.bundle(tc)

        assert await first.ownership.begin_unload(bundle)  # the node says "disabled"
        assert first.coordinators.serving(tc) is None  # no request is served from here now
        first.keeper.bundle_lost(bundle)  # BrokerService.unload_bundle, before the release
        assert coordinator.fenced
        await second.keeper.keep()
        assert tc not in second.served()  # still held (disabled) by the first broker

        await first.ownership.release(bundle)
        await second.keeper.keep()  # looked up as a client would: the cluster's placement picks
        await first.keeper.keep()
        (owner,) = [x for x in (a, b) if tc in x.served()]
        moved = await owner.coordinators.acquire(tc)
        assert moved is not coordinator
        await moved.add_partitions(txn, ["persistent://t/n/z"])  # recovered, still open
        await moved.end(txn, ABORT)
        assert owner.participants.ends == [("persistent://t/n/z", txn, ABORT)]
    finally:
        await a.close()
        await b.close()


async def test_a_coordinators_web_url_is_its_owners_keeping_https_for_an_https_request() -> None:
    clock = ManualClock()
    a, b = await _two_brokers(clock)
    try:
        tc = min(b.served())
        assert await a.placement.web_url(tc, https=False) == "http://b:8080"
        assert await a.placement.web_url(tc, https=True) == "https://b:8443"
        b.store.expire()  # nobody owns it until a pass places it again
        await eventually(lambda: not b.served())
        assert await a.placement.web_url(tc, https=False) is None
    finally:
        await a.close()
        await b.close()
