"""One client connection to one broker: the asyncio adapter around ``ClientConnection``.

The protocol lives in :class:`braid.protocol.connection.ClientConnection` (sans-I/O: bytes in,
events out); this module owns the socket. A :class:`BrokerConnection` has

* one reader task that feeds received bytes to the state machine and dispatches the events;
* a map of request id -> future for every request/response exchange, each with a timeout, all
  failed with :class:`~braid.client.errors.NotConnectedError` when the connection goes;
* handler tables for the long-lived parties multiplexed on it - per-segment producers and
  consumers (by producer/consumer id), DAG-watch sessions (by session id), controller
  registrations (by consumer id) and coordinator-assignment watches (by watch id) - each
  told once when the connection is lost, so it can reconnect on its own schedule;
* a keep-alive tick that lets the state machine ping and time out a silent broker.

Writes are coalesced: commands queue in the state machine and one ``writelines`` per loop
iteration sends them (a large payload body as its own buffer, not copied). Every exception the
socket or codec raises is translated here, once, into the client's error categories.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Protocol

from braid.client.errors import ConnectError, NotConnectedError, error_for_code
from braid.client.settings import BrokerAddress, ClientSettings
from braid.core.errors import BraidError, DeadlineExceededError
from braid.protocol import auth, commands
from braid.protocol.connection import ClientConnection
from braid.protocol.errors import ProtocolError
from braid.protocol.events import (
    CommandReceived,
    ConnectionClosed,
    KeepAliveTimeout,
    ProtocolViolation,
    ServerConnected,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_T = pb.BaseCommand
_READ_SIZE = 1 << 20


class ProducerHandler(Protocol):
    """What a per-segment producer receives from its connection."""

    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None: ...
    def on_send_error(self, error: pb.CommandSendError) -> None: ...
    def on_closed_by_broker(self) -> None: ...
    def on_connection_lost(self) -> None: ...


class ConsumerHandler(Protocol):
    """What a per-segment consumer receives from its connection."""

    def on_message(self, message: pb.CommandMessage, body: bytes) -> None: ...
    def on_active_change(self, active: bool) -> None: ...
    def on_end_of_topic(self) -> None: ...
    def on_closed_by_broker(self) -> None: ...
    def on_connection_lost(self) -> None: ...


class SessionHandler(Protocol):
    """A DAG-watch session (``docs/protocol.md#dag-watch``)."""

    def on_layout_update(self, update: pb.CommandScalableTopicUpdate) -> None: ...
    def on_connection_lost(self) -> None: ...


class RegistrationHandler(Protocol):
    """A controller registration (``docs/protocol.md#consumer-assignment``)."""

    def on_assignment_update(self, update: pb.CommandScalableTopicAssignmentUpdate) -> None: ...
    def on_connection_lost(self) -> None: ...


class TcWatchHandler(Protocol):
    """A coordinator-assignment watch (``docs/client.md#transactions``)."""

    def on_tc_assignments_update(self, update: pb.CommandWatchTcAssignmentsUpdate) -> None: ...
    def on_connection_lost(self) -> None: ...


class BrokerConnection:
    """A connected, handshaken connection to one broker (create with :meth:`open`)."""

    def __init__(
        self,
        address: BrokerAddress,
        settings: ClientSettings,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        proto: ClientConnection,
        connected: ServerConnected,
    ) -> None:
        self.address = address
        self.settings = settings
        self._reader = reader
        self._writer = writer
        self._proto = proto
        self._loop = asyncio.get_running_loop()
        self.server_version = connected.server_version
        self.protocol_version = connected.protocol_version
        self.max_message_size = connected.max_message_size or (5 * 1024 * 1024)
        self.supports_scalable_topics = bool(connected.feature_flags.supports_scalable_topics)
        #: The broker serves the coordinator-assignment watch (WATCH_TC_ASSIGNMENTS).
        self.supports_tc_metadata_discovery = bool(
            connected.feature_flags.supports_tc_metadata_discovery
        )
        self._request_ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self._waiting: dict[int, Callable[[], None]] = {}
        self._producers: dict[int, ProducerHandler] = {}
        self._consumers: dict[int, ConsumerHandler] = {}
        self._sessions: dict[int, SessionHandler] = {}
        self._registrations: dict[int, RegistrationHandler] = {}
        self._tc_watches: dict[int, TcWatchHandler] = {}
        self._closed = False
        self.close_reason: str | None = None
        self._flush_scheduled = False
        self._on_close: list[Callable[[BrokerConnection], None]] = []
        self._reader_task = asyncio.ensure_future(self._read_loop())
        self._tick_handle: asyncio.TimerHandle | None = None
        self._schedule_tick()

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    async def open(cls, address: BrokerAddress, settings: ClientSettings) -> BrokerConnection:
        """Connect and handshake within ``settings.connection_timeout``.

        Raises:
            ConnectError: the socket could not connect, the TLS handshake failed, or the broker
                closed the handshake.
            AuthenticationError: the broker refused the credentials (not retried).
        """
        loop = asyncio.get_running_loop()
        writer: asyncio.StreamWriter | None = None
        credentials = settings.authentication
        tls = settings.tls.context(credentials) if address.tls else None
        try:
            async with asyncio.timeout(settings.connection_timeout):
                reader, writer = await asyncio.open_connection(
                    address.host,
                    address.port,
                    limit=_READ_SIZE,
                    ssl=tls,
                    server_hostname=address.host if tls is not None else None,
                )
                proto = ClientConnection(
                    settings.client_version,
                    feature_flags=pb.FeatureFlags(
                        supports_scalable_topics=True,
                        supports_auth_refresh=credentials is not None,
                    ),
                    keepalive_interval_s=settings.keepalive_interval,
                    created_at=loop.time(),
                    auth_method_name=credentials.method if credentials else "none",
                    auth_data=credentials.auth_data() if credentials else None,
                )
                writer.write(proto.data_to_send())
                connected: ServerConnected | None = None
                while connected is None:
                    data = await reader.read(_READ_SIZE)
                    for event in proto.receive_data(data, loop.time()):
                        if isinstance(event, ServerConnected):
                            connected = event
                        elif isinstance(event, ProtocolViolation | ConnectionClosed):
                            if proto.refusal is not None:
                                raise error_for_code(
                                    proto.refusal.error,
                                    proto.refusal.message,
                                    context=f"connect to {address.url}",
                                )
                            reason = getattr(event, "reason", "closed")
                            raise ConnectError(f"{address.url} refused the handshake: {reason}")
                    pending = proto.data_to_send()
                    if pending:
                        writer.write(pending)
        except (ConnectError, BraidError):
            _abort(writer)
            raise
        except (OSError, TimeoutError) as exc:
            _abort(writer)
            raise ConnectError(f"cannot connect to {address.url}: {exc or 'timed out'}") from exc
        conn = cls(address, settings, reader, writer, proto, connected)
        log.debug("connected to %s (%s)", address.url, connected.server_version)
        return conn

    # -- state --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (every later request fails at once)."""
        return self._closed

    def add_close_listener(self, callback: Callable[[BrokerConnection], None]) -> None:
        """Call ``callback(self)`` once when the connection closes."""
        if self._closed:
            self._loop.call_soon(callback, self)
        else:
            self._on_close.append(callback)

    def new_request_id(self) -> int:
        """A request id unique on this connection."""
        return next(self._request_ids)

    # -- registrations ------------------------------------------------------------------------

    def register_producer(self, producer_id: int, handler: ProducerHandler) -> None:
        self._producers[producer_id] = handler

    def unregister_producer(self, producer_id: int, handler: ProducerHandler) -> None:
        if self._producers.get(producer_id) is handler:
            del self._producers[producer_id]

    def register_consumer(self, consumer_id: int, handler: ConsumerHandler) -> None:
        self._consumers[consumer_id] = handler

    def unregister_consumer(self, consumer_id: int, handler: ConsumerHandler) -> None:
        if self._consumers.get(consumer_id) is handler:
            del self._consumers[consumer_id]

    def register_session(self, session_id: int, handler: SessionHandler) -> None:
        self._sessions[session_id] = handler

    def unregister_session(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def register_registration(self, consumer_id: int, handler: RegistrationHandler) -> None:
        self._registrations[consumer_id] = handler

    def unregister_registration(self, consumer_id: int) -> None:
        self._registrations.pop(consumer_id, None)

    def register_tc_watch(self, watch_id: int, handler: TcWatchHandler) -> None:
        self._tc_watches[watch_id] = handler

    def unregister_tc_watch(self, watch_id: int) -> None:
        self._tc_watches.pop(watch_id, None)

    # -- sending ------------------------------------------------------------------------------

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        """Queue a command (a payload command when ``body`` is given); sent this iteration.

        Raises:
            NotConnectedError: the connection is closed.
        """
        if self._closed:
            raise NotConnectedError(f"connection to {self.address.url} is closed")
        self._proto.send(cmd, body)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def request(
        self,
        cmd: pb.BaseCommand,
        request_id: int,
        *,
        timeout: float | None = -1.0,
        on_waiting: Callable[[], None] | None = None,
    ) -> asyncio.Future[pb.BaseCommand]:
        """Send a request and return a future for its response command.

        The future fails with the mapped broker error on ERROR, with
        :class:`~braid.client.errors.TimeoutError` after ``timeout`` seconds (default: the
        operation timeout; ``None`` = no deadline), and with
        :class:`~braid.client.errors.NotConnectedError` if the connection goes first.
        ``on_waiting`` is called for a ``producer_ready=false`` PRODUCER_SUCCESS.
        """
        fut: asyncio.Future[pb.BaseCommand] = self._loop.create_future()
        if self._closed:
            fut.set_exception(NotConnectedError(f"connection to {self.address.url} is closed"))
            return fut
        self._pending[request_id] = fut
        if on_waiting is not None:
            self._waiting[request_id] = on_waiting
        if timeout is not None:
            delay = self.settings.operation_timeout if timeout < 0 else timeout
            handle = self._loop.call_later(delay, self._time_out, request_id, cmd.type, delay)
            fut.add_done_callback(lambda _f: handle.cancel())
        fut.add_done_callback(lambda _f: self._forget(request_id))
        self.send(cmd)
        return fut

    def _forget(self, request_id: int) -> None:
        self._pending.pop(request_id, None)
        self._waiting.pop(request_id, None)

    def _time_out(self, request_id: int, command_type: int, delay: float) -> None:
        fut = self._pending.pop(request_id, None)
        if fut is not None and not fut.done():
            name = commands.type_name(command_type)
            fut.set_exception(
                DeadlineExceededError(
                    f"{name} to {self.address.url} got no answer within {delay:g}s"
                )
            )

    def _flush(self) -> None:
        self._flush_scheduled = False
        buffers = self._proto.buffers_to_send()
        if buffers and not self._writer.is_closing():
            self._writer.writelines(buffers)  # a producer's batch bodies are not copied here

    # -- receiving ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason = "connection closed by the broker"
        try:
            while not self._closed:
                data = await self._reader.read(_READ_SIZE)
                events = self._proto.receive_data(data, self._loop.time())
                for event in events:
                    if isinstance(event, CommandReceived):
                        self._dispatch(event.command, event.body)
                    elif isinstance(event, ProtocolViolation):
                        reason = f"protocol violation: {event.reason}"
                    elif isinstance(event, KeepAliveTimeout):
                        reason = f"keep-alive timeout after {event.silent_for_s:.1f}s"
                    elif isinstance(event, ConnectionClosed):
                        reason = event.reason
                self._flush()
                if self._proto.closed:
                    break
        except (OSError, ProtocolError) as exc:
            reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            reason = "connection closed by the client"
        self._shutdown(reason)

    def _dispatch(self, cmd: pb.BaseCommand, body: bytes | None) -> None:
        t = cmd.type
        if t == _T.MESSAGE:
            msg = cmd.message
            consumer = self._consumers.get(msg.consumer_id)
            if consumer is not None and body is not None:
                consumer.on_message(msg, body)
        elif t == _T.SEND_RECEIPT:
            producer = self._producers.get(cmd.send_receipt.producer_id)
            if producer is not None:
                producer.on_send_receipt(cmd.send_receipt)
        elif t == _T.SEND_ERROR:
            producer = self._producers.get(cmd.send_error.producer_id)
            if producer is not None:
                producer.on_send_error(cmd.send_error)
        elif t == _T.CLOSE_PRODUCER:
            producer = self._producers.pop(cmd.close_producer.producer_id, None)
            if producer is not None:
                producer.on_closed_by_broker()
        elif t == _T.CLOSE_CONSUMER:
            consumer = self._consumers.pop(cmd.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer.on_closed_by_broker()
        elif t == _T.ACTIVE_CONSUMER_CHANGE:
            consumer = self._consumers.get(cmd.active_consumer_change.consumer_id)
            if consumer is not None:
                consumer.on_active_change(cmd.active_consumer_change.is_active)
        elif t == _T.REACHED_END_OF_TOPIC:
            consumer = self._consumers.get(cmd.reachedEndOfTopic.consumer_id)
            if consumer is not None:
                consumer.on_end_of_topic()
        elif t == _T.SCALABLE_TOPIC_UPDATE:
            session = self._sessions.get(cmd.scalableTopicUpdate.session_id)
            if session is not None:
                session.on_layout_update(cmd.scalableTopicUpdate)
        elif t == _T.WATCH_TC_ASSIGNMENTS_UPDATE:
            watch = self._tc_watches.get(cmd.watchTcAssignmentsUpdate.watch_id)
            if watch is not None:
                watch.on_tc_assignments_update(cmd.watchTcAssignmentsUpdate)
        elif t == _T.AUTH_CHALLENGE:
            self._answer_challenge(cmd.authChallenge)
        elif t == _T.SCALABLE_TOPIC_ASSIGNMENT_UPDATE:
            update = cmd.scalableTopicAssignmentUpdate
            registration = self._registrations.get(update.consumer_id)
            if registration is not None:
                registration.on_assignment_update(update)
        else:
            self._complete_request(cmd)

    def _answer_challenge(self, challenge: pb.CommandAuthChallenge) -> None:
        """Send fresh credentials of our method (a token supplier is called again)."""
        credentials = self.settings.authentication
        if credentials is None:
            log.warning(
                "%s sent AUTH_CHALLENGE but the client has no credentials", self.address.url
            )
            return
        try:
            data = credentials.auth_data()
        except BraidError as exc:
            log.warning("cannot answer the credential refresh of %s: %s", self.address.url, exc)
            return
        method = challenge.challenge.auth_method_name or credentials.method
        version = self.protocol_version or 0
        self.send(auth.auth_response(self.settings.client_version, version, method, data))

    def _complete_request(self, cmd: pb.BaseCommand) -> None:
        inner = commands.inner(cmd)
        request_id = getattr(inner, "request_id", None)
        if not isinstance(request_id, int):
            log.debug("ignoring %s from %s", commands.type_name(cmd.type), self.address.url)
            return
        if cmd.type == _T.PRODUCER_SUCCESS and not cmd.producer_success.producer_ready:
            waiting = self._waiting.get(request_id)
            if waiting is not None:
                waiting()
            return
        fut = self._pending.get(request_id)
        if fut is None or fut.done():
            return
        if cmd.type == _T.ERROR:
            fut.set_exception(
                error_for_code(cmd.error.error, cmd.error.message, context=self.address.url)
            )
        else:
            fut.set_result(cmd)

    # -- closing ------------------------------------------------------------------------------

    def _schedule_tick(self) -> None:
        interval = max(0.05, self.settings.keepalive_interval / 4)
        self._tick_handle = self._loop.call_later(interval, self._tick)

    def _tick(self) -> None:
        if self._closed:
            return
        events = self._proto.handle_timer(self._loop.time())
        self._flush()
        for event in events:
            if isinstance(event, KeepAliveTimeout):
                log.warning("%s silent for %.1fs: closing", self.address.url, event.silent_for_s)
                self._shutdown(f"keep-alive timeout after {event.silent_for_s:.1f}s")
                return
        self._schedule_tick()

    def close(self) -> None:
        """Close the socket; pending requests fail and every handler hears of it."""
        self._shutdown("connection closed by the client")

    async def wait_closed(self) -> None:
        """Wait until the reader task has finished."""
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader_task

    def _shutdown(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        log.info("connection to %s closed: %s", self.address.url, reason)
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        with contextlib.suppress(Exception):
            self._flush()
        self._proto.close()
        _abort(self._writer, graceful=True)
        current = asyncio.current_task() if self._loop.is_running() else None
        if current is not self._reader_task and not self._reader_task.done():
            self._reader_task.cancel()
        pending = list(self._pending.values())
        self._pending.clear()
        self._waiting.clear()
        for fut in pending:
            if not fut.done():
                fut.set_exception(
                    NotConnectedError(f"connection to {self.address.url} lost: {reason}")
                )
        parties: list[
            ProducerHandler
            | ConsumerHandler
            | SessionHandler
            | RegistrationHandler
            | TcWatchHandler
        ]
        parties = [
            *self._producers.values(),
            *self._consumers.values(),
            *self._sessions.values(),
            *self._registrations.values(),
            *self._tc_watches.values(),
        ]
        self._tc_watches.clear()
        self._producers.clear()
        self._consumers.clear()
        self._sessions.clear()
        self._registrations.clear()
        for party in parties:
            try:
                party.on_connection_lost()
            except Exception:  # one party's bug must not keep the others from reconnecting
                log.exception("connection-lost handler failed")
        listeners, self._on_close = self._on_close, []
        for callback in listeners:
            callback(self)


def _abort(writer: asyncio.StreamWriter | None, graceful: bool = False) -> None:
    if writer is None:
        return
    with contextlib.suppress(Exception):
        if graceful:
            writer.close()
        else:
            writer.transport.abort()


__all__ = [
    "BrokerConnection",
    "ConsumerHandler",
    "ProducerHandler",
    "RegistrationHandler",
    "SessionHandler",
]
