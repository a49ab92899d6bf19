"""The caps on scalable-topic sessions and lookups (ADR 0044): a connection's DAG-watch and
namespace-watch sessions stop at ``scalableTopicMaxSessionsPerConnection`` with
``TooManyRequests`` naming the key, a reused id or a closed session frees nothing twice, and every
kind of lookup is refused at ``maxConcurrentLookupRequest``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.core.names import TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.service import ScalableTopicSettings
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack, open_scalable_stack

TOPIC = "topic://public/default/limited"


@pytest.fixture
async def capped(tmp_path: Path) -> AsyncIterator[ScalableStack]:
    stack = await open_scalable_stack(
        tmp_path / "broker",
        settings=ScalableTopicSettings(max_sessions_per_connection=3),
        max_concurrent_lookup_request=1,
    )
    try:
        await stack.scalable.create_topic(TopicName.parse(TOPIC), 1)
        yield stack
    finally:
        await stack.close()


async def _dag_answer(raw: RawClient, session_id: int) -> pb.CommandScalableTopicUpdate:
    await raw.send(commands.scalable_topic_lookup(session_id, TOPIC))
    cmd = await raw.next_command(
        lambda c: (
            c.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE
            and c.scalableTopicUpdate.session_id == session_id
        )
    )
    return cmd.scalableTopicUpdate


async def _watch_answer(raw: RawClient, watch_id: int) -> pb.CommandWatchScalableTopicsUpdate:
    await raw.send(commands.watch_scalable_topics(watch_id, "public/default"))
    cmd = await raw.next_command(
        lambda c: (
            c.type == pb.BaseCommand.WATCH_SCALABLE_TOPICS_UPDATE
            and c.watchScalableTopicsUpdate.watch_id == watch_id
        )
    )
    return cmd.watchScalableTopicsUpdate


@pytest.mark.timeout(60)
async def test_a_connections_dag_and_namespace_sessions_stop_at_the_per_connection_cap(
    capped: ScalableStack,
) -> None:
    raw = await RawClient.open("127.0.0.1", capped.broker.service.port)
    other = await RawClient.open("127.0.0.1", capped.broker.service.port)
    try:
        assert not (await _dag_answer(raw, 1)).HasField("error")
        assert not (await _dag_answer(raw, 1)).HasField("error")  # a reused id: still one
        assert not (await _watch_answer(raw, 7)).HasField("error")
        assert not (await _dag_answer(raw, 2)).HasField("error")
        refused = await _dag_answer(raw, 3)
        assert refused.error == pb.TooManyRequests
        assert "scalableTopicMaxSessionsPerConnection" in refused.message
        watch_refused = await _watch_answer(raw, 8)
        assert watch_refused.error == pb.TooManyRequests
        # Another connection has caps of its own.
        assert not (await _dag_answer(other, 3)).HasField("error")
        # Closing a session frees its place.
        await raw.send(commands.wrap(pb.CommandScalableTopicClose(session_id=2)))
        assert not (await _dag_answer(raw, 3)).HasField("error")
        watches = capped.scalable.watches
        assert len(watches._watches[TOPIC]) == 3  # raw's 1 and 3, other's 3
    finally:
        await raw.close()
        await other.close()


@pytest.mark.timeout(60)
async def test_every_kind_of_lookup_is_refused_at_max_concurrent_lookup_request(
    capped: ScalableStack,
) -> None:
    lookups = capped.broker.service.lookups
    raw = await RawClient.open("127.0.0.1", capped.broker.service.port)
    try:
        with lookups.slot():  # the one slot the broker has, held by "another client"
            scalable = await _dag_answer(raw, 1)
            assert scalable.error == pb.TooManyRequests
            assert "maxConcurrentLookupRequest=1" in scalable.message
            watch = await _watch_answer(raw, 2)
            assert watch.error == pb.TooManyRequests
            await raw.send(commands.partitioned_metadata("persistent://public/default/p", 10))
            meta = await raw.next_command(lambda c: c.HasField("partitionMetadataResponse"))
            assert meta.partitionMetadataResponse.error == pb.TooManyRequests
            await raw.send(commands.lookup("persistent://public/default/p", 11))
            lookup = await raw.next_command(lambda c: c.HasField("lookupTopicResponse"))
            # The C++ client drops its connection on TooManyRequests in a lookup: MetadataError.
            assert lookup.lookupTopicResponse.error == pb.MetadataError
            assert "maxConcurrentLookupRequest" in lookup.lookupTopicResponse.message
        assert lookups.refused == 4 and lookups.in_flight == 0
        assert not (await _dag_answer(raw, 1)).HasField("error")
        assert (await _watch_answer(raw, 2)).HasField("error") is False
    finally:
        await raw.close()
