"""Which code serves which Pulsar command: the broker's extension seam for command handlers.

A *command family* is a set of command types served by one per-connection *session* object: the
topic commands (lookup, producers, consumers: :mod:`braid.broker.handlers`) are one family; the
scalable-topic commands (DAG watch sessions, consumer controller sessions) will be others. A family
is registered once, on the broker's :class:`CommandRegistry`::

    registry.register(CommandFamily(
        name="dag-watch",
        open_session=lambda channel: DagWatchSessions(channel, scalable_service),
        handlers={
            pb.BaseCommand.SCALABLE_TOPIC_LOOKUP: DagWatchSessions.on_lookup,
            ...
        },
    ))

On each connection, a :class:`CommandRouter` opens a family's session the first time one of its
commands arrives (connections that never use a family pay nothing for it), passes every command
of that family to ``handler(session, event)``, and when the connection closes awaits
``session.close()`` for every session it opened, in reverse order of opening. So per-connection
state lives in the session object, and its cleanup in ``close()``: a family needs no change to the
connection or to any other family.

Handlers run synchronously on the connection's reader, in arrival order (what SEND and ACK need).
One that must wait runs the waiting part with :meth:`CommandChannel.spawn`, which turns a failure
into an ``ERROR`` for its request id. A command no family serves is refused with
``NotAllowedError`` when it carries a request id, and ignored otherwise.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from braid.broker.errors import ServerError
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import AuthorizationDenied, TopicOperation

log = logging.getLogger(__name__)

#: A ``BaseCommand.Type`` value (``pb.BaseCommand.PRODUCER``, ...).
CommandType = int


class CommandChannel(Protocol):
    """What a command session may do with its connection (implemented by ``BrokerConnection``)."""

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        """Queue a command to the client; queued commands are written once per loop turn.

        ``cmd`` is encoded before this returns, so the caller may reuse and change it.
        """
        ...

    def send_frame(self, frame: bytes) -> None:
        """Queue a frame the caller encoded (a SEND_RECEIPT, one per stored entry: see
        :class:`~braid.protocol.frames.SendReceiptEncoder`), like :meth:`send`."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        """Run ``coro`` as a task of this connection (cancelled when it closes); a failure is
        logged and, with a ``request_id``, answered with an ``ERROR`` for that request."""
        ...

    @property
    def client_version(self) -> str:
        """The client's version string from CONNECT (``"Pulsar-CPP-v3.5.1"``, ...)."""
        ...

    @property
    def remote_address(self) -> str:
        """``host:port`` of the client, for logs and stats."""
        ...

    @property
    def closed(self) -> bool:
        """The connection is closed (or closing): sends are dropped."""
        ...

    @property
    def auth_role(self) -> str | None:
        """The role the client authenticated as (``None`` with authentication disabled):
        what authorization checks each command against."""
        ...

    async def authorize(
        self, operation: TopicOperation, topic: str, subscription: str | None = None
    ) -> None:
        """Raise :class:`~braid.security.authorization.AuthorizationDenied` unless this
        connection's role may do ``operation`` on ``topic`` (from ``subscription``); a command
        handler calls it before it looks the topic up, so a refusal tells nothing about the
        topic."""
        ...

    async def authorize_namespace_topics(self, namespace: str) -> None:
        """Raise ``AuthorizationDenied`` unless this connection's role may list or watch the
        topics of ``namespace``."""
        ...


class CommandSession(Protocol):
    """The state one command family keeps for one connection."""

    async def close(self) -> None:
        """Release everything this connection holds in this family (detach producers and
        consumers, end watch sessions, ...). Called once, when the connection closes; the
        channel's spawned tasks are being cancelled, so work that must outlive the connection
        belongs to the service, not to ``channel.spawn``."""
        ...


S = TypeVar("S", bound=CommandSession)

#: A handler of one command type: called with the family's session for this connection.
CommandHandler = Callable[[S, CommandReceived], None]


@dataclass(frozen=True)
class CommandFamily(Generic[S]):
    """Command types served by one per-connection session type.

    Attributes:
        name: for logs and registration errors (``"topics"``, ``"dag-watch"``).
        open_session: builds the family's session for a connection, on its first command.
        handlers: command type -> handler, usually the session class's unbound methods.
    """

    name: str
    open_session: Callable[[CommandChannel], S]
    handlers: Mapping[CommandType, CommandHandler[S]] = field(default_factory=dict)


class CommandRegistry:
    """The families a broker serves, by command type. Registering affects every connection,
    including open ones (their router consults the registry for each command)."""

    def __init__(self) -> None:
        self._families: dict[CommandType, CommandFamily[Any]] = {}

    def register(self, family: CommandFamily[Any]) -> None:
        """Serve ``family``'s commands.

        Raises:
            ValueError: a command type is already served by another family (two owners for one
                command would be a bug; nothing is registered then).
        """
        taken = {
            commands.type_name(t): self._families[t].name
            for t in family.handlers
            if t in self._families
        }
        if taken:
            raise ValueError(f"command family {family.name!r}: already served: {taken}")
        for command_type in family.handlers:
            self._families[command_type] = family

    def family_of(self, command_type: CommandType) -> CommandFamily[Any] | None:
        """The family serving ``command_type``, or ``None``."""
        return self._families.get(command_type)


class CommandRouter:
    """One connection's sessions, and the routing of its commands to them."""

    def __init__(self, registry: CommandRegistry, channel: CommandChannel) -> None:
        self._registry = registry
        self._channel = channel
        self._sessions: dict[str, CommandSession] = {}
        # Command type -> its handler bound to this connection's session, once one arrived: a
        # type, once registered, is served by its family for good (``register`` refuses a
        # second owner), so the lookup is done once per type, not once per SEND.
        self._routes: dict[CommandType, Callable[[CommandReceived], None]] = {}
        self._closed = False

    def dispatch(self, event: CommandReceived) -> None:
        """Hand ``event`` to its family's handler (opening the family's session if needed)."""
        if self._closed:
            return  # a session opened now would never be closed
        route = self._routes.get(event.command.type)
        if route is None:
            route = self._route(event.command)
            if route is None:
                return
        route(event)

    def _route(self, cmd: pb.BaseCommand) -> Callable[[CommandReceived], None] | None:
        """The handler of ``cmd``'s type bound to its session (opened now if needed), or
        ``None`` after refusing a command no family serves."""
        family = self._registry.family_of(cmd.type)
        if family is None:
            self._refuse_unknown(cmd)
            return None
        session = self._sessions.get(family.name)
        if session is None:
            session = family.open_session(self._channel)
            self._sessions[family.name] = session
        route = functools.partial(family.handlers[cmd.type], session)
        self._routes[cmd.type] = route
        return route

    def _refuse_unknown(self, cmd: pb.BaseCommand) -> None:
        inner = commands.inner(cmd)
        request_id = getattr(inner, "request_id", None) if inner is not None else None
        if isinstance(request_id, int):
            self._channel.send(
                commands.error(
                    request_id,
                    ServerError.NotAllowedError,
                    f"command {commands.type_name(cmd.type)} is not supported by this broker",
                )
            )

    async def close(self) -> None:
        """Close every session this connection opened, newest first; one failing does not keep
        the others open. Then forget the channel: the connection owns this router, and a
        reference back would keep both (and whatever the connection still holds) alive until
        the cycle collector happens to run."""
        self._closed = True
        self._routes.clear()
        sessions = list(self._sessions.items())
        self._sessions.clear()
        for name, session in reversed(sessions):
            try:
                await session.close()
            except Exception:
                log.exception(
                    "closing the %s session of %s failed", name, self._channel.remote_address
                )
        self._channel = _DetachedChannel(self._channel.remote_address)


class _DetachedChannel:
    """What a closed router keeps instead of its connection: closed, drops everything."""

    def __init__(self, remote_address: str) -> None:
        self._remote = remote_address

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        pass

    def send_frame(self, frame: bytes) -> None:
        pass

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        coro.close()

    @property
    def client_version(self) -> str:
        return ""

    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def closed(self) -> bool:
        return True

    @property
    def auth_role(self) -> str | None:
        return None

    async def authorize(
        self, operation: TopicOperation, topic: str, subscription: str | None = None
    ) -> None:
        raise AuthorizationDenied("the connection is closed")

    async def authorize_namespace_topics(self, namespace: str) -> None:
        raise AuthorizationDenied("the connection is closed")
