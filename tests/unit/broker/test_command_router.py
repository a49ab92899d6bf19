"""CommandRouter binds a command type to its session's handler on first use (issue 16): later
commands of that type take the bound handler, a type refused because no family served it is
served once a family registers it, and a closed router drops everything."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from braid.broker.registry import CommandChannel, CommandFamily, CommandRegistry, CommandRouter
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb


class _Channel:
    def __init__(self) -> None:
        self.sent: list[pb.BaseCommand] = []

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        self.sent.append(cmd)

    def send_frame(self, frame: bytes) -> None:
        raise AssertionError("not used here")

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        coro.close()

    client_version = "test"
    remote_address = "127.0.0.1:1"
    closed = False


class _Sessions:
    opened: list[_Sessions] = []

    def __init__(self, channel: CommandChannel) -> None:
        self.seen: list[int] = []
        self.closed = False
        _Sessions.opened.append(self)

    def on_success(self, event: CommandReceived) -> None:
        self.seen.append(event.command.success.request_id)

    def on_flow(self, event: CommandReceived) -> None:
        self.seen.append(-event.command.flow.consumer_id)

    async def close(self) -> None:
        self.closed = True


def _family(*types: int) -> CommandFamily[_Sessions]:
    handlers = {
        pb.BaseCommand.SUCCESS: _Sessions.on_success,
        pb.BaseCommand.FLOW: _Sessions.on_flow,
    }
    return CommandFamily(
        name="test", open_session=_Sessions, handlers={t: handlers[t] for t in types}
    )


def test_commands_of_a_family_reach_one_session_in_order() -> None:
    _Sessions.opened = []
    registry = CommandRegistry()
    registry.register(_family(pb.BaseCommand.SUCCESS, pb.BaseCommand.FLOW))
    router = CommandRouter(registry, _Channel())
    for request_id in (1, 2):
        router.dispatch(CommandReceived(commands.success(request_id)))
    router.dispatch(CommandReceived(commands.flow(5, 10)))
    router.dispatch(CommandReceived(commands.success(3)))
    [session] = _Sessions.opened
    assert session.seen == [1, 2, -5, 3]


def test_a_refused_type_is_served_once_a_family_registers_it() -> None:
    _Sessions.opened = []
    registry = CommandRegistry()
    channel = _Channel()
    router = CommandRouter(registry, channel)
    router.dispatch(CommandReceived(commands.success(1)))
    assert [c.type for c in channel.sent] == [pb.BaseCommand.ERROR]
    registry.register(_family(pb.BaseCommand.SUCCESS))
    router.dispatch(CommandReceived(commands.success(2)))
    [session] = _Sessions.opened
    assert session.seen == [2]


def test_a_closed_router_closes_its_sessions_and_drops_commands() -> None:
    _Sessions.opened = []
    registry = CommandRegistry()
    registry.register(_family(pb.BaseCommand.SUCCESS))
    router = CommandRouter(registry, _Channel())
    router.dispatch(CommandReceived(commands.success(1)))
    asyncio.run(router.close())
    router.dispatch(CommandReceived(commands.success(2)))
    [session] = _Sessions.opened
    assert session.closed
    assert session.seen == [1]
