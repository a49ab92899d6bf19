"""Controller leader failover with ZooKeeper as the metadata store: two brokers' control planes,
each with its own ZooKeeper session, compete for one topic; the leader's session ending (a closed
broker, or an expired session) hands the topic to the other, which restores every consumer and
keeps serving splits."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.core.names import TopicName
from braid.scalable.coordinator import ConsumerAssignmentView
from braid.scalable.resources import SubscriptionType
from tests.support.polling import eventually
from tests.support.scalable_stack import ScalableStack, open_scalable_stack, second_service
from tests.support.zookeeper import ZooKeeperServer

TOPIC = TopicName.parse("topic://public/default/orders")


class Connection:
    closed = False

    def send_assignment_update(self, consumer_id: int, assignment: ConsumerAssignmentView) -> None:
        pass


@pytest.fixture
async def zk_stack(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> AsyncIterator[ScalableStack]:
    url = zookeeper_server.url(f"/braid-{uuid.uuid4().hex[:8]}")
    stack = await open_scalable_stack(tmp_path / "b", metadata_store_url=url)
    try:
        yield stack
    finally:
        await stack.close()


async def test_the_other_broker_takes_over_and_restores_the_consumers(
    zk_stack: ScalableStack,
) -> None:
    stack = zk_stack
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.register_consumer(
        str(TOPIC), "s", "c1", 1, SubscriptionType.STREAM, Connection()
    )
    other = await second_service(stack, broker_url="pulsar://127.0.0.1:2")
    try:
        follower = await other.scalable.controller(TOPIC)
        assert not follower.is_leader
        await stack.scalable.close()  # the leading broker goes away
        await eventually(lambda: follower.is_leader, within=30, message="ZooKeeper failover")
        await follower.wait_ready()
        coordinator = follower.coordinator("s")
        assert coordinator is not None and coordinator.consumer_names == ["c1"]
        layout = await other.scalable.split(TOPIC, 1)
        assert layout.epoch == 1
    finally:
        await other.close()


async def test_an_expired_leader_session_hands_over_leadership(
    zk_stack: ScalableStack, zookeeper_server: ZooKeeperServer
) -> None:
    stack = zk_stack
    await stack.scalable.create_topic(TOPIC, 1)
    other = await second_service(stack, broker_url="pulsar://127.0.0.1:2")
    try:
        leader = await other.scalable.controller(TOPIC)
        assert leader.is_leader
        follower = await stack.scalable.controller(TOPIC)
        assert not follower.is_leader
        zookeeper_server.expire_session(other.store.client_id)  # type: ignore[attr-defined]
        await eventually(lambda: follower.is_leader, within=30, message="failover after expiry")
        assert not leader.is_leader
        assert (await stack.scalable.split(TOPIC, 0)).epoch == 1
    finally:
        await other.close()
