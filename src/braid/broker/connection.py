"""One client connection: the asyncio adapter around the sans-I/O ``ServerConnection``.

The reader loop feeds socket bytes to the protocol state machine and handles the events it returns;
one timer, re-armed at ``next_deadline()`` on the injected clock, drives keep-alive; outgoing
frames are coalesced and written once per event-loop turn (many MESSAGE frames per socket write).
A protocol violation (garbage, an oversize frame) closes *this* connection only, and no handler
exception ever escapes to the server: it becomes an ``ERROR``/``SEND_ERROR`` with a
``ServerError`` code.

This module owns the socket and the protocol machine, nothing else: commands go to a
:class:`~braid.broker.registry.CommandRouter`, which hands each to the session of its command
family (the topic commands' session owns the producers and consumers). Sessions reach the client
through this class as a :class:`~braid.broker.registry.CommandChannel`. Authentication (the
CONNECT check, ``AUTH_CHALLENGE``/``AUTH_RESPONSE`` refreshes) is
:class:`~braid.broker.connection_auth.ConnectionAuthentication`'s; its role is the channel's
``auth_role``, which :meth:`BrokerConnection.authorize` checks against the broker's
:class:`~braid.broker.authorization.AuthorizationService` for the command sessions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from braid.broker.authorization import AuthorizationService
from braid.broker.connection_auth import ConnectionAuthentication, RefreshAction
from braid.broker.errors import ServerError, to_server_error
from braid.broker.registry import CommandRegistry, CommandRouter
from braid.clock import Clock, TimerHandle
from braid.protocol import auth, commands
from braid.protocol.connection import UNABLE_TO_AUTHENTICATE, ServerConnection
from braid.protocol.errors import ConnectionClosedError
from braid.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    HandshakeTimeout,
    KeepAliveTimeout,
    ProtocolViolation,
)
from braid.protocol.frames import encode_command
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authentication import AuthenticationService
from braid.security.authorization import TopicOperation
from braid.security.tls import peer_common_name

log = logging.getLogger(__name__)

#: The version string sent in CONNECTED.
SERVER_VERSION = "Braid-0.1.0"
_READ_SIZE = 256 * 1024
_WRITE_BUFFER_LIMIT = 16 * 1024 * 1024


def refuse_connection(writer: asyncio.StreamWriter, reason: str) -> None:
    """Answer a connection the broker will not serve (over a cap) with Pulsar's ``ERROR
    NotAllowedError`` naming ``reason``, and close it."""
    try:
        writer.write(
            encode_command(
                commands.error(commands.NO_REQUEST_ID, ServerError.NotAllowedError, reason)
            )
        )
        writer.close()
    except (ConnectionError, OSError):
        pass


class BrokerConnection:
    """Serves one client socket; the :class:`~braid.broker.registry.CommandChannel` of its
    command sessions.

    Args:
        registry: the command families the broker serves.
        clock: drives keep-alive (a ``ManualClock`` in tests).
        max_message_size: advertised in CONNECTED; larger frames close the connection.
        keepalive_interval_s: PING after this much silence, drop after twice as much.
        handshake_timeout_s: CONNECT must arrive within this long, else the connection is closed.
        feature_flags: what CONNECTED advertises (``supports_scalable_topics``, ...).
        authentication: the broker's authentication service (``None`` or disabled: every
            CONNECT is accepted without a role).
        authorization: the broker's authorization service (``None`` or disabled: every
            command is allowed).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        registry: CommandRegistry,
        clock: Clock,
        max_message_size: int,
        keepalive_interval_s: float,
        handshake_timeout_s: float | None = None,
        feature_flags: pb.FeatureFlags | None = None,
        authentication: AuthenticationService | None = None,
        authorization: AuthorizationService | None = None,
    ) -> None:
        self._clock = clock
        self._authorization = (
            authorization if authorization is not None and authorization.enabled else None
        )
        # Cached: the flush is scheduled once per loop turn that sends anything (every receipt).
        self._loop = asyncio.get_running_loop()
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._auth: ConnectionAuthentication | None = None
        if authentication is not None and authentication.enabled:
            self._auth = ConnectionAuthentication(
                authentication,
                self._remote,
                peer_common_name(writer.get_extra_info("ssl_object")),
            )
        self._auth_timer: TimerHandle | None = None
        self._auth_check_s = float(
            authentication.settings.refresh_check_seconds if authentication else 60
        )
        self.proto = ServerConnection(
            SERVER_VERSION,
            max_message_size=max_message_size,
            keepalive_interval_s=keepalive_interval_s,
            feature_flags=feature_flags,
            created_at=clock.monotonic(),
            handshake_timeout_s=handshake_timeout_s,
            authenticate=self._check_connect if self._auth is not None else None,
        )
        self._client_version = ""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flush_scheduled = False
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0
        self._router = CommandRouter(registry, self)

    # -- channel properties --------------------------------------------------------------------

    @property
    def client_version(self) -> str:
        return self._client_version

    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def auth_role(self) -> str | None:
        return None if self._auth is None else self._auth.role

    async def authorize(
        self, operation: TopicOperation, topic: str, subscription: str | None = None
    ) -> None:
        if self._authorization is not None:
            await self._authorization.check_topic(self.auth_role, operation, topic, subscription)

    async def authorize_namespace_topics(self, namespace: str) -> None:
        if self._authorization is not None:
            await self._authorization.check_namespace_topics(self.auth_role, namespace)

    # -- authentication ------------------------------------------------------------------------

    def _wall_time(self) -> float:
        return self._clock.now_ms() / 1000.0

    def _check_connect(self, connect: pb.CommandConnect) -> str | None:
        assert self._auth is not None
        return self._auth.check_connect(connect, self._wall_time())

    def _arm_auth_check(self) -> None:
        if self._auth is not None and self._auth.refreshes and not self._closed:
            when = self._clock.monotonic() + self._auth_check_s
            self._auth_timer = self._clock.call_at(when, self._on_auth_check)

    def _on_auth_check(self) -> None:
        self._auth_timer = None
        if self._closed or self._auth is None:
            return
        identity = self._auth.identity
        supports = self.proto.peer_feature_flags.supports_auth_refresh
        action = self._auth.refresh_check(self._wall_time(), supports)
        if action is RefreshAction.CLOSE:
            self._start_close()
            return
        if action is RefreshAction.CHALLENGE and identity is not None:
            version = self.proto.protocol_version or 0
            self.send(auth.auth_challenge(SERVER_VERSION, version, identity.method))
        self._arm_auth_check()

    def _on_auth_response(self, response: pb.CommandAuthResponse) -> None:
        if self._auth is None:
            log.info("ignoring AUTH_RESPONSE from %s: authentication is off", self._remote)
            return
        refusal = self._auth.on_auth_response(response, self._wall_time())
        if refusal is not None:
            log.info("closing connection %s: credential refresh failed: %s", self._remote, refusal)
            self.send(
                commands.error(
                    commands.NO_REQUEST_ID, ServerError.AuthenticationError, UNABLE_TO_AUTHENTICATE
                )
            )
            self._flush_now()
            self._start_close()

    # -- main loops ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until the peer goes away, breaks the protocol, or the broker closes us."""
        self._arm_timer()
        try:
            while not self._closed:
                try:
                    data = await self._reader.read(_READ_SIZE)
                except (ConnectionError, OSError):
                    break
                if not data:
                    break
                events = self.proto.receive_data(data, self._clock.monotonic())
                self._handle_events(events)
                self._arm_timer()
                if self._writer.transport.get_write_buffer_size() > _WRITE_BUFFER_LIMIT:
                    # The peer is not reading our answers: stop reading its requests until it
                    # does, so a client cannot make the broker buffer without bound.
                    try:
                        await self._writer.drain()
                    except (ConnectionError, OSError):
                        break
        except Exception:
            log.exception("connection %s failed", self._remote)
        finally:
            await self.close()

    def _arm_timer(self) -> None:
        """Keep one timer armed at the protocol machine's next deadline (the aioquic adapter's
        pattern). Only an *earlier* deadline re-arms it (the end of the handshake): ordinary
        traffic pushes the deadline later, and a timer that fires early finds nothing due and
        re-arms itself, which is cheaper than re-arming on every read."""
        deadline = None if self._closed else self.proto.next_deadline()
        if self._timer is not None and (deadline is None or deadline < self._timer_at):
            self._timer.cancel()
            self._timer = None
        if self._timer is None and deadline is not None:
            self._timer = self._clock.call_at(deadline, self._on_timer)
            self._timer_at = deadline

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        self._handle_events(self.proto.handle_timer(self._clock.monotonic()))
        self._arm_timer()

    def _handle_events(self, events: Sequence[object]) -> None:
        for event in events:
            if isinstance(event, CommandReceived):
                if event.command.type == pb.BaseCommand.AUTH_RESPONSE:
                    self._on_auth_response(event.command.authResponse)
                    continue
                try:
                    self._router.dispatch(event)
                except Exception:
                    log.exception("handling %s from %s failed", event.command.type, self._remote)
            elif isinstance(event, Connected):
                self._client_version = event.client_version
                log.debug("client %s connected: %s", self._remote, event.client_version)
                self._arm_auth_check()
            elif isinstance(event, ProtocolViolation):
                log.info("closing connection %s: %s", self._remote, event.reason)
                self._flush_now()
                self._start_close()
            elif isinstance(event, KeepAliveTimeout):
                log.info("closing connection %s: keep-alive timeout", self._remote)
                self._flush_now()
                self._start_close()
            elif isinstance(event, HandshakeTimeout):
                log.info(
                    "closing connection %s: no CONNECT within %.0f s", self._remote, event.waited_s
                )
                self._start_close()
            elif isinstance(event, ConnectionClosed):
                self._start_close()
        self._flush_now()

    # -- writing -------------------------------------------------------------------------------

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        """Queue a command; it is written at the end of this event-loop turn."""
        if self._closed or self.proto.closed:
            return
        self.proto.send(cmd, body)
        self._schedule_flush()

    def send_frame(self, frame: bytes) -> None:
        """Queue an encoded frame (a SEND_RECEIPT); written at the end of this event-loop turn."""
        if self._closed:
            return
        try:
            self.proto.send_frame(frame)
        except ConnectionClosedError:
            return  # the machine closed (the peer broke the protocol): nothing more goes out
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_scheduled = False
        if self._closed:
            return
        buffers = self.proto.buffers_to_send()
        if buffers and not self._writer.is_closing():
            # One gather write: the entries' bodies go to the socket without a copy here.
            self._writer.writelines(buffers)

    # -- tasks ---------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        """Run a handler coroutine; a failure answers ``request_id`` with an ERROR."""
        task = asyncio.ensure_future(self._guard(coro, request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guard(self, coro: Coroutine[Any, Any, Any], request_id: int | None) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code, message = to_server_error(exc)
            if code in (ServerError.UnknownError,):
                log.exception("request %s on %s failed", request_id, self._remote)
            else:
                log.info("request %s on %s refused: %s", request_id, self._remote, message)
            if request_id is not None:
                self.send(commands.error(request_id, code, message))

    # -- closing -------------------------------------------------------------------------------

    def _start_close(self) -> None:
        if not self._closed and self._closing is None:
            self._closing = asyncio.ensure_future(self.close())

    async def close(self) -> None:
        """Close every command session (detaching producers and consumers), cancel this
        connection's tasks and close the socket. Idempotent."""
        if self._closed:
            return
        self._flush_now()
        self._closed = True
        # Whatever the peer left half-sent (up to a frame of maxMessageSize) goes now, not when
        # the last reference to this object does.
        self.proto.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        await self._router.close()
        for task in list(self._tasks):
            task.cancel()
        try:
            self._writer.close()
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
