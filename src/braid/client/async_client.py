"""``braid.AsyncClient``: the asyncio client, factory of producers and consumers.

One client per application (``docs/client.md#quick-start``): it owns the connection pool, the shared
per-topic layout sources and every producer and consumer it created, and closes them all on
:meth:`AsyncClient.close`. Every topic goes through the same path - resolve a layout (DAG watch
on a scalable-topic broker, a synthetic single-segment layout otherwise; ADR 0022), then per-
segment producers and consumers - so ``topic://`` and ``persistent://`` names behave alike.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from braid.client.ack_timeout import check_ack_timeout
from braid.client.auth import Authentication, TlsOptions
from braid.client.checkpoint_consumer import AsyncCheckpointConsumer
from braid.client.columns import MessageColumns
from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.dead_letter import DEFAULT_MAX_RECONSUME_TIMES, DeadLetterPolicy, DeadLetters
from braid.client.errors import AlreadyClosedError, InvalidConfigurationError
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.packed_columns import PackedColumns
from braid.client.producer import AsyncProducer, check_options
from braid.client.queue_consumer import AsyncQueueConsumer
from braid.client.schema import Schema, check_schema
from braid.client.segment_reader import LISTS, PACKED, AsyncSegmentReader, start_cursor
from braid.client.settings import ClientSettings, parse_service_url
from braid.client.stream_consumer import AsyncStreamConsumer
from braid.client.transaction import DEFAULT_TIMEOUT, AsyncTransaction, check_timeout
from braid.client.transaction_coordinator import CoordinatorClient
from braid.core.checkpoint import Checkpoint, SegmentCursor
from braid.core.message_id import MessageId
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

C = TypeVar("C", bound=ConsumerBase)

_POSITIONS = {"latest": pb.CommandSubscribe.Latest, "earliest": pb.CommandSubscribe.Earliest}


def _initial_position(value: str) -> int:
    position = _POSITIONS.get(value.lower() if isinstance(value, str) else "")
    if position is None:
        raise InvalidConfigurationError(
            f"initial_position must be 'latest' or 'earliest', got {value!r}"
        )
    return position


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidConfigurationError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _check_queue_size(value: object, name: str = "receiver_queue_size") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigurationError(f"{name} must be a positive int: {value!r}")
    return value


class AsyncClient:
    """The asyncio Braid client.

    Args:
        service_url: ``pulsar://host:port`` (several hosts: ``pulsar://h1:p1,h2:p2``).
        operation_timeout: deadline in seconds of lookups, creates and other requests.
        connection_timeout: deadline of a TCP connect and handshake.
        keepalive_interval: seconds of silence before a PING (twice that: reconnect).
        authentication: credentials sent to the broker
            (:class:`~braid.client.auth.AuthenticationToken`,
            :class:`~braid.client.auth.AuthenticationBasic`,
            :class:`~braid.client.auth.AuthenticationTLS`), ``None`` for none.
        tls_trust_certs_file: CA certificates (PEM) a ``pulsar+ssl://`` broker must chain to
            (default: the system's trust store).
        tls_validate_hostname: check the broker certificate names the host (default on).
        tls_allow_insecure_connection: accept any broker certificate (tests and labs only).
        tls_certificate_file / tls_key_file: a client certificate for mutual TLS.

    Raises:
        InvalidServiceURLError: the URL is malformed.

    Use it as ``async with AsyncClient(url) as client:`` or call :meth:`close`.
    """

    def __init__(
        self,
        service_url: str,
        *,
        operation_timeout: float = 30.0,
        connection_timeout: float = 10.0,
        keepalive_interval: float = 30.0,
        authentication: Authentication | None = None,
        tls_trust_certs_file: str | Path | None = None,
        tls_validate_hostname: bool = True,
        tls_allow_insecure_connection: bool = False,
        tls_certificate_file: str | Path | None = None,
        tls_key_file: str | Path | None = None,
    ) -> None:
        tls = TlsOptions(
            trust_certs_file=Path(tls_trust_certs_file) if tls_trust_certs_file else None,
            validate_hostname=tls_validate_hostname,
            allow_insecure=tls_allow_insecure_connection,
            certificate_file=Path(tls_certificate_file) if tls_certificate_file else None,
            key_file=Path(tls_key_file) if tls_key_file else None,
        )
        self.settings = ClientSettings(
            parse_service_url(service_url),
            operation_timeout=operation_timeout,
            connection_timeout=connection_timeout,
            keepalive_interval=keepalive_interval,
            tls=tls,
            authentication=authentication,
        )
        self.service_url = service_url
        self._ctx: ClientContext | None = None
        self._sources: LayoutSources | None = None
        self._producers: set[AsyncProducer] = set()
        self._consumers: set[ConsumerBase] = set()
        self._readers: set[AsyncSegmentReader[Any]] = set()
        self._coordinators: CoordinatorClient | None = None
        self._closed = False
        self._close_task: asyncio.Future[None] | None = None

    def _context(self) -> tuple[ClientContext, LayoutSources]:
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        if self._ctx is None:
            self._ctx = ClientContext(self.settings)
            self._sources = LayoutSources(self._ctx)
        assert self._sources is not None
        return self._ctx, self._sources

    @property
    def closed(self) -> bool:
        return self._closed

    # -- producers ----------------------------------------------------------------------------

    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        access_mode: str = "shared",
        batching: bool = True,
        compression: str | None = None,
        send_timeout: float = 30.0,
        schema: Schema | None = None,
        **options: Any,
    ) -> AsyncProducer:
        """A producer for ``topic`` (``topic://``, ``persistent://`` or a short name).

        ``schema`` (a :class:`~braid.client.schema.Schema`, default bytes) encodes every value
        and is registered with the topic's schema. Further options: ``batching_max_messages``,
        ``batching_max_bytes``, ``batching_max_delay``, ``max_pending_messages``,
        ``initial_sequence_id``.

        Raises:
            InvalidConfigurationError, InvalidTopicNameError: bad arguments.
            NotFoundError: the topic does not exist and may not be auto-created.
            ProducerBusyError, ProducerFencedError: an exclusive mode could not be acquired.
            IncompatibleSchemaError: the topic's schema rules refuse ``schema``.
            FeatureNotSupportedError: a ``topic://`` name on a broker without scalable topics.
        """
        ctx, sources = self._context()
        opts = check_options(
            producer_name=producer_name,
            access_mode=access_mode,
            batching=batching,
            compression=compression,
            send_timeout=send_timeout,
            schema=schema,
            **options,
        )
        producer = await AsyncProducer.create(ctx, sources, topic, opts)
        self._producers.add(producer)
        return producer

    # -- consumers ----------------------------------------------------------------------------

    async def subscribe_stream(
        self,
        topic: str,
        subscription: str,
        consumer_name: str | None = None,
        initial_position: str = "latest",
        receiver_queue_size: int = 1000,
        schema: Schema | None = None,
    ) -> AsyncStreamConsumer:
        """An ordered consumer with cumulative acknowledgment (load shared across the
        subscription's consumers, per-key order kept).

        ``schema`` decodes ``Message.value`` (default bytes); the broker checks that it can
        read the topic's schema (``IncompatibleSchemaError``)."""
        ctx, sources = self._context()
        position = _initial_position(initial_position)
        _check_name("subscription", subscription)
        size = _check_queue_size(receiver_queue_size)
        value_schema = check_schema(schema)
        source = await sources.acquire(topic)
        consumer = AsyncStreamConsumer(
            ctx, sources, source, subscription, consumer_name, position, size, value_schema
        )
        return await self._started(consumer)

    async def subscribe_queue(
        self,
        topic: str,
        subscription: str,
        consumer_name: str | None = None,
        initial_position: str = "latest",
        receiver_queue_size: int = 1000,
        negative_ack_delay: float = 1.0,
        schema: Schema | None = None,
        ack_timeout: float = 0.0,
        dead_letter_policy: DeadLetterPolicy | None = None,
        retry_enable: bool = False,
    ) -> AsyncQueueConsumer:
        """A parallel consumer with individual and negative acknowledgment (``schema``: as
        for :meth:`subscribe_stream`).

        ``ack_timeout`` (seconds, 0 = off): a message neither acknowledged nor negatively
        acknowledged that long is redelivered. ``dead_letter_policy``: a message redelivered
        ``max_redeliver_count`` times goes to the dead-letter topic when it fails again.
        ``retry_enable``: ``reconsume_later`` and the retry-letter topic (read too; default
        policy: 16 retries). See ``docs/client.md#queue-parity-with-shared-subscriptions``.
        """
        ctx, sources = self._context()
        position = _initial_position(initial_position)
        _check_name("subscription", subscription)
        size = _check_queue_size(receiver_queue_size)
        if not isinstance(negative_ack_delay, int | float) or negative_ack_delay < 0:
            raise InvalidConfigurationError(
                f"negative_ack_delay must be >= 0: {negative_ack_delay!r}"
            )
        timeout = check_ack_timeout(ack_timeout)
        if dead_letter_policy is not None and not isinstance(dead_letter_policy, DeadLetterPolicy):
            raise InvalidConfigurationError(
                f"dead_letter_policy must be a DeadLetterPolicy: {dead_letter_policy!r}"
            )
        if retry_enable and dead_letter_policy is None:
            dead_letter_policy = DeadLetterPolicy(DEFAULT_MAX_RECONSUME_TIMES)
        value_schema = check_schema(schema)
        source = await sources.acquire(topic)
        dead_letters = (
            None
            if dead_letter_policy is None
            else DeadLetters(
                dead_letter_policy,
                source.topic,
                subscription,
                self.create_producer,
                self._create_subscription,
            )
        )

        def make(src: LayoutSource, **extra: Any) -> AsyncQueueConsumer:
            return AsyncQueueConsumer(
                ctx,
                sources,
                src,
                subscription,
                consumer_name,
                position,
                size,
                negative_ack_delay,
                value_schema,
                **extra,
            )

        consumer = await self._started(make(source, ack_timeout=timeout, dead_letters=dead_letters))
        if retry_enable and dead_letters is not None:
            try:
                retry_source = await sources.acquire(dead_letters.retry_letter_topic)
                await consumer._start_retry(make(retry_source))
            except BaseException:
                await consumer.close()
                raise
        return consumer

    async def _create_subscription(self, topic: str, subscription: str) -> None:
        """Create ``subscription`` on ``topic`` from its earliest message (a dead-letter
        policy's ``initial_subscription_name``); an existing one is left as it is."""
        consumer = await self.subscribe_queue(topic, subscription, initial_position="earliest")
        await consumer.close()

    async def create_checkpoint_consumer(
        self,
        topic: str,
        start: Checkpoint | None = None,
        group: str | None = None,
        consumer_name: str | None = None,
        receiver_queue_size: int = 1000,
        schema: Schema | None = None,
    ) -> AsyncCheckpointConsumer:
        """A consumer with a client-held position, starting at ``start``
        (default :meth:`Checkpoint.latest`); ``group`` shares the topic among members
        (``schema``: as for :meth:`subscribe_stream`)."""
        ctx, sources = self._context()
        if start is None:
            start = Checkpoint.latest()
        if not isinstance(start, Checkpoint):
            raise InvalidConfigurationError(
                f"start must be a Checkpoint (a MessageId is not a position here), got {start!r}"
            )
        if group is not None:
            _check_name("group", group)
        size = _check_queue_size(receiver_queue_size)
        value_schema = check_schema(schema)
        source = await sources.acquire(topic)
        consumer = AsyncCheckpointConsumer(
            ctx, sources, source, start, group, consumer_name, size, value_schema
        )
        return await self._started(consumer)

    @overload
    async def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        packed: Literal[False] = False,
        *,
        receiver_queue_bytes: int | None = None,
    ) -> AsyncSegmentReader[MessageColumns]: ...

    @overload
    async def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        *,
        packed: Literal[True],
        receiver_queue_bytes: int | None = None,
    ) -> AsyncSegmentReader[PackedColumns]: ...

    async def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        packed: bool = False,
        *,
        receiver_queue_bytes: int | None = None,
    ) -> AsyncSegmentReader[MessageColumns] | AsyncSegmentReader[PackedColumns]:
        """A reader of one segment of ``topic``, from just after ``start`` (``None``: its
        beginning), returning column chunks: :class:`~braid.client.columns.MessageColumns`
        (lists), or with ``packed=True``
        :class:`~braid.client.packed_columns.PackedColumns` (Arrow-layout buffers, no Python
        object per message: for handing rows to Arrow). ``receiver_queue_size`` messages are
        read ahead at most; with ``receiver_queue_bytes``, also about that many bytes at most
        (counted as entries arrive, :mod:`braid.client.receive_window`).

        Raises:
            InvalidConfigurationError: a bad ``segment_id``, ``start`` or queue size.
            NotFoundError: the topic, or the segment in its layout, does not exist.
        """
        ctx, sources = self._context()
        if isinstance(segment_id, bool) or not isinstance(segment_id, int) or segment_id < 0:
            raise InvalidConfigurationError(f"segment_id must be an int >= 0: {segment_id!r}")
        cursor = start_cursor(start, segment_id)
        size = _check_queue_size(receiver_queue_size)
        nbytes = None
        if receiver_queue_bytes is not None:
            nbytes = _check_queue_size(receiver_queue_bytes, "receiver_queue_bytes")
        source = await sources.acquire(topic)
        reader: AsyncSegmentReader[MessageColumns] | AsyncSegmentReader[PackedColumns]
        if packed:
            reader = AsyncSegmentReader(
                ctx, sources, source, segment_id, cursor, size, PACKED, nbytes
            )
        else:
            reader = AsyncSegmentReader(
                ctx, sources, source, segment_id, cursor, size, LISTS, nbytes
            )
        try:
            await reader._start()
        except BaseException:
            await reader.close()
            raise
        self._readers.add(reader)
        return reader

    # -- transactions -------------------------------------------------------------------------

    async def new_transaction(self, timeout: float = DEFAULT_TIMEOUT) -> AsyncTransaction:  # noqa: ASYNC109
        """Begin a transaction that its coordinator aborts unless it is committed within
        ``timeout`` seconds (``docs/client.md#transactions``).

        Raises:
            NotAllowedError: the broker runs no transaction coordinator.
            InvalidConfigurationError: ``timeout`` is not a positive number of seconds.
        """
        ctx, _sources = self._context()
        seconds = check_timeout(timeout)
        if self._coordinators is None:
            self._coordinators = CoordinatorClient(ctx)
        opened = ctx.loop.time()  # before NEW_TXN: the client's deadline is never the later
        txn_id = await self._coordinators.new_txn(int(seconds * 1000))
        return AsyncTransaction(ctx, self._coordinators, txn_id, seconds, opened)

    async def _started(self, consumer: C) -> C:
        try:
            await consumer._start()
        except BaseException:
            await consumer.close()
            raise
        self._consumers.add(consumer)
        return consumer

    # -- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every producer (completing their pending sends) and consumer, then the
        connections. Idempotent; later operations raise ``AlreadyClosedError``."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._closed = True
        producers, self._producers = list(self._producers), set()
        consumers, self._consumers = list(self._consumers), set()
        readers, self._readers = list(self._readers), set()
        await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in consumers), return_exceptions=True)
        await asyncio.gather(*(r.close() for r in readers), return_exceptions=True)
        if self._sources is not None:
            await self._sources.close()
        if self._coordinators is not None:
            await self._coordinators.close()
        if self._ctx is not None:
            await self._ctx.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncClient"]
