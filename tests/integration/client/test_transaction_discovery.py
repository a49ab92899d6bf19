"""How Braid's client finds transaction coordinators (``docs/client.md#transactions``), against a
real in-process broker with ``transactionCoordinatorEnabled=true``.

Scenarios: a broker that advertises ``supports_tc_metadata_discovery`` is asked through **one**
coordinator-assignment watch and never by lookup (the broker counts the open watch, the client
its lookups); a broker without the flag is asked by Pulsar's lookup path and transactions work
the same; the client's map handling - a snapshot without a coordinator (mid-election) parks that
coordinator's requests until a later snapshot names an owner, or until the operation timeout with
a typed error; a snapshot naming another owner retargets the coordinator's handler to it. For the
map handling the snapshots are delivered to the client's watch as the broker would push them
(the broker side of those pushes is pinned by ``tests/unit/broker`` and the cluster test).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

import braid
from braid.client.transaction_coordinator import CoordinatorClient
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.client.conftest import ScalableBroker
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(180)

_names = itertools.count()


def topic(label: str) -> str:
    return f"persistent://public/default/tcd-{label}-{next(_names)}"


def coordinators_of(client: braid.AsyncClient) -> CoordinatorClient:
    found = client._coordinators
    assert found is not None, "no transaction was begun"
    return found


def watching(broker: ScalableBroker) -> int:
    """How many coordinator-assignment watches the broker has open."""

    def read() -> int:
        assert broker.service.transactions is not None
        return broker.service.transactions.assignments.watching

    return int(broker.run(read))


async def commit_one(client: braid.AsyncClient, name: str) -> braid.AsyncTransaction:
    """A transaction sending one message to ``name``, committed and read back."""
    stream = await client.subscribe_stream(name, "reader", initial_position="earliest")
    producer = await client.create_producer(name)
    txn = await client.new_transaction(timeout=60)
    await producer.send(b"in-txn", txn=txn)
    assert await stream.receive_many(1, timeout=0.3) == []
    await txn.commit()
    got = await stream.receive_many(1, timeout=15)
    assert [m.value for m in got] == [b"in-txn"]
    return txn


async def test_the_client_finds_coordinators_through_the_watch_when_the_broker_advertises_it(
    txn_broker: ScalableBroker,
) -> None:
    before = watching(txn_broker)
    async with braid.AsyncClient(txn_broker.service_url, operation_timeout=15) as client:
        await commit_one(client, topic("watch"))
        more = [await client.new_transaction() for _ in range(3)]  # round-robin: other TCs
        for txn in more:
            await txn.abort()
        coordinators = coordinators_of(client)
        assert coordinators.discovery == "watch"
        assert coordinators.lookups == 0  # no PARTITIONED_METADATA / LOOKUP of the assign topic
        assert len({t.most_bits for t in more}) == min(3, coordinators._watch.parallelism)  # type: ignore[union-attr]
        assert watching(txn_broker) == before + 1  # one watch per client, however many TCs
    # Closing the client ends its watch on the broker.
    await eventually(lambda: watching(txn_broker) == before, within=30)


async def test_without_the_flag_the_client_finds_coordinators_by_lookup(
    txn_broker: ScalableBroker,
) -> None:
    flags = txn_broker.service.feature_flags
    txn_broker.run(setattr, flags, "supports_tc_metadata_discovery", False)
    try:
        before = watching(txn_broker)
        async with braid.AsyncClient(txn_broker.service_url, operation_timeout=15) as client:
            await commit_one(client, topic("lookup"))
            coordinators = coordinators_of(client)
            assert coordinators.discovery == "lookup"
            assert coordinators.lookups >= 2  # the partition count, then coordinator 0's owner
            assert watching(txn_broker) == before
    finally:
        txn_broker.run(setattr, flags, "supports_tc_metadata_discovery", True)


def snapshot_update(parallelism: int, owners: dict[int, str]) -> pb.CommandWatchTcAssignmentsUpdate:
    update = pb.CommandWatchTcAssignmentsUpdate(watch_id=0)
    update.snapshot.parallelism = parallelism
    for tc_id, url in sorted(owners.items()):
        update.snapshot.assignments.add(tc_id=tc_id, broker_service_url=url)
    return update


async def test_a_coordinator_mid_election_parks_its_requests_until_a_snapshot_names_its_owner(
    txn_broker: ScalableBroker,
) -> None:
    async with braid.AsyncClient(txn_broker.service_url, operation_timeout=30) as client:
        txn = await client.new_transaction(timeout=120)
        coordinators = coordinators_of(client)
        watch = coordinators._watch
        assert watch is not None
        tc = txn.most_bits
        real = watch.owners()
        # The coordinator's broker goes away: the next snapshot leaves it out.
        watch.on_tc_assignments_update(
            snapshot_update(watch.parallelism, {k: v for k, v in real.items() if k != tc})
        )
        assert tc not in coordinators._handlers  # retargeted: nothing to point at
        commit = asyncio.ensure_future(txn.commit())
        # Full round trips to the broker later, the commit is still parked, not failed.
        producer = await client.create_producer(topic("round-trip"))
        await producer.send(b"plain")
        assert not commit.done()
        assert txn.state is braid.TransactionState.COMMITTING
        # A later snapshot names an owner (here under another name of the same broker, so the
        # handler's connection must change): the parked commit goes there and completes.
        moved = real[tc].replace("127.0.0.1", "localhost")
        watch.on_tc_assignments_update(snapshot_update(watch.parallelism, {**real, tc: moved}))
        await asyncio.wait_for(commit, timeout=30)
        assert txn.state is braid.TransactionState.COMMITTED
        url, conn = coordinators._handlers[tc]
        assert url == moved
        assert conn.address.host == "localhost"
        assert coordinators.lookups == 0


async def test_a_coordinator_absent_past_the_operation_timeout_fails_with_a_typed_error(
    txn_broker: ScalableBroker,
) -> None:
    async with braid.AsyncClient(txn_broker.service_url, operation_timeout=2) as client:
        txn = await client.new_transaction(timeout=120)
        watch = coordinators_of(client)._watch
        assert watch is not None
        tc = txn.most_bits
        real = watch.owners()
        watch.on_tc_assignments_update(
            snapshot_update(watch.parallelism, {k: v for k, v in real.items() if k != tc})
        )
        with pytest.raises(braid.TimeoutError, match="mid-election"):
            await txn.commit()
        assert txn.state is braid.TransactionState.ERROR
        # The owner is back: the errored transaction can be aborted.
        watch.on_tc_assignments_update(snapshot_update(watch.parallelism, real))
        await txn.abort()
        assert txn.state is braid.TransactionState.ABORTED
