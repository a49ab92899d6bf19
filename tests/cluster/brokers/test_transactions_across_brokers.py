"""Transactions across three ``braid broker`` processes (ADR 0070): the coordinator is served by
the owner of its assign partition's bundle, produces to topics owned by two brokers and
acknowledges on a third reach them over the binary protocol, and a SIGKILL of the coordinator's
broker - with a transaction open, or right after END_TXN's decision is recorded while a participant
broker is down - ends every transaction as decided on every participant. Visibility is checked
with the official client: exactly the committed messages, once each. The commit-and-abort scenario
runs twice: with plain connections between brokers, and with TLS between brokers configured
(``brokerClientTlsEnabled``, mutual TLS), where the coordinator reaches the participants at their
``pulsar+ssl://`` URLs only. The coordinator admin routes answer for the whole cluster from any
broker (ADR 0071).

The transactional side speaks the Java client's commands (:mod:`tests.support.txn_wire`), each
connection to the broker serving what it talks to, as a client's lookups would pick. Braid's own
client rides along the kill: it finds coordinator 0 through the assignment watch, and the snapshot
after the kill retargets its handler to the survivor (no lookup), where its open transaction
commits.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pulsar
import pytest

import braid
from braid.broker.bundles import NamespaceBundles
from braid.broker.ownership import OwnerData
from braid.core.names import TopicName
from braid.metadata import open_store
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_cluster import BUNDLES, Cluster, bundle_of
from tests.support.broker_process import BrokerProcess
from tests.support.certificates import TestCertificateAuthority
from tests.support.polling import eventually, wait_for
from tests.support.raw_client import RawClient
from tests.support.txn_wire import Txn, TxnWire, error_name

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

T = TypeVar("T")
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
SETTINGS = {"transactionCoordinatorEnabled": "true"}


def _run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


async def _read(zk_url: str, path: str) -> bytes | None:
    store = await open_store(zk_url)
    try:
        got = await store.get(path)
        return None if got is None else got[0]
    finally:
        await store.close()


def coordinator_owner(cluster: Cluster, tc_id: int = 0) -> str | None:
    """The service URL of the broker serving coordinator ``tc_id``, as ZooKeeper says."""
    topic = TopicName.parse(f"{ASSIGN}-partition-{tc_id}")
    bundle = NamespaceBundles.of("pulsar/system", BUNDLES).find(topic).range_name
    raw = _run(_read(cluster.zk_url, f"/namespace/pulsar/system/{bundle}"))
    owner = None if raw is None else OwnerData.decode(raw)
    return None if owner is None or owner.disabled else owner.native_url


def txn_status(cluster: Cluster, txn: Txn) -> str | None:
    raw = _run(
        _read(cluster.zk_url, f"/transactions/coordinators/{txn.most}/txns/{txn.most}-{txn.least}")
    )
    return None if raw is None else str(json.loads(raw)["status"])


def spread_topics(cluster: Cluster, prefix: str) -> dict[str, str]:
    """One topic per broker, ``broker service URL -> topic``: each in a bundle nobody owned,
    taken by that broker through an authoritative LOOKUP (as a redirected client's)."""
    found: dict[str, str] = {}
    taken: set[str] = set()
    names = (f"persistent://public/default/{prefix}-{i}" for i in range(200))
    for broker in cluster.brokers:
        for topic in names:
            bundle = bundle_of(topic)
            if bundle in taken or cluster.owner_of(topic) is not None:
                continue
            taken.add(bundle)
            if _run(_take(broker, topic)) == broker.service_url:
                found[broker.service_url] = topic
                break
    assert len(found) == len(cluster.brokers), found
    return found


async def _take(broker: BrokerProcess, topic: str) -> str:
    wire = await TxnWire.open(broker.host, broker.port)
    try:
        rid = wire.next_id()
        answer = await wire.request(commands.lookup(topic, rid, authoritative=True), rid)
        return str(answer.lookupTopicResponse.brokerServiceUrl)
    finally:
        await wire.close()


def _open(broker: BrokerProcess) -> Awaitable[TxnWire]:
    return TxnWire.open(broker.host, broker.port)


async def _with_wires(
    cluster: Cluster, urls: list[str], scenario: Callable[..., Awaitable[T]]
) -> T:
    wires = [await _open(cluster.by_url(url)) for url in urls]
    try:
        return await scenario(*wires)
    finally:
        for wire in wires:
            await wire.close()


def _drain(client: pulsar.Client, topic: str, subscription: str, want: int) -> list[str]:
    """Every message ``subscription`` gets (from the earliest), expecting ``want`` of them, plus
    whatever else arrives within a short while after (there must be nothing)."""
    consumer = client.subscribe(
        topic,
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    got: list[str] = []
    try:
        while len(got) < want:
            msg = consumer.receive(timeout_millis=60_000)
            got.append(msg.data().decode())
            consumer.acknowledge(msg)
        try:
            extra = consumer.receive(timeout_millis=1_500)
            got.append(extra.data().decode())
        except pulsar.Timeout:
            pass
    finally:
        consumer.close()
    return got


class AssignmentWatch:
    """A coordinator-assignment watch on ``broker``, kept open in a thread of its own: ``maps``
    is every map it received (``tc_id -> service URL``), in order."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.maps: list[dict[int, str]] = []
        self.parallelism = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(broker)))
        self._thread.start()

    async def _run(self, broker: BrokerProcess) -> None:
        raw = await RawClient.open(broker.host, broker.port)
        try:
            await raw.send(commands.wrap(pb.CommandWatchTcAssignments(watch_id=1)))
            while not self._stop.is_set():
                try:
                    cmd = await raw.next_command(_is_update, within=0.5)
                except TimeoutError:
                    continue
                snapshot = cmd.watchTcAssignmentsUpdate.snapshot
                self.parallelism = snapshot.parallelism
                self.maps.append({a.tc_id: a.broker_service_url for a in snapshot.assignments})
        finally:
            await raw.close()

    def last(self) -> dict[int, str]:
        return self.maps[-1] if self.maps else {}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _is_update(cmd: pb.BaseCommand) -> bool:
    return cmd.type == pb.BaseCommand.WATCH_TC_ASSIGNMENTS_UPDATE


class Participants:
    """Two produced topics (``a``, ``b``) and an acknowledged one (``s``), on three brokers."""

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        by_owner = spread_topics(cluster, prefix)
        (self.a_owner, self.a), (self.b_owner, self.b), (self.s_owner, self.s) = by_owner.items()

    async def begin(
        self,
        tc: TxnWire,
        pa: TxnWire,
        pb_: TxnWire,
        sw: TxnWire,
        label: str,
        acks: list[pb.MessageIdData],
    ) -> Txn:
        """A transaction producing 3 messages to ``a`` and to ``b`` and acknowledging ``acks``
        on ``s`` (``sw`` consumes ``s`` as ``sub``, consumer id 7)."""
        txn = await tc.new_txn(ttl_ms=300_000)
        for topic in (self.a, self.b):
            assert (
                error_name((await tc.add_partition(txn, topic)).addPartitionToTxnResponse) is None
            )
        response = await tc.add_subscription(txn, self.s, "sub")
        assert error_name(response.addSubscriptionToTxnResponse) is None
        for wire, topic, pid in ((pa, self.a, 1), (pb_, self.b, 2)):
            name = f"{label}-{pid}"
            await wire.create_producer(topic, pid, name)
            for n in range(3):
                sent = await wire.send(pid, name, n, f"{label}-{topic[-6:]}-{n}".encode(), txn)
                assert sent.type == pb.BaseCommand.SEND_RECEIPT, sent
        for message_id in acks:
            ack = await sw.ack(7, message_id, txn)
            assert error_name(ack) is None, ack
        return txn


async def _consume_s(sw: TxnWire, topic: str, count: int) -> list[pb.MessageIdData]:
    """Subscribe ``sw`` to ``topic`` as ``sub`` (consumer 7); the ids of its first messages."""
    await sw.subscribe(topic, "sub", 7)
    return [(await sw.next_message(within=60)).command.message.message_id for _ in range(count)]


def _fill_s(cluster: Cluster, topic: str, count: int) -> None:
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for n in range(count):
            producer.send(f"plain-{n}".encode())
    finally:
        client.close()


async def _commit_at(broker: BrokerProcess, txn: Txn) -> None:
    """Commit ``txn`` through coordinator 0 on ``broker``."""
    tc = await _open(broker)
    try:
        await tc.connect_coordinator()
        assert error_name(await tc.end(txn, pb.TxnAction.COMMIT)) is None
    finally:
        await tc.close()


def _coordinator_ready(cluster: Cluster) -> str:
    wait_for(lambda: coordinator_owner(cluster) is not None, within=60, message="coordinator 0")
    owner = coordinator_owner(cluster)
    assert owner is not None
    return owner


@pytest.mark.parametrize("between_brokers", ["plain", "tls"])
def test_a_transaction_across_three_brokers_commits_and_aborts_exactly(
    make_cluster: Callable[..., Cluster], tmp_path: Path, between_brokers: str
) -> None:
    extra = SETTINGS if between_brokers == "plain" else {**SETTINGS, **tls_settings(tmp_path)}
    cluster = make_cluster(extra=extra)
    cluster.start()
    if between_brokers == "tls":  # the coordinators reach each other at these URLs
        wait_for(lambda: len(cluster.registry()) == 3, within=30, message="three brokers")
        tls_urls = [e.get("pulsarServiceUrlTls") for e in cluster.registry().values()]
        assert all(str(u).startswith("pulsar+ssl://") for u in tls_urls), tls_urls
    parts = Participants(cluster, "txm")
    _fill_s(cluster, parts.s, 4)
    tc_url = _coordinator_ready(cluster)

    async def scenario(tc: TxnWire, pa: TxnWire, pb_: TxnWire, sw: TxnWire) -> list[Txn]:
        await tc.connect_coordinator()
        ids = await _consume_s(sw, parts.s, 4)
        committed = await parts.begin(tc, pa, pb_, sw, "c", acks=ids[:2])
        assert error_name(await tc.end(committed, pb.TxnAction.COMMIT)) is None
        aborted = await parts.begin(tc, pa, pb_, sw, "x", acks=ids[2:])
        assert error_name(await tc.end(aborted, pb.TxnAction.ABORT)) is None
        return [committed, aborted]

    urls = [tc_url, parts.a_owner, parts.b_owner, parts.s_owner]
    for txn in _run(_with_wires(cluster, urls, scenario)):
        assert txn_status(cluster, txn) is None  # ended everywhere: the record is gone
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        for topic in (parts.a, parts.b):
            want = [f"c-{topic[-6:]}-{n}" for n in range(3)]
            assert _drain(client, topic, "check", 3) == want
        # The commit applied the acks of plain-0/1; the abort released plain-2/3.
        assert sorted(_drain(client, parts.s, "sub", 2)) == ["plain-2", "plain-3"]
    finally:
        client.close()


def test_killing_the_coordinators_broker_ends_open_and_decided_transactions(
    cluster_txn: Cluster,
) -> None:
    cluster = cluster_txn
    parts = Participants(cluster, "txk")
    _fill_s(cluster, parts.s, 4)
    tc_url = _coordinator_ready(cluster)
    coordinator = cluster.by_url(tc_url)
    # (b) needs a participant broker other than the coordinator's, and a third that survives.
    down = cluster.by_url(next(u for u in (parts.a_owner, parts.b_owner) if u != tc_url))
    survivor = next(b for b in cluster.brokers if b not in (coordinator, down))
    watch = AssignmentWatch(survivor)
    # Braid's client, asking the survivor: it finds coordinators through the watch.
    client = braid.Client(survivor.service_url, operation_timeout=60)
    try:
        _kill_and_recover(cluster, parts, coordinator, down, survivor, watch, client)
    finally:
        client.close()
        watch.stop()


def _kill_and_recover(
    cluster: Cluster,
    parts: Participants,
    coordinator: BrokerProcess,
    down: BrokerProcess,
    survivor: BrokerProcess,
    watch: AssignmentWatch,
    client: braid.Client,
) -> None:
    tc_url = coordinator.service_url
    wait_for(lambda: watch.last().get(0) == tc_url, within=30, message="the watch names tc 0")
    braid_txn = client.new_transaction(timeout=300)  # round-robin starts at coordinator 0
    assert braid_txn.txn_id[0] == 0
    coordinators = client.async_client._coordinators
    assert coordinators is not None
    assert coordinators.discovery == "watch"
    assert coordinators._handlers[0][0] == tc_url

    async def begin_both(tc: TxnWire, pa: TxnWire, pb_: TxnWire, sw: TxnWire) -> tuple[Txn, Txn]:
        await tc.connect_coordinator()
        ids = await _consume_s(sw, parts.s, 4)
        open_txn = await parts.begin(tc, pa, pb_, sw, "o", acks=ids[:2])
        decided = await parts.begin(tc, pa, pb_, sw, "d", acks=ids[2:])
        return open_txn, decided

    urls = [tc_url, parts.a_owner, parts.b_owner, parts.s_owner]
    open_txn, decided = _run(_with_wires(cluster, urls, begin_both))

    # (b): a participant broker is down, so the commit cannot finish once it is recorded ...
    down.kill()

    async def commit_decided() -> None:
        tc = await _open(coordinator)
        try:
            await tc.connect_coordinator()
            await tc.raw.send(_end_txn(decided, pb.TxnAction.COMMIT))  # no wait for the answer
            await _await(lambda: txn_status(cluster, decided) == "COMMITTING")
        finally:
            await tc.close()

    _run(commit_decided())
    # ... and then the coordinator's broker dies too, the decision recorded, nothing told.
    assert txn_status(cluster, decided) == "COMMITTING"
    coordinator.kill()

    # The survivor takes coordinator 0 over, drives the recorded commit to every participant,
    # and the open transaction can still be committed by its id.
    wait_for(
        lambda: coordinator_owner(cluster) == survivor.service_url,
        within=60,
        message="coordinator 0 on the surviving broker",
    )
    wait_for(lambda: txn_status(cluster, decided) is None, within=90, message="decided txn ended")
    # The watch on the survivor got the whole map again: every coordinator is the survivor's now.
    wait_for(
        lambda: watch.last() == {tc: survivor.service_url for tc in range(watch.parallelism)},
        within=60,
        message=lambda: f"every coordinator on the survivor in the watch's map: {watch.last()}",
    )
    assert watch.parallelism == 16

    assert txn_status(cluster, open_txn) == "OPEN"

    _run(_commit_at(survivor, open_txn))
    assert txn_status(cluster, open_txn) is None
    # Braid's client: its handler of coordinator 0 was retargeted to the survivor by a snapshot,
    # never by a lookup.
    braid_txn.commit()
    assert braid_txn.state is braid.TransactionState.COMMITTED
    assert coordinators._handlers[0][0] == survivor.service_url
    assert coordinators.lookups == 0
    client = pulsar.Client(survivor.service_url, operation_timeout_seconds=60)
    try:
        for topic in (parts.a, parts.b):
            want = sorted(f"{label}-{topic[-6:]}-{n}" for label in "od" for n in range(3))
            got = _drain(client, topic, "check", 6)
            assert sorted(got) == want, got  # lost = duplicated = 0
        # Both commits applied their acks: nothing of s is left for "sub".
        consumer = client.subscribe(parts.s, "sub", consumer_type=pulsar.ConsumerType.Shared)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=2_000)
    finally:
        client.close()


def _admin(broker: BrokerProcess, path: str, *, follow: bool = True) -> httpx.Response:
    with httpx.Client(base_url=broker.web_url, timeout=60, follow_redirects=follow) as http:
        return http.get(f"/admin/v3/transactions{path}")


def _json(broker: BrokerProcess, path: str) -> dict[str, object]:
    response = _admin(broker, path)
    assert response.status_code == 200, (path, response.status_code, response.text)
    found = response.json()
    assert isinstance(found, dict)
    return found


def test_the_coordinator_admin_routes_answer_for_the_whole_cluster_from_any_broker(
    cluster_txn: Cluster,
) -> None:
    cluster = cluster_txn
    parts = Participants(cluster, "txa")
    _fill_s(cluster, parts.s, 2)
    tc_url = _coordinator_ready(cluster)
    tc_broker = cluster.by_url(tc_url)
    elsewhere = next(b for b in cluster.brokers if b is not tc_broker)
    # Every broker lists all 16 coordinators, each with the broker ZooKeeper says serves it.
    wait_for(
        lambda: all(len(_json(b, "/coordinators")) == 16 for b in cluster.brokers),
        within=60,
        message=lambda: f"16 coordinators listed: {_json(elsewhere, '/coordinators')}",
    )
    listed = _json(elsewhere, "/coordinators")
    for broker in cluster.brokers:
        assert _json(broker, "/coordinators") == listed
    for tc_id in (0, 5, 15):
        assert listed[str(tc_id)] == {
            "id": tc_id,
            "brokerServiceUrl": coordinator_owner(cluster, tc_id),
        }

    async def begin(tc: TxnWire, pa: TxnWire, pb_: TxnWire, sw: TxnWire) -> Txn:
        await tc.connect_coordinator()
        ids = await _consume_s(sw, parts.s, 2)
        return await parts.begin(tc, pa, pb_, sw, "m", acks=ids[:1])

    urls = [tc_url, parts.a_owner, parts.b_owner, parts.s_owner]
    txn = _run(_with_wires(cluster, urls, begin))

    # The transaction's metadata, asked of a broker not serving coordinator 0: a redirect there.
    path = f"/transactionMetadata/{txn.most}/{txn.least}"
    moved = _admin(elsewhere, path, follow=False)
    assert moved.status_code == 307
    assert (
        moved.headers["location"] == f"{tc_broker.web_url.rstrip('/')}/admin/v3/transactions{path}"
    )
    meta = _json(elsewhere, path)
    assert meta["status"] == "OPEN"
    produced = meta["producedPartitions"]
    assert isinstance(produced, dict) and set(produced) == {parts.a, parts.b}
    # Each produced partition's stats come from the broker owning it (all three differ).
    for topic in (parts.a, parts.b):
        assert produced[topic]["startPosition"] is not None, produced
        assert produced[topic]["aborted"] is False
    assert meta["ackedPartitions"] == {parts.s: {"sub": {"cumulativeAckPosition": None}}}

    stats = _json(elsewhere, "/coordinatorStats")
    assert sorted(stats, key=int) == [str(n) for n in range(16)]
    assert stats["0"]["ongoingTxnSize"] == 1  # type: ignore[index]
    one = _json(elsewhere, "/coordinatorStats?coordinatorId=0")
    assert one["ongoingTxnSize"] == 1
    assert _admin(elsewhere, "/coordinatorStats?coordinatorId=0", follow=False).status_code == 307
    slow = _json(elsewhere, "/slowTransactions/0")
    assert list(slow) == [f"({txn.most},{txn.least})"]
    assert _json(elsewhere, "/slowTransactions/600000") == {}
    assert _admin(elsewhere, "/coordinatorStats?coordinatorId=16").status_code == 404

    _run(_commit_at(tc_broker, txn))
    assert _admin(elsewhere, path).status_code == 404
    assert _json(elsewhere, "/coordinatorStats")["0"]["ongoingTxnSize"] == 0  # type: ignore[index]


def _end_txn(txn: Txn, action: pb.TxnAction.ValueType) -> pb.BaseCommand:
    return commands.wrap(
        pb.CommandEndTxn(
            request_id=10_000,
            txnid_most_bits=txn.most,
            txnid_least_bits=txn.least,
            txn_action=action,
        )
    )


async def _await(condition: Callable[[], bool]) -> None:
    await eventually(lambda: asyncio.to_thread(condition), within=30, interval=0.02)


def tls_settings(tmp_path: Path) -> dict[str, str]:
    """broker.conf: TLS between brokers (Pulsar's keys) - a pulsar+ssl:// port and an HTTPS admin
    port with mutual TLS, ``brokerClientTlsEnabled`` with the brokers' client certificate - so a
    coordinator ends transactions on the other brokers over pulsar+ssl://."""
    ca = TestCertificateAuthority(tmp_path / "pki")
    server, client = ca.issue("server", server=True), ca.issue("broker")
    return {
        "tlsCertificateFilePath": str(server.cert),
        "tlsKeyFilePath": str(server.key),
        "tlsTrustCertsFilePath": str(ca.cert),
        "tlsRequireTrustedClientCertOnConnect": "true",
        "brokerServicePortTls": "0",
        "webServicePortTls": "0",
        "brokerClientTlsEnabled": "true",
        "brokerClientTrustCertsFilePath": str(ca.cert),
        "brokerClientCertificateFilePath": str(client.cert),
        "brokerClientKeyFilePath": str(client.key),
    }


@pytest.fixture
def cluster_txn(make_cluster: Callable[..., Cluster]) -> Cluster:
    cluster = make_cluster(extra=SETTINGS)
    cluster.start()
    return cluster
