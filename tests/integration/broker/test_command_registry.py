"""The broker's extension seam: a command family registered on a running broker serves its
commands on every connection through a per-connection session, which is closed with the
connection - without touching the topic commands."""

from __future__ import annotations

import pytest

from braid.broker.registry import CommandChannel, CommandFamily
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import request

TOPIC = "persistent://public/default/registry"


class LookupSessions:
    """A stand-in for DAG watch sessions: remembers the lookups of one connection."""

    opened: list[LookupSessions] = []

    def __init__(self, channel: CommandChannel) -> None:
        self.channel = channel
        self.session_ids: list[int] = []
        self.closed = False
        LookupSessions.opened.append(self)

    def on_lookup(self, event: CommandReceived) -> None:
        req = event.command.scalableTopicLookup
        self.session_ids.append(req.session_id)
        self.channel.send(
            commands.scalable_topic_update(
                req.session_id, error=pb.ServerError.TopicNotFound, message=req.topic
            )
        )

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def lookup_family(holder: StackHolder) -> list[LookupSessions]:
    LookupSessions.opened = []
    assert holder.stack is not None
    holder.stack.service.commands.register(
        CommandFamily(
            name="test-lookups",
            open_session=LookupSessions,
            handlers={pb.BaseCommand.SCALABLE_TOPIC_LOOKUP: LookupSessions.on_lookup},
        )
    )
    return LookupSessions.opened


def _is_update(cmd: pb.BaseCommand) -> bool:
    return cmd.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE


async def test_a_registered_family_serves_its_command_through_one_session_per_connection(
    holder: StackHolder, lookup_family: list[LookupSessions]
) -> None:
    first, second = await holder.raw(), await holder.raw()
    for raw, session_id in ((first, 7), (first, 8), (second, 9)):
        await raw.send(commands.scalable_topic_lookup(session_id, "topic://public/default/t"))
        update = (await raw.next_command(_is_update)).scalableTopicUpdate
        assert (update.session_id, update.error) == (session_id, pb.ServerError.TopicNotFound)
    assert [s.session_ids for s in lookup_family] == [[7, 8], [9]]
    # The topic commands are served beside it, on the same connection.
    lookup = await request(first, commands.lookup(TOPIC, 1), 1)
    assert lookup.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect


async def test_closing_a_connection_closes_the_sessions_it_opened(
    holder: StackHolder, lookup_family: list[LookupSessions]
) -> None:
    used, idle = await holder.raw(), await holder.raw()
    await used.send(commands.scalable_topic_lookup(1, "topic://public/default/t"))
    await used.next_command(_is_update)
    assert await request(idle, commands.lookup(TOPIC, 1), 1)
    assert len(lookup_family) == 1, "a connection that never used the family opened a session"
    await used.close()
    await eventually(lambda: lookup_family[0].closed, message="the session to be closed")


async def test_a_command_already_served_cannot_be_claimed_by_another_family(
    holder: StackHolder,
) -> None:
    assert holder.stack is not None
    registry = holder.stack.service.commands
    with pytest.raises(ValueError, match="SEND"):
        registry.register(
            CommandFamily(
                name="thief",
                open_session=LookupSessions,
                handlers={
                    pb.BaseCommand.SCALABLE_TOPIC_CLOSE: LookupSessions.on_lookup,
                    pb.BaseCommand.SEND: LookupSessions.on_lookup,
                },
            )
        )
    # Nothing was registered: the free command stays unserved.
    assert registry.family_of(pb.BaseCommand.SCALABLE_TOPIC_CLOSE) is None


async def test_an_unserved_command_with_a_request_id_is_refused(holder: StackHolder) -> None:
    raw = await holder.raw()
    answer = await request(raw, commands.scalable_topic_unsubscribe(5, 1), 5)
    assert answer.error.error == pb.ServerError.NotAllowedError
    assert "SCALABLE_TOPIC_UNSUBSCRIBE" in answer.error.message
