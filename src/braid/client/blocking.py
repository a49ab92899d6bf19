"""``braid.Client``: the blocking facade over the asyncio client, safe to share across threads.

The client starts one background thread running an event loop with an
:class:`~braid.client.async_client.AsyncClient` on it; blocking methods submit coroutines to
that loop and wait. Semantics are the asynchronous ones, and so are the resources.

The hot paths avoid one thread hop per message:

* ``Producer.send_async`` appends to an ingress list under a lock and wakes the loop only when
  the list was empty, so a burst of sends costs one cross-thread wake-up; the loop drains the
  list in order, so call order across threads is publish order. Completion is a
  ``concurrent.futures.Future`` resolved on the loop. ``send_many`` makes one future per call;
* consumers' ``receive`` takes messages from the thread-safe receive queue on the calling
  thread; acknowledgments are recorded on the calling thread and sent by the loop, grouped.

Calling a blocking method from the client's own loop thread (e.g. inside a callback) would wait
for itself; it raises ``IllegalStateError`` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import threading
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

from braid.client.async_client import AsyncClient
from braid.client.checkpoint_consumer import AsyncCheckpointConsumer
from braid.client.columns import MessageColumns
from braid.client.consumer_base import ConsumerBase
from braid.client.errors import AlreadyClosedError, IllegalStateError
from braid.client.message import Message
from braid.client.packed_columns import PackedColumns
from braid.client.pending import SharedConditionFuture
from braid.client.producer import AsyncProducer
from braid.client.queue_consumer import AsyncQueueConsumer
from braid.client.segment_reader import AsyncSegmentReader, Chunk
from braid.client.stream_consumer import AsyncStreamConsumer
from braid.client.transaction import DEFAULT_TIMEOUT, AsyncTransaction, TransactionState
from braid.core.checkpoint import Checkpoint, SegmentCursor
from braid.core.message_id import MessageId
from braid.event_loop import choose_event_loop

T = TypeVar("T")


class _LoopThread:
    """A daemon thread running one event loop until :meth:`stop`."""

    def __init__(self) -> None:
        self.loop = choose_event_loop().new_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="braid-client-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()
        # Whatever still runs (a call another thread is blocked on) is cancelled, so that
        # thread gets an error instead of waiting forever on a stopped loop.
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise IllegalStateError(
                "blocking Braid calls cannot run on the client's own loop thread"
            )
        if self.loop.is_closed():
            coro.close()
            raise AlreadyClosedError("the client is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise
        except concurrent.futures.CancelledError:
            raise AlreadyClosedError("the client was closed during the call") from None

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join()


class Client:
    """The blocking Braid client (thread-safe; one per application).

    Args:
        service_url: ``pulsar://host:port``.
        operation_timeout, connection_timeout, keepalive_interval: as for
            :class:`~braid.client.async_client.AsyncClient`.

    Raises:
        InvalidServiceURLError: the URL is malformed.
    """

    def __init__(self, service_url: str, **options: Any) -> None:
        self._async = AsyncClient(service_url, **options)
        self._runner = _LoopThread()
        self._closed = False
        self._lock = threading.Lock()

    @property
    def async_client(self) -> AsyncClient:
        """The :class:`AsyncClient` on the background loop (use it from that loop only)."""
        return self._async

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise AlreadyClosedError("the client is closed")
        return self._runner.run(coro)

    def create_producer(self, topic: str, **options: Any) -> Producer:
        """A producer (same arguments as ``AsyncClient.create_producer``)."""
        return Producer(self, self._run(self._async.create_producer(topic, **options)))

    def subscribe_stream(self, topic: str, subscription: str, **options: Any) -> StreamConsumer:
        """An ordered consumer with cumulative acknowledgment."""
        return StreamConsumer(
            self, self._run(self._async.subscribe_stream(topic, subscription, **options))
        )

    def subscribe_queue(self, topic: str, subscription: str, **options: Any) -> QueueConsumer:
        """A parallel consumer with individual and negative acknowledgment."""
        return QueueConsumer(
            self, self._run(self._async.subscribe_queue(topic, subscription, **options))
        )

    def create_checkpoint_consumer(
        self, topic: str, start: Checkpoint | None = None, group: str | None = None, **options: Any
    ) -> CheckpointConsumer:
        """A consumer with a client-held position, from ``start`` (default: latest)."""
        return CheckpointConsumer(
            self,
            self._run(self._async.create_checkpoint_consumer(topic, start, group, **options)),
        )

    @overload
    def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        packed: Literal[False] = False,
        *,
        receiver_queue_bytes: int | None = None,
    ) -> SegmentReader[MessageColumns]: ...

    @overload
    def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        *,
        packed: Literal[True],
        receiver_queue_bytes: int | None = None,
    ) -> SegmentReader[PackedColumns]: ...

    def create_segment_reader(
        self,
        topic: str,
        segment_id: int,
        start: SegmentCursor | MessageId | None = None,
        receiver_queue_size: int = 1000,
        packed: bool = False,
        *,
        receiver_queue_bytes: int | None = None,
    ) -> SegmentReader[MessageColumns] | SegmentReader[PackedColumns]:
        """A reader of one segment as column chunks, from just after ``start`` (default: the
        segment's beginning); same arguments as ``AsyncClient.create_segment_reader``."""
        if packed:
            return SegmentReader(
                self,
                self._run(
                    self._async.create_segment_reader(
                        topic,
                        segment_id,
                        start,
                        receiver_queue_size,
                        packed=True,
                        receiver_queue_bytes=receiver_queue_bytes,
                    )
                ),
            )
        return SegmentReader(
            self,
            self._run(
                self._async.create_segment_reader(
                    topic,
                    segment_id,
                    start,
                    receiver_queue_size,
                    receiver_queue_bytes=receiver_queue_bytes,
                )
            ),
        )

    def new_transaction(self, timeout: float = DEFAULT_TIMEOUT) -> Transaction:
        """Begin a transaction its coordinator aborts unless committed within ``timeout``
        seconds (as ``AsyncClient.new_transaction``)."""
        return Transaction(self, self._run(self._async.new_transaction(timeout)))

    def close(self) -> None:
        """Close everything the client created, then its loop thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._runner.run(self._async.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transaction:
    """Blocking view of an :class:`~braid.client.transaction.AsyncTransaction` (thread-safe);
    pass it as ``txn=`` to ``Producer.send`` and the consumers' acknowledgments."""

    def __init__(self, client: Client, txn: AsyncTransaction) -> None:
        self._client = client
        self.async_transaction = txn

    @property
    def txn_id(self) -> tuple[int, int]:
        """``(mostBits, leastBits)``, as the coordinator numbered it."""
        return self.async_transaction.txn_id

    @property
    def state(self) -> TransactionState:
        return self.async_transaction.state

    def commit(self) -> None:
        """Wait for the transaction's sends and acknowledgments, then commit it (raises the
        typed error: ``TransactionEndedError``, ``TransactionTimedOutError``,
        ``TransactionErroredError``, ``TransactionConflictError``)."""
        self._client._run(self.async_transaction.commit())

    def abort(self) -> None:
        """Abort it (allowed while open or errored)."""
        self._client._run(self.async_transaction.abort())

    def __repr__(self) -> str:
        return repr(self.async_transaction)


def _txn(txn: Transaction | AsyncTransaction | None) -> AsyncTransaction | None:
    return txn.async_transaction if isinstance(txn, Transaction) else txn


class Producer:
    """Blocking view of an :class:`AsyncProducer` (thread-safe)."""

    def __init__(self, client: Client, producer: AsyncProducer) -> None:
        self._client = client
        self._producer = producer
        self._loop = client._runner.loop
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._ingress: list[tuple[Any, ...]] = []
        self._scheduled = False
        self._waiting_space = 0
        self._futures = threading.Condition()
        self._limit = producer._options.max_pending_messages
        self._unresolved = producer._unresolved
        producer.space_listeners.append(self._on_space)

    @property
    def topic(self) -> str:
        return self._producer.topic

    @property
    def producer_name(self) -> str | None:
        return self._producer.producer_name

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id the broker has confirmed (-1 before any)."""
        return self._producer.last_sequence_id

    def send(
        self,
        value: Any,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
        *,
        deliver_after: datetime.timedelta | float | None = None,
        deliver_at: int | None = None,
        txn: Transaction | AsyncTransaction | None = None,
    ) -> MessageId:
        """Publish and wait until stored; returns the message id (raises the typed error).
        ``deliver_after`` / ``deliver_at``: delayed delivery, ``txn``: a transaction, as
        ``AsyncProducer.send``."""
        return self.send_async(
            value,
            key,
            properties,
            event_time,
            sequence_id,
            deliver_after=deliver_after,
            deliver_at=deliver_at,
            txn=txn,
        ).result()

    def send_async(
        self,
        value: Any,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
        *,
        deliver_after: datetime.timedelta | float | None = None,
        deliver_at: int | None = None,
        txn: Transaction | AsyncTransaction | None = None,
    ) -> concurrent.futures.Future[MessageId]:
        """Queue a message (call order = publish order); the future gets its id.

        Blocks while ``max_pending_messages`` sends are unconfirmed; never raises (failures
        complete the future).
        """
        future: SharedConditionFuture[MessageId] = SharedConditionFuture(self._futures)
        if deliver_after is None and deliver_at is None and txn is None:
            self._submit((future, value, key, properties, event_time, sequence_id), 1)
        else:
            item = (future, value, key, properties, event_time, sequence_id, deliver_after)
            self._submit((*item, deliver_at, _txn(txn)), 1)
        return future

    def send_many(
        self,
        values: Sequence[Any],
        keys: Sequence[str | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_times: Sequence[int | None] | None = None,
    ) -> list[MessageId]:
        """Publish many messages in order; wait until all are stored; their ids in order."""
        return self.send_many_async(values, keys, properties, event_times).result()

    def send_many_async(
        self,
        values: Sequence[Any],
        keys: Sequence[str | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_times: Sequence[int | None] | None = None,
    ) -> concurrent.futures.Future[list[MessageId]]:
        """Queue many messages with a single future for all their ids (no per-message future)."""
        future: SharedConditionFuture[list[MessageId]] = SharedConditionFuture(self._futures)
        self._submit((future, values, keys, properties, event_times), len(values))
        return future

    def _submit(self, item: tuple[Any, ...], count: int) -> None:
        limit = self._limit
        with self._lock:
            while (
                len(self._unresolved) + len(self._ingress) >= limit
                and not self._producer.closed
                and threading.current_thread() is not self._client._runner.thread
            ):
                self._waiting_space += 1
                try:
                    self._space.wait(1.0)
                finally:
                    self._waiting_space -= 1
            self._ingress.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: the client was closed
            with self._lock:
                items, self._ingress, self._scheduled = self._ingress, [], False
            error = AlreadyClosedError("the client is closed")
            for queued in items:
                if not queued[0].done():
                    queued[0].set_exception(error)

    def _drain(self) -> None:
        with self._lock:
            items, self._ingress = self._ingress, []
            self._scheduled = False
        submit, submit_many = self._producer.submit, self._producer.submit_many
        for item in items:
            if len(item) == 6:
                submit(*item)
            elif len(item) == 9:
                submit(*item[:6], deliver_after=item[6], deliver_at=item[7], txn=item[8])
            else:
                submit_many(*item)

    def _on_space(self) -> None:
        with self._lock:
            if self._waiting_space:
                self._space.notify_all()

    async def _flush_async(self) -> None:
        self._drain()
        await self._producer.flush()

    def flush(self) -> None:
        """Wait until every message sent before this call is stored (or failed)."""
        self._client._run(self._flush_async())

    async def _close_async(self) -> None:
        self._drain()
        await self._producer.close()

    def close(self) -> None:
        """Complete pending sends, then close. Idempotent."""
        with contextlib.suppress(AlreadyClosedError):
            self._client._run(self._close_async())
        with self._lock:
            self._space.notify_all()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


C = TypeVar("C", bound=ConsumerBase)


class _Consumer:
    """What the three blocking consumers share."""

    def __init__(self, client: Client, consumer: ConsumerBase) -> None:
        self._client = client
        self._consumer = consumer

    @property
    def topic(self) -> str:
        return self._consumer.topic

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if ``timeout`` seconds pass (``None`` = wait)."""
        self._check_thread()
        messages = self._consumer.receive_blocking(1, timeout)
        return messages[0] if messages else None

    def receive_many(self, max_messages: int, timeout: float | None = None) -> list[Message]:
        """Up to ``max_messages`` messages (those queued, else the first within ``timeout``)."""
        self._check_thread()
        return self._consumer.receive_blocking(max_messages, timeout)

    def _check_thread(self) -> None:
        if threading.current_thread() is self._client._runner.thread:
            raise IllegalStateError("blocking receive cannot run on the client's own loop thread")

    def __iter__(self) -> Iterator[Message]:
        while True:
            try:
                message = self.receive()
            except AlreadyClosedError:
                return
            if message is not None:
                yield message

    def close(self) -> None:
        """Close the consumer (nothing is acknowledged on your behalf). Idempotent."""
        with contextlib.suppress(AlreadyClosedError):
            self._client._run(self._consumer.close())

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Subscriber(_Consumer):
    """A consumer with a durable subscription."""

    _consumer: AsyncStreamConsumer | AsyncQueueConsumer

    def unsubscribe(self) -> None:
        """Delete the subscription, then close."""
        self._client._run(self._consumer.unsubscribe())


class StreamConsumer(_Subscriber):
    """Blocking view of an :class:`AsyncStreamConsumer`."""

    _consumer: AsyncStreamConsumer

    def acknowledge_cumulative(
        self, message: Message | MessageId, txn: Transaction | AsyncTransaction | None = None
    ) -> None:
        """Acknowledge this message and everything delivered before it (never blocks; in
        ``txn``: applied if it commits)."""
        self._consumer.acknowledge_cumulative(message, _txn(txn))


class QueueConsumer(_Subscriber):
    """Blocking view of an :class:`AsyncQueueConsumer`."""

    _consumer: AsyncQueueConsumer

    def acknowledge(
        self, message: Message | MessageId, txn: Transaction | AsyncTransaction | None = None
    ) -> None:
        """Acknowledge one message (never blocks; in ``txn``: applied if it commits)."""
        self._consumer.acknowledge(message, _txn(txn))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for one message to be redelivered later (or dead-lettered: see the policy)."""
        self._consumer.negative_acknowledge(message)

    def reconsume_later(self, message: Message, delay: float) -> None:
        """Have ``message`` delivered again after ``delay`` seconds via the retry-letter topic
        (``retry_enable=True``)."""
        self._client._run(self._consumer.reconsume_later(message, delay))


class CheckpointConsumer(_Consumer):
    """Blocking view of an :class:`AsyncCheckpointConsumer`."""

    _consumer: AsyncCheckpointConsumer

    def checkpoint(self) -> Checkpoint:
        """An atomic snapshot of the read position (no broker round trip)."""
        return self._consumer.checkpoint()


class SegmentReader(Generic[Chunk]):
    """Blocking view of an :class:`AsyncSegmentReader` (create with
    ``Client.create_segment_reader``)."""

    def __init__(self, client: Client, reader: AsyncSegmentReader[Chunk]) -> None:
        self._client = client
        self._reader: AsyncSegmentReader[Chunk] = reader

    @property
    def topic(self) -> str:
        return self._reader.topic

    @property
    def segment_id(self) -> int:
        return self._reader.segment_id

    @property
    def drained(self) -> bool:
        """Whether the broker reported the segment's end and every row was taken."""
        return self._reader.drained

    @property
    def last_position(self) -> tuple[int, int, int] | None:
        """``(ledger_id, entry_id, batch_index)`` of the last row taken, else ``None``."""
        return self._reader.last_position

    def read_columns(self, max_messages: int, timeout: float | None = None) -> Chunk:
        """Up to ``max_messages`` next rows (those buffered, else the first within ``timeout``
        seconds; ``None`` = wait); empty when none came or the segment is drained."""
        if threading.current_thread() is self._client._runner.thread:
            raise IllegalStateError("blocking reads cannot run on the client's own loop thread")
        return self._reader.read_columns_blocking(max_messages, timeout)

    def close(self) -> None:
        """Stop reading. Idempotent."""
        with contextlib.suppress(AlreadyClosedError):
            self._client._run(self._reader.close())

    def __enter__(self) -> SegmentReader[Chunk]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "CheckpointConsumer",
    "Client",
    "Producer",
    "QueueConsumer",
    "SegmentReader",
    "StreamConsumer",
    "Transaction",
]
