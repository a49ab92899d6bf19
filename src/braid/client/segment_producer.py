"""One per-segment producer: the standard PRODUCER/SEND protocol against one segment's topic.

A topic producer (:mod:`braid.client.producer`) owns one :class:`SegmentProducer` per segment it
has written to. This class keeps Pulsar's producer guarantees for that segment:

* **order** - messages enter the segment's batch in ``send`` order and entries are sent and
  receipted in order; a reconnect resends every unreceipted entry, in order, with the same
  sequence ids (so broker deduplication drops what was already stored);
* **batching** - messages accumulate into one entry (at most ``batching_max_messages`` /
  ``batching_max_bytes``, at most ``batching_max_delay`` old), encoded on the fly by
  :mod:`braid.client.batch_encoder`; on a managed segment of a layout that advertises entry
  buckets (PIP-486) an entry never mixes buckets and carries its effective bucket-hash range;
* **self-healing** - a lost connection or a broker CLOSE_PRODUCER re-runs lookup -> connect ->
  PRODUCER with backoff; messages sent meanwhile wait, unnumbered, until the producer is ready;
* **segment gone** - ``TopicTerminated`` (from PRODUCER or SEND) hands every unconfirmed message
  back to the topic producer, which re-routes them on a newer layout
  (``docs/protocol.md#producing-to-segments``); a message already sent keeps its sequence id and
  is resent alone, so the successor's deduplication drops it if the sealed segment stored it
  (ADR 0055);
* **fatal refusals** (busy, fenced, not found, unauthorized) fail the segment's messages with
  the typed error and drop the segment producer, so a later send tries again;
* **transactions** - an entry holds messages of one transaction (or of none), its SEND and
  metadata carrying the transaction id; before the first message of a transaction reaches this
  segment, the transaction adds the segment's topic as a partition (ADD_PARTITION_TO_TXN), and
  this segment's later messages wait behind it meanwhile, so call order holds. A SEND the broker
  refuses for its transaction fails that entry's messages (the transaction is then in error).

Sequence ids come from the topic producer's counter when a message enters a batch. What a
segment producer may ask of its topic producer is :class:`SegmentProducerOwner`: the schema, the
sequence ids, and where its messages' outcomes go.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from typing import Protocol

from braid.client.batch_encoder import (
    bare_header,
    entry_metadata,
    producer_name_field,
    single_message_header,
)
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.errors import (
    AlreadyClosedError,
    MessageTooLargeError,
    NotAllowedError,
    TopicTerminatedError,
    TransactionConflictError,
    error_for_code,
    is_transient,
)
from braid.client.pending import PendingMessage, succeed
from braid.client.producer_options import ProducerOptions
from braid.client.sequence_ids import SequenceIds
from braid.core.message_id import MessageId, unchecked_message_id
from braid.core.routing import bucket_hash, bucket_of
from braid.core.topic_layout import SegmentRoute
from braid.protocol import batch, commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_UINT64_MAX = (1 << 64) - 1


class _Op:
    """One entry sent (or to be sent) and not yet receipted."""

    __slots__ = ("batched", "body", "created", "first_seq", "last_seq", "records")

    def __init__(
        self,
        records: list[PendingMessage],
        first_seq: int,
        last_seq: int,
        body: bytes,
        *,
        batched: bool,
    ) -> None:
        self.records = records
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.body = body
        self.batched = batched
        self.created = records[0].enqueued_at


class SegmentProducerOwner(Protocol):
    """What a :class:`SegmentProducer` may ask of the topic producer that owns it."""

    @property
    def wire_schema(self) -> pb.Schema | None:
        """The schema every PRODUCER carries (``None``: bytes, no schema)."""
        ...

    @property
    def sequence_ids(self) -> SequenceIds:
        """The topic producer's counter: numbers messages as they enter a batch."""
        ...

    def confirmed(self, records: list[PendingMessage]) -> None:
        """``records`` were stored (their completions are resolved already)."""
        ...

    def failed(self, records: list[PendingMessage], error: BaseException) -> None:
        """``records`` failed for good with ``error``."""
        ...

    def segment_gone(self, segment: SegmentProducer, error: BaseException) -> None:
        """``segment`` was terminated (a split or merge sealed it): its unconfirmed messages
        (:meth:`SegmentProducer.take_unresolved`) are to be re-routed."""
        ...

    def segment_refused(self, segment: SegmentProducer, error: BaseException) -> None:
        """``segment`` refused the producer for good: its messages fail with ``error``."""
        ...


class SegmentProducer:
    """The producer of one segment (see the module docstring)."""

    def __init__(
        self,
        owner: SegmentProducerOwner,
        ctx: ClientContext,
        route: SegmentRoute,
        options: ProducerOptions,
        name: str | None,
        *,
        entry_buckets: bool = False,
    ) -> None:
        self.owner = owner
        self._sequence = owner.sequence_ids
        self.ctx = ctx
        self.route = route
        self.segment_id = route.segment_id
        self.options = options
        self.requested_name = name
        self.name: str | None = name
        self.conn: BrokerConnection | None = None
        self.producer_id = 0
        self.ready = False
        self.closed = False
        self.gone = False
        self._epoch = 0
        self._unsent: list[PendingMessage] = []
        self._batch: list[PendingMessage] = []
        self._parts: list[bytes] = []
        self._batch_bytes = 0
        self._bucket: int | None = None
        self._hash_min = 0xFFFF
        self._hash_max = 0
        self._ops: collections.deque[_Op] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._attaching = False
        self._started = False
        self._attached: asyncio.Future[None] = ctx.loop.create_future()
        self._name_field = b""
        #: The schema version PRODUCER_SUCCESS gave, stamped on every entry (None: bytes).
        self._schema_version: bytes | None = None
        self._max_size = 5 * 1024 * 1024
        # PIP-486 entry buckets only where the broker advertised them (entry_buckets: the
        # layout lists bucket boundaries); then every managed segment's entries are stamped
        # with their effective hash range (N = 1 included) and split by bucket where it has
        # several. Otherwise entries are plain batches and no per-message hash is computed.
        self._stamp = entry_buckets and not route.legacy
        self._bucketed = self._stamp and bool(route.entry_bucket_splits)
        self._idle_waiters: list[asyncio.Future[None]] = []
        #: Messages waiting (in call order) for a transaction to add this segment's topic.
        self._gated: list[PendingMessage] = []
        self._gate: asyncio.Future[None] | None = None

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> asyncio.Future[None]:
        """Begin attaching; the returned future holds the first attach's outcome."""
        if not self._started:
            self._started = True
            self._spawn_attach()
        return self._attached

    def _spawn_attach(self) -> None:
        if self._attaching or self.closed or self.gone:
            return
        self._attaching = True
        self.ctx.spawn(self._attach_loop(), f"producer attach to {self.route.topic}")

    async def _attach_loop(self) -> None:
        backoff = self.ctx.backoff()
        try:
            while not self.closed and not self.gone:
                try:
                    await self._attach_once()
                    backoff.reset()
                    return
                except TopicTerminatedError as exc:
                    self._segment_gone(exc)
                    return
                except Exception as exc:
                    if not is_transient(exc):
                        self._fatal(exc)
                        return
                    log.debug("producer on %s not attached yet: %s", self.route.topic, exc)
                    self.ctx.route_failed(self.route)
                    await asyncio.sleep(backoff.next_delay())
        finally:
            self._attaching = False
            if not self._attached.done() and (self.closed or self.ctx.closed):
                # Closed (or the client shut down) before the first attach: tell the creator.
                self._attached.set_exception(
                    AlreadyClosedError(f"producer on {self.route.topic} closed")
                )
                self._attached.exception()  # retrieved: nobody may be waiting

    async def _attach_once(self) -> None:
        conn = await self.ctx.connection_for(self.route)
        producer_id = self.ctx.next_id()
        request_id = conn.new_request_id()
        conn.register_producer(producer_id, self)
        cmd = commands.producer(
            self.route.topic,
            producer_id,
            request_id,
            producer_name=self.name,
            access_mode=self.options.wire_access_mode,  # type: ignore[arg-type]
            epoch=self._epoch,
            schema=self.owner.wire_schema,
        )
        waiting = self.options.access_mode == "wait_for_exclusive"
        try:
            response = await conn.request(cmd, request_id, timeout=None if waiting else -1.0)
        except BaseException:
            conn.unregister_producer(producer_id, self)
            raise
        if self.closed:
            conn.unregister_producer(producer_id, self)
            with contextlib.suppress(Exception):
                conn.send(commands.close_producer(producer_id, conn.new_request_id()))
            return
        success = response.producer_success
        self._epoch += 1
        self.conn = conn
        self.producer_id = producer_id
        self.name = success.producer_name
        self._name_field = producer_name_field(success.producer_name)
        self._schema_version = (
            bytes(success.schema_version) or None if self.owner.wire_schema is not None else None
        )
        self._max_size = conn.max_message_size
        self._sequence.resume_after(success.last_sequence_id)
        self.ready = True
        log.debug("producer %s attached to %s", self.name, self.route.topic)
        for op in self._ops:
            conn.send(self._send_command(op), op.body)
        unsent, self._unsent = self._unsent, []
        for record in unsent:
            self.add(record)
        self.flush()
        if not self._attached.done():
            self._attached.set_result(None)

    def _send_command(self, op: _Op) -> pb.BaseCommand:
        count = len(op.records)
        highest = op.last_seq if op.last_seq != op.first_seq + count - 1 else None
        cmd = commands.send(
            self.producer_id,
            op.first_seq,
            num_messages=count if op.batched else None,
            highest_sequence_id=highest,
        )
        txn = op.records[0].txn  # every message of an entry is in the same transaction
        if txn is not None:
            cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = txn.txn_id
        return cmd

    # -- sending ------------------------------------------------------------------------------

    def add(self, record: PendingMessage) -> None:
        """Queue ``record`` (in call order) into the current batch, or until ready."""
        if self._gated:
            self._gated.append(record)  # behind a transaction adding this segment
            return
        if not self.ready:
            self._unsent.append(record)
            return
        size = len(record.value)
        if size > self._max_size:
            self.owner.failed(
                [record],
                MessageTooLargeError(
                    f"message of {size} bytes exceeds the broker's limit of {self._max_size}"
                ),
            )
            return
        if record.txn is not None and not self._in_partition(record):
            return
        if not self.options.batching or record.sent_seq >= 0:
            # A resend after a split or merge goes alone, with its key in the entry's
            # metadata: the successor judges it against the floor of its key (ADR 0055).
            if self._batch:
                self.flush()
            self._sequence.assign(record)
            self._send_single(record)
            return
        if self._bucketed or self._stamp:
            self._check_bucket(record)
        batch = self._batch
        delayed = record.deliver_at is not None
        if batch and (
            delayed
            or self._batch_bytes + size > self.options.batching_max_bytes
            or batch[0].txn is not record.txn  # an entry belongs to one transaction, or none
        ):
            # A delayed message travels alone in its entry (the broker holds whole entries).
            self.flush()
            batch = self._batch
        self._sequence.assign(record)
        seq = record.seq
        # The sequence id is written only where the entry's ids stop being contiguous
        # (entry sequence id + index is the default a reader applies).
        explicit_seq = seq if batch and seq != batch[0].seq + len(batch) else None
        if (
            explicit_seq is None
            and record.key is None
            and record.properties is None
            and record.event_time is None
        ):
            header = bare_header(size)
        else:
            header = single_message_header(
                size, explicit_seq, record.key, record.properties, record.event_time
            )
        parts = self._parts
        parts.append(header)
        parts.append(record.value)
        batch.append(record)
        self._batch_bytes += size
        if delayed or len(batch) >= self.options.batching_max_messages:
            self.flush()
        elif self._timer is None:
            self._timer = self.ctx.loop.call_later(self.options.batching_max_delay, self._on_timer)

    def _in_partition(self, record: PendingMessage) -> bool:
        """Whether ``record``'s transaction has added this segment's topic; if not yet, the
        record (and every later one) waits for it, and ``False`` is returned (as when the
        registration failed: the record has failed with its error)."""
        txn = record.txn
        assert txn is not None
        gate = txn.add_partition(self.route.topic)
        if not gate.done():
            self._gated.append(record)
            self._gate = gate
            gate.add_done_callback(self._release_gated)
            return False
        error = gate.exception()
        if error is not None:
            self.owner.failed([record], error)
            return False
        return True

    def _release_gated(self, gate: asyncio.Future[None]) -> None:
        if gate is not self._gate or self.closed:
            return
        self._gate = None
        gated, self._gated = self._gated, []
        for record in gated:
            self.add(record)

    def _check_bucket(self, record: PendingMessage) -> None:
        """Keep an entry to one entry bucket, and track its effective hash range."""
        key = record.key
        if key is None:
            bucket = -1
        else:
            h = bucket_hash(key)
            bucket = bucket_of(key, self.route.entry_bucket_splits) if self._bucketed else 0
        if self._batch and bucket != self._bucket:
            self.flush()
        self._bucket = bucket
        if key is not None:
            self._hash_min = min(self._hash_min, h)
            self._hash_max = max(self._hash_max, h)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        """Send the current batch as one entry now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        records = self._batch
        if not records or not self.ready:
            return
        payload = b"".join(self._parts)
        stamp = None
        if self._stamp and self._bucket is not None and self._bucket >= 0:
            stamp = (self._hash_min, self._hash_max)
        self._batch, self._parts, self._batch_bytes = [], [], 0
        self._bucket, self._hash_min, self._hash_max = None, 0xFFFF, 0
        first, last = records[0].seq, records[-1].seq
        codec = self.options.wire_compression
        uncompressed = len(payload)
        if codec != pb.NONE:
            payload = batch.compress(codec, payload)  # type: ignore[arg-type]
        highest = None if last == first + len(records) - 1 else last
        body = (
            entry_metadata(
                self._name_field,
                first,
                _now_ms(),
                num_messages=len(records),
                compression=codec,
                uncompressed_size=uncompressed,
                highest_sequence_id=highest,
                entry_hash_range=stamp,
                schema_version=self._schema_version,
                # Only a delayed message's entry has one (it is alone in its entry).
                deliver_at_time=records[0].deliver_at,
                txn=None if records[0].txn is None else records[0].txn.txn_id,
            )
            + payload
        )
        self._dispatch(_Op(records, first, last, body, batched=True))

    def _send_single(self, record: PendingMessage) -> None:
        payload = record.value
        codec = self.options.wire_compression
        if codec != pb.NONE:
            payload = batch.compress(codec, payload)  # type: ignore[arg-type]
        body = (
            entry_metadata(
                self._name_field,
                record.seq,
                _now_ms(),
                compression=codec,
                uncompressed_size=len(record.value),
                key=record.key,
                properties=record.properties,
                event_time=record.event_time,
                schema_version=self._schema_version,
                deliver_at_time=record.deliver_at,
                txn=None if record.txn is None else record.txn.txn_id,
            )
            + payload
        )
        self._dispatch(_Op([record], record.seq, record.seq, body, batched=False))

    def _dispatch(self, op: _Op) -> None:
        self._ops.append(op)
        conn = self.conn
        if conn is not None and self.ready:
            try:
                conn.send(self._send_command(op), op.body)
            except Exception as exc:  # the connection just went; the reconnect resends
                log.debug("send on %s deferred: %s", self.route.topic, exc)

    # -- ConnectionHandler --------------------------------------------------------------------

    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        ops = self._ops
        seq = receipt.sequence_id
        if not ops or ops[0].first_seq != seq:
            # A receipt for an entry that already timed out (or a duplicate): nothing to do.
            return
        op = ops.popleft()
        mid = receipt.message_id
        ledger, entry = mid.ledgerId, mid.entryId
        count = len(op.records)
        sid = self.segment_id
        if ledger == _UINT64_MAX:
            # Deduplicated by the broker: stored by an earlier attempt, position unknown.
            ids = [MessageId.earliest()] * count
        elif self.options.batching:
            ids = [unchecked_message_id(sid, ledger, entry, i, count) for i in range(count)]
        else:
            ids = [unchecked_message_id(sid, ledger, entry, -1, 1)]
        for record, message_id in zip(op.records, ids, strict=True):
            succeed(record, message_id)
        self.owner.confirmed(op.records)
        if not ops:
            self._wake_idle()

    def _wake_idle(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_sent(self, within: float) -> None:
        """Flush, then wait (up to ``within`` s) until no sent entry awaits its receipt."""
        self.flush()
        if not self._ops:
            return
        waiter: asyncio.Future[None] = self.ctx.loop.create_future()
        self._idle_waiters.append(waiter)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await waiter

    def on_send_error(self, error: pb.CommandSendError) -> None:
        exc = error_for_code(error.error, error.message, context=self.route.topic)
        if isinstance(exc, TopicTerminatedError):
            self._segment_gone(exc)
            return
        if isinstance(exc, TransactionConflictError | NotAllowedError):
            op = next((o for o in self._ops if o.first_seq == error.sequence_id), None)
            if op is not None and op.records[0].txn is not None:
                # Refused for its transaction (ended, not added here...): that message fails.
                self._ops.remove(op)
                self.owner.failed(op.records, exc)
                if not self._ops:
                    self._wake_idle()
                return
        log.warning("send on %s failed (%s): re-creating the producer", self.route.topic, exc)
        self._reattach(close_on_broker=True)

    def on_closed_by_broker(self) -> None:
        log.info("broker closed producer %s on %s: reconnecting", self.name, self.route.topic)
        self._reattach(close_on_broker=False)

    def on_connection_lost(self) -> None:
        self._reattach(close_on_broker=False)

    def _reattach(self, *, close_on_broker: bool) -> None:
        conn, self.conn = self.conn, None
        was_ready, self.ready = self.ready, False
        if conn is not None:
            conn.unregister_producer(self.producer_id, self)
            if close_on_broker and was_ready and not conn.closed:
                with contextlib.suppress(Exception):
                    conn.send(commands.close_producer(self.producer_id, conn.new_request_id()))
        # Unsent batch records go back in front of later sends; they get new sequence ids.
        self._unsent = self._batch + self._unsent
        self._batch, self._parts, self._batch_bytes = [], [], 0
        self._bucket, self._hash_min, self._hash_max = None, 0xFFFF, 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.closed and not self.gone:
            self._spawn_attach()

    # -- giving up ----------------------------------------------------------------------------

    def take_unresolved(self, origin_hash: int = -1) -> list[PendingMessage]:
        """Every message not yet confirmed, in send order; the producer holds none after.

        Those already sent keep their sequence id for the re-route (``sent_seq``), and
        ``origin_hash`` (the first hash of this segment's range) as where they were sent: the
        segment may have stored them before it was sealed.
        """
        sent = [r for op in self._ops for r in op.records]
        for record in sent:
            record.sent_seq = record.seq
            record.origin_hash = origin_hash
        records = sent + self._batch + self._unsent + self._gated
        self._ops.clear()
        self._batch, self._parts, self._batch_bytes, self._unsent = [], [], 0, []
        self._gated, self._gate = [], None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake_idle()
        return records

    def _segment_gone(self, exc: BaseException) -> None:
        if self.gone:
            return
        self.gone = True
        self.ready = False
        self._detach()
        if not self._attached.done():
            self._attached.set_exception(exc)
            self._attached.exception()  # retrieved: the owner re-routes instead
        self.owner.segment_gone(self, exc)

    def _fatal(self, exc: BaseException) -> None:
        log.warning("producer on %s refused: %s", self.route.topic, exc)
        self.gone = True
        self._detach()
        if not self._attached.done():
            self._attached.set_exception(exc)
            self._attached.exception()
        self.owner.segment_refused(self, exc)

    def _detach(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.unregister_producer(self.producer_id, self)

    def expire(self, now: float, timeout: float) -> list[PendingMessage]:
        """Remove and return the messages older than ``timeout`` (oldest first)."""
        expired: list[PendingMessage] = []
        limit = now - timeout
        ops = self._ops
        while ops and ops[0].created <= limit:
            expired.extend(ops.popleft().records)
        if not ops:
            self._wake_idle()
        else:
            return expired
        if self._batch and self._batch[0].enqueued_at <= limit:
            # A batch is all-or-nothing on the wire; drop it whole.
            expired.extend(self._batch)
            self._batch, self._parts, self._batch_bytes = [], [], 0
            self._bucket, self._hash_min, self._hash_max = None, 0xFFFF, 0
        while self._unsent and self._unsent[0].enqueued_at <= limit:
            expired.append(self._unsent.pop(0))
        return expired

    @property
    def idle(self) -> bool:
        """Whether nothing is waiting for a receipt."""
        return not (self._ops or self._batch or self._unsent or self._gated)

    async def close(self) -> None:
        """Stop; tell the broker (best effort). Pending messages are the owner's to settle."""
        self.closed = True
        if not self._attached.done():
            self._attached.set_exception(
                AlreadyClosedError(f"producer on {self.route.topic} closed")
            )
            self._attached.exception()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn = self.conn
        self._detach()
        self.ready = False
        if conn is not None and not conn.closed:
            request_id = conn.new_request_id()
            with contextlib.suppress(Exception):
                await conn.request(
                    commands.close_producer(self.producer_id, request_id), request_id
                )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def generated_name() -> str:
    """A client-generated producer name base, for scalable topics without a user name."""
    return f"braid-{uuid.uuid4().hex[:12]}"


__all__ = ["SegmentProducer", "SegmentProducerOwner", "generated_name"]
