"""One client connection: the asyncio adapter around the sans-I/O ``ServerConnection``.

The reader loop feeds socket bytes to the protocol state machine and handles the events it returns;
a timer task drives keep-alive from ``next_deadline()`` and the injected clock; outgoing frames are
coalesced and written once per event-loop turn (many MESSAGE frames per socket write). A protocol
violation (garbage, an oversize frame) closes *this* connection only, and no handler exception ever
escapes to the server: it becomes an ``ERROR``/``SEND_ERROR`` with a ``ServerError`` code.

The command handlers live in :mod:`braid.broker.handlers`; this module owns the socket, the
connection-level maps of producers and consumers by id, and the transport methods producers and
consumers call to reach their client.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from braid.broker.consumer import Delivery
from braid.broker.errors import DuplicateInFlight, ServerError, to_server_error
from braid.broker.handlers import CommandHandlers, ConsumerBinding
from braid.broker.producer import Producer
from braid.broker.topic import PersistentTopic
from braid.ledger.api import Position
from braid.protocol import commands
from braid.protocol.connection import ServerConnection
from braid.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    KeepAliveTimeout,
    ProtocolViolation,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.broker.service import BrokerService

log = logging.getLogger(__name__)

#: The version string sent in CONNECTED.
SERVER_VERSION = "Braid-0.1.0"
_READ_SIZE = 256 * 1024
_WRITE_BUFFER_LIMIT = 16 * 1024 * 1024
_CPP_CLIENT_VERSION = re.compile(r"Pulsar-CPP-v(\d+)\.(\d+)")


def client_handles_end_of_topic(client_version: str) -> bool:
    """Whether REACHED_END_OF_TOPIC may be sent to this client.

    The official C++ client (which the PyPI ``pulsar-client`` wraps) up to 4.2 closes the whole
    connection when it receives the command, so it is withheld from those versions.
    """
    match = _CPP_CLIENT_VERSION.search(client_version)
    if match is None:
        return True
    return (int(match.group(1)), int(match.group(2))) > (4, 2)


class BrokerConnection:
    """Serves one client socket."""

    def __init__(
        self,
        service: BrokerService,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.service = service
        self.clock = service.clock
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        config = service.config
        self.proto = ServerConnection(
            SERVER_VERSION,
            max_message_size=config.max_message_size,
            keepalive_interval_s=float(config.keep_alive_interval_seconds),
            created_at=self.clock.monotonic(),
        )
        self.client_version = ""
        self.end_of_topic_supported = False
        self.producers: dict[int, tuple[Producer, PersistentTopic]] = {}
        self.consumers: dict[int, ConsumerBinding] = {}
        self.pending_producers: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flush_scheduled = False
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._timer_wake = asyncio.Event()
        self._sleeping_until: float | None = None
        self._handlers = CommandHandlers(self)

    # -- properties used by producers and consumers --------------------------------------------

    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def closed(self) -> bool:
        return self._closed

    # -- main loops ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until the peer goes away, breaks the protocol, or the broker closes us."""
        timer = asyncio.ensure_future(self._keepalive_loop())
        try:
            while not self._closed:
                try:
                    data = await self._reader.read(_READ_SIZE)
                except (ConnectionError, OSError):
                    break
                if not data:
                    break
                events = self.proto.receive_data(data, self.clock.monotonic())
                self._handle_events(events)
                self._deadline_moved()
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
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
            await self.close()

    async def _keepalive_loop(self) -> None:
        while not self._closed:
            deadline = self.proto.next_deadline()
            self._timer_wake.clear()
            self._sleeping_until = deadline
            if deadline is None:
                await self._timer_wake.wait()
                continue
            delay = deadline - self.clock.monotonic()
            if delay > 0:
                sleeper = asyncio.ensure_future(self.clock.sleep(delay))
                waker = asyncio.ensure_future(self._timer_wake.wait())
                try:
                    done, _ = await asyncio.wait(
                        {sleeper, waker}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    sleeper.cancel()
                    waker.cancel()
                if sleeper not in done:
                    continue  # the deadline moved earlier (handshake done): recompute it
            if self._closed:
                return
            events = self.proto.handle_timer(self.clock.monotonic())
            self._handle_events(events)
            self.schedule_flush()

    def _deadline_moved(self) -> None:
        """Wake the timer only if received bytes brought the deadline forward (rare: the end of
        the handshake); ordinary traffic only pushes it later, which the timer finds itself."""
        deadline = self.proto.next_deadline()
        if deadline is not None and (
            self._sleeping_until is None or deadline < self._sleeping_until
        ):
            self._timer_wake.set()

    def _handle_events(self, events: Sequence[object]) -> None:
        for event in events:
            if isinstance(event, CommandReceived):
                try:
                    self._handlers.dispatch(event.command, event.body, event.checksum_valid)
                except Exception:
                    log.exception("handling %s from %s failed", event.command.type, self._remote)
            elif isinstance(event, Connected):
                self.client_version = event.client_version
                self.end_of_topic_supported = client_handles_end_of_topic(event.client_version)
                log.debug("client %s connected: %s", self._remote, event.client_version)
            elif isinstance(event, ProtocolViolation):
                log.info("closing connection %s: %s", self._remote, event.reason)
                self._flush_now()
                self._start_close()
            elif isinstance(event, KeepAliveTimeout):
                log.info("closing connection %s: keep-alive timeout", self._remote)
                self._flush_now()
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
        self.schedule_flush()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_scheduled = False
        if self._closed:
            return
        data = self.proto.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)

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

    # -- transport for producers ---------------------------------------------------------------

    def send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, position: Position
    ) -> None:
        self.send(
            commands.send_receipt(
                producer_id,
                sequence_id,
                position.ledger_id,
                position.entry_id,
                highest_sequence_id if highest_sequence_id > 0 else None,
            )
        )

    def send_publish_error(self, producer_id: int, sequence_id: int, exc: BaseException) -> None:
        if isinstance(exc, DuplicateInFlight):
            # The first copy is still being written: close the producer so the client resends
            # once it reconnects (Pulsar's answer to MessageDupUnknownException).
            self.close_producer_from_broker(producer_id)
            return
        code, message = to_server_error(exc)
        self.send(commands.send_error(producer_id, sequence_id, code, message))

    def send_close_producer(self, producer_id: int) -> None:
        self.producers.pop(producer_id, None)
        self.send(commands.close_producer(producer_id, commands.NO_REQUEST_ID))

    def close_producer_from_broker(self, producer_id: int) -> None:
        entry = self.producers.pop(producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        self.send(commands.close_producer(producer_id, commands.NO_REQUEST_ID))

    # -- transport for consumers ---------------------------------------------------------------

    def send_messages(self, consumer_id: int, deliveries: Sequence[Delivery]) -> None:
        proto = self.proto
        if self._closed or proto.closed:
            return
        for d in deliveries:
            pos = d.entry.position
            proto.send(
                commands.message(consumer_id, pos.ledger_id, pos.entry_id, d.redelivery_count),
                d.entry.data,
            )
        self.schedule_flush()

    def send_close_consumer(self, consumer_id: int) -> None:
        self.consumers.pop(consumer_id, None)
        self.send(commands.close_consumer(consumer_id, commands.NO_REQUEST_ID))

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self.send(commands.active_consumer_change(consumer_id, is_active))

    def send_reached_end_of_topic(self, consumer_id: int) -> bool:
        if not self.end_of_topic_supported:
            return False
        self.send(commands.reached_end_of_topic(consumer_id))
        return True

    # -- closing -------------------------------------------------------------------------------

    def _start_close(self) -> None:
        if not self._closed and self._closing is None:
            self._closing = asyncio.ensure_future(self.close())

    async def close(self) -> None:
        """Detach every producer and consumer and close the socket. Idempotent."""
        if self._closed:
            return
        self._flush_now()
        self._closed = True
        self._timer_wake.set()
        for task in list(self.pending_producers.values()):
            task.cancel()
        for producer, topic in list(self.producers.values()):
            topic.remove_producer(producer)
        self.producers.clear()
        for binding in list(self.consumers.values()):
            binding.subscription.remove_consumer(binding.consumer)
        self.consumers.clear()
        for task in list(self._tasks):
            task.cancel()
        try:
            self._writer.close()
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
