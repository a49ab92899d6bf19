"""The leader router on real brokers: where each leader-only operation runs.

Two control planes share one metadata store and data-plane broker (:func:`second_service`), one
of them leading the topic. With admin APIs on both (an in-process standalone plus a second
service with its own admin server), a follower forwards every leader-only operation over HTTP to
the leader and returns the leader's answer, typed errors included; a forwarded request that
reaches a follower is refused instead of travelling again. Without the leader's admin address,
mutations fail retriably and stats fall back to the follower's own view.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from braid.admin import AdminServer, create_app
from braid.cli.standalone import StandaloneServer
from braid.clock import SystemClock
from braid.core.errors import IllegalStateError, NotFoundError
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import TopicName
from braid.metadata import MetadataStore, open_store
from braid.scalable.errors import NotLeader
from braid.scalable.forwarding import FORWARDED_HEADER
from braid.scalable.install import BrokerNamespaces
from braid.scalable.leader_router import Where
from braid.scalable.resources import SubscriptionType
from braid.scalable.segments import LocalSegmentAdmin
from braid.scalable.service import ScalableTopicService
from tests.support.scalable_stack import ScalableStack, second_service
from tests.support.standalone import standalone_config

#: The admin API takes a POST only as JSON (its cross-site guard).
JSON = {"Content-Type": "application/json"}

TOPIC = TopicName.parse("topic://public/default/orders")
ADMIN_PATH = "/admin/v2/scalable/public/default/orders"
FOLLOWER_URL = "pulsar://127.0.0.1:1"


@dataclass
class TwoBrokers:
    """``leader``: a standalone whose controller leads the topic; ``follower``: another broker's
    control plane on the same store, with an admin API of its own at ``follower_web``."""

    leader: StandaloneServer
    follower: ScalableTopicService
    follower_web: str

    @property
    def leading(self) -> ScalableTopicService:
        assert self.leader.scalable is not None
        return self.leader.scalable


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[TwoBrokers]:
    leader = StandaloneServer(standalone_config(tmp_path / "leader"))
    await leader.start()
    store: MetadataStore | None = None
    admin: AdminServer | None = None
    follower: ScalableTopicService | None = None
    try:
        assert leader.scalable is not None and leader.broker is not None
        assert leader.resources is not None
        await leader.scalable.create_topic(TOPIC, 2)
        assert (await leader.scalable.controller(TOPIC)).is_leader
        store = await open_store(leader.config.metadata_store_url)
        follower = ScalableTopicService(
            store=store,
            segments=LocalSegmentAdmin(leader.broker),
            namespaces=BrokerNamespaces(leader.resources, True),
            broker_url=FOLLOWER_URL,
            clock=SystemClock(),
        )
        app = create_app(leader.config, leader.resources, leader.broker, follower)
        admin = AdminServer(app, "127.0.0.1", 0)
        await admin.start()
        await follower.start(admin.url)
        assert not (await follower.controller(TOPIC)).is_leader
        yield TwoBrokers(leader, follower, admin.url)
    finally:
        if follower is not None:
            await follower.close()
        if admin is not None:
            await admin.stop()
        if store is not None:
            await store.close()
        await leader.close()


async def test_a_follower_runs_every_leader_only_operation_on_the_leader(
    brokers: TwoBrokers,
) -> None:
    follower, leading = brokers.follower, brokers.leading
    location = await follower.router.locate(TOPIC)
    assert location.where is Where.THERE and location.leader_url == brokers.leader.service_url

    split = await follower.split(TOPIC, 0, 0x2000)
    assert split == await leading.get_layout(TOPIC) and split.epoch == 1
    assert split.segments[2].hash_range.end == 0x1FFF
    merged = await follower.merge(TOPIC, [2, 3])
    assert merged.epoch == 2 and merged.segments[4].is_active

    await follower.create_subscription(TOPIC, "s", SubscriptionType.CHECKPOINT, earliest=True)
    subscriptions = await leading.resources.list_subscriptions(TOPIC)
    assert subscriptions["s"].type is SubscriptionType.CHECKPOINT
    await follower.seek_subscription(TOPIC, "s", 0)
    stats = await follower.stats(TOPIC)
    assert stats["controller"]["isLeader"] and stats["epoch"] == 2
    assert "autoScale" in stats  # described where it was taken, on the leader
    await follower.delete_subscription(TOPIC, "s")
    assert await leading.resources.list_subscriptions(TOPIC) == {}


async def test_the_leader_refusals_come_back_in_the_same_error_categories(
    brokers: TwoBrokers,
) -> None:
    follower = brokers.follower
    with pytest.raises(NotFoundError, match="segment 99 is not in the layout"):
        await follower.split(TOPIC, 99)
    with pytest.raises(NotFoundError, match="missing"):
        await follower.delete_subscription(TOPIC, "missing")
    await follower.split(TOPIC, 0)
    with pytest.raises(IllegalStateError, match=r"\[0\] already sealed"):
        await follower.merge(TOPIC, [0, 1])  # 0 is sealed now
    assert (await brokers.leading.get_layout(TOPIC)).epoch == 1


async def test_the_follower_admin_api_forwards_but_never_forwards_a_forwarded_request(
    brokers: TwoBrokers,
) -> None:
    async with httpx.AsyncClient(base_url=brokers.follower_web, timeout=30) as http:
        answer = await http.post(f"{ADMIN_PATH}/split/1", headers=JSON)
        assert answer.status_code == 200
        assert layout_from_metadata(answer.json()) == await brokers.leading.get_layout(TOPIC)
        again = await http.post(f"{ADMIN_PATH}/split/2", headers={FORWARDED_HEADER: "1", **JSON})
        assert again.status_code == 503
        assert "not the controller leader" in again.json()["reason"]
        assert brokers.leader.service_url in again.json()["reason"]
        stats = await http.get(f"{ADMIN_PATH}/stats", headers={FORWARDED_HEADER: "1"})
        assert stats.status_code == 200 and not stats.json()["controller"]["isLeader"]
    assert (await brokers.leading.get_layout(TOPIC)).epoch == 1


# --- without the leader's admin API (the in-process stack runs none) --------------------------


async def test_a_forwarded_mutation_on_a_follower_is_refused_naming_the_leader(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.controller(TOPIC)
    other = await second_service(stack, broker_url=FOLLOWER_URL)
    try:
        leader_url = stack.broker.service.service_url
        with pytest.raises(NotLeader, match=f"the leader is {leader_url}"):
            await other.scalable.split(TOPIC, 0, forwarded=True)
        with pytest.raises(NotLeader, match="admin address is not registered"):
            await other.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM)
        stats = await other.scalable.stats(TOPIC)  # the leader is unreachable: its own view
        assert not stats["controller"]["isLeader"] and stats["epoch"] == 0
        assert (await stack.scalable.router.locate(TOPIC)).where is Where.HERE
        assert (await stack.scalable.split(TOPIC, 0, forwarded=True)).epoch == 1
    finally:
        await other.close()


async def test_a_broker_the_store_still_names_as_leader_does_not_forward_to_itself(
    stack: ScalableStack,
) -> None:
    # A restarted broker on the same URL while its old session's election node lingers: the
    # leader it reads is itself, so it must neither forward (to itself) nor act as the leader.
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.controller(TOPIC)
    same_url = stack.broker.service.service_url
    twin = await second_service(stack, broker_url=same_url)
    try:
        assert (await twin.scalable.router.locate(TOPIC)).where is Where.NOWHERE
        with pytest.raises(NotLeader, match="electing a leader"):
            await twin.scalable.merge(TOPIC, [0, 1])
        stats = await twin.scalable.stats(TOPIC)
        assert not stats["controller"]["isLeader"]
    finally:
        await twin.close()


async def test_with_authentication_a_follower_forwards_with_its_broker_client_credentials(
    tmp_path: Path,
) -> None:
    import base64

    from braid.core.errors import AuthorizationError
    from braid.security import tokens
    from braid.security.credentials import from_plugin

    secret = b"b" * 32
    leader = StandaloneServer(
        standalone_config(
            tmp_path / "leader",
            authentication_enabled=True,
            authentication_providers=(tokens.CLASS_NAME,),
            token_secret_key="data:;base64," + base64.b64encode(secret).decode(),
        )
    )
    await leader.start()
    store = await open_store(leader.config.metadata_store_url)
    followers: list[ScalableTopicService] = []
    try:
        assert leader.scalable is not None and leader.broker is not None
        assert leader.resources is not None
        await leader.scalable.create_topic(TOPIC, 2)
        assert (await leader.scalable.controller(TOPIC)).is_leader
        token = tokens.create_token("broker", secret_key=secret)
        plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
        for index, credentials in enumerate((None, from_plugin(plugin, f"token:{token}"))):
            follower = ScalableTopicService(
                store=store,
                segments=LocalSegmentAdmin(leader.broker),
                namespaces=BrokerNamespaces(leader.resources, True),
                broker_url=f"pulsar://127.0.0.1:{index + 1}",
                clock=SystemClock(),
                broker_client_credentials=credentials,
            )
            followers.append(follower)
            await follower.start(None)
        without, with_credentials = followers
        with pytest.raises(AuthorizationError):
            await without.split(TOPIC, 0)
        assert (await with_credentials.split(TOPIC, 0)).epoch == 1
    finally:
        for follower in followers:
            await follower.close()
        await store.close()
        await leader.close()
