"""The ``braid`` data source: batch reads, micro-batch streaming reads, and the sink's entry points.

Register once per session, then use the format name ``braid``::

    import braid.spark
    spark.dataSource.register(braid.spark.BraidDataSource)
    df = (spark.readStream.format("braid")
          .option("service.url", "pulsar://127.0.0.1:6650")
          .option("topic", "topic://public/default/orders").load())

Driver side, :class:`BraidStreamReader` plans micro-batches: ``initialOffset`` resolves
``startingPosition``; ``latestOffset(start, limit)`` takes a :class:`~braid.spark.topology.Topology`
snapshot and applies :func:`~braid.spark.planning.plan_next` (parent before child, the
``Trigger.AvailableNow`` target, data loss), then admission control (``maxRecordsPerTrigger``);
``partitions(start, end)`` is :func:`~braid.spark.planning.plan_ranges`, a function of the two
offsets only. Executors read each range with
:class:`~braid.spark.segment_reader.SegmentRangeReader`. No broker cursor is used: the position
lives in Spark's checkpoint, so ``commit`` has nothing to do.

Admission control needs message counts that offsets cannot give (positions are not dense), so with
a ``ReadMaxRows`` limit the driver reads the candidate ranges once to find where the budget ends
(shared fairly among the segments with data); the batch's executors then read exactly those
ranges. That read is the price of a hard cap (docs/spark.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from braid.core.errors import NotFoundError
from braid.spark.errors import BraidDataLossError
from braid.spark.offsets import (
    BEGINNING,
    DRAINED,
    SegmentProgress,
    SourceOffset,
    TopicProgress,
)
from braid.spark.options import (
    BraidSparkOptionError,
    Position,
    SourceOptions,
    StartKind,
    source_options,
)
from braid.spark.planning import (
    SegmentRange,
    TopicSnapshot,
    budget_rounds,
    plan_next,
    plan_ranges,
    reached,
)
from braid.spark.schema import SCHEMA
from braid.spark.topology import Topology, is_scalable

if TYPE_CHECKING:
    import pyarrow as pa

    from braid.client import Client

log = logging.getLogger(__name__)

#: Messages per Arrow batch a partition yields.
ROWS_PER_BATCH = 4096


class BraidPartition(InputPartition):
    """One segment range of a batch (picklable; read on an executor)."""

    def __init__(self, rng: SegmentRange) -> None:
        super().__init__(rng)
        self.range = rng


class _Driver:
    """The driver's topology reader, created on first use (never pickled). The client (and with
    it the client library) is imported only when something needs it - a classic topic, a
    ``maxRecordsPerTrigger`` budget: planning a ``topic://`` topic reads the admin API only
    (Spark starts a new planning process per query, ADR 0072)."""

    def __init__(self, options: SourceOptions) -> None:
        self._service_url = options.service_url
        self.topology = Topology(options.admin_url, self.client)

    def client(self) -> Client:
        from braid.spark.clients import shared_client

        return shared_client(self._service_url)

    def close(self) -> None:
        """Nothing to release: the shared client is closed when the process exits."""


def _segment_exists_via(admin_url: str) -> Any:
    def segment_exists(topic: str, segment_id: int) -> bool:
        from braid.spark.clients import admin_client

        if not is_scalable(topic):
            return True
        with admin_client(admin_url) as admin:
            try:
                doc = admin.scalable_topics.get(topic)
            except NotFoundError:
                return False
        return str(segment_id) in doc.get("segments", {})

    return segment_exists


def read_range(options: SourceOptions, rng: SegmentRange) -> Iterator[pa.RecordBatch]:
    """The rows of one range as Arrow batches (executor side)."""
    # Imported here: Spark starts a fresh Python process to plan every streaming query on the
    # driver, and planning needs no Arrow (docs/benchmarks.md, the Spark section).
    from braid.spark.clients import shared_client
    from braid.spark.rows import to_record_batch
    from braid.spark.segment_reader import SegmentRangeReader

    client = shared_client(options.service_url)
    exists = _segment_exists_via(options.admin_url) if is_scalable(rng.topic) else None
    with SegmentRangeReader(
        client,
        rng,
        fail_on_data_loss=options.fail_on_data_loss,
        segment_exists=exists,
        receiver_queue_size=options.receiver_queue_size,
        receiver_queue_bytes=options.receiver_queue_bytes,
    ) as reader:
        while True:
            cols = reader.next_columns(ROWS_PER_BATCH)
            if not len(cols):
                return
            batch = to_record_batch(cols, options.min_publish_time_ms)
            if batch.num_rows:
                yield batch


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise BraidSparkOptionError(
            "the braid source has a fixed schema (key, value, topic, message_id, publish_time, "
            f"event_time, properties, producer_name, sequence_id); do not pass .schema(...): "
            f"got {schema.simpleString()}"
        )


class _ReaderBase:
    """Offset resolution shared by the batch and the streaming reader."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._driver: _Driver | None = None

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self.options)
        return self._driver

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver"] = None  # clients stay on the driver; executors use their own
        for driver_only in ("_target", "_initial", "_fresh"):  # planning state
            state.pop(driver_only, None)
        return state

    def snapshot(self, topic: str, known: TopicProgress | None = None) -> TopicSnapshot:
        return self.driver.topology.snapshot(topic, () if known is None else known.segments)

    def resolve(self, position: Position) -> SourceOffset:
        """A ``startingPosition``/``endingPosition`` as a concrete offset."""
        topics: dict[str, TopicProgress] = {}
        for topic in self.options.topics:
            if position.kind is StartKind.OFFSET:
                assert position.offset is not None
                if topic in position.offset.topics:
                    topics[topic] = position.offset.topics[topic]
                    continue
            snap = self.snapshot(topic)
            if position.kind is StartKind.LATEST:
                topics[topic] = snap.everything()
            elif position.kind is StartKind.CHECKPOINT:
                from braid.core.checkpoint import CursorKind, checkpoint_cursors

                checkpoint = position.checkpoint
                assert checkpoint is not None
                cursors = checkpoint_cursors(checkpoint) or {}
                progress: dict[int, SegmentProgress] = {}
                for sid in sorted(set(snap.segments) | set(cursors)):
                    cursor = cursors.get(sid)
                    if cursor is None:
                        progress[sid] = BEGINNING
                    elif cursor.kind is CursorKind.DRAINED:
                        progress[sid] = DRAINED
                    elif cursor.kind is CursorKind.LATEST:
                        progress[sid] = snap.newest(sid) if sid in snap.segments else DRAINED
                    else:
                        progress[sid] = SegmentProgress(
                            (cursor.ledger_id, cursor.entry_id, cursor.batch_index)
                        )
                topics[topic] = TopicProgress(snap.epoch, progress)
            else:  # earliest, a timestamp (rows before it are filtered while reading), or an
                # offset document that does not name this topic
                topics[topic] = TopicProgress(snap.epoch, dict.fromkeys(snap.segments, BEGINNING))
        return SourceOffset(topics)

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


class BraidBatchReader(_ReaderBase, DataSourceReader):
    """``spark.read.format("braid")``: the messages between two positions."""

    def partitions(self) -> list[InputPartition]:
        start = self.resolve(self.options.starting)
        ending = self.options.ending or Position(StartKind.LATEST)
        end = self.resolve(ending)
        parts: list[InputPartition] = [BraidPartition(r) for r in plan_ranges(start, end)]
        self.close()
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BraidPartition)
        yield from read_range(self.options, partition.range)


class BraidStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("braid")``: micro-batches in parent-before-child order."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: SourceOffset | None = None
        self._initial: SourceOffset | None = None
        # Snapshots taken since the last latestOffset (driver only): Spark calls
        # prepareForTriggerAvailableNow, initialOffset and latestOffset back to back when a
        # query starts, and one snapshot serves all three (each costs broker round trips).
        self._fresh: dict[str, TopicSnapshot] = {}

    def snapshot(self, topic: str, known: TopicProgress | None = None) -> TopicSnapshot:
        """A snapshot of ``topic``: the one taken earlier in this trigger if there is one (a
        slightly older view is still a view: planning from it is as correct as from a new
        one), else a new one."""
        snap = self._fresh.get(topic)
        if snap is not None and (
            known is None or is_scalable(topic) or set(known.segments) <= set(snap.segments)
        ):
            return snap
        snap = super().snapshot(topic, known)
        self._fresh[topic] = snap
        return snap

    def initialOffset(self) -> dict[str, Any]:
        # Resolved once per query run: Spark asks again when it plans the first batch's
        # partitions, and that answer must be the start the first latestOffset planned from.
        if self._initial is None:
            self._initial = self.resolve(self.options.starting)
        return self._initial.to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_records_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = SourceOffset({t: self.snapshot(t).everything() for t in self.options.topics})
        log.info("Trigger.AvailableNow: reading up to %s", self._target.dumps())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        try:
            begin = SourceOffset.from_json(start)
            if self._target is not None and reached(begin, self._target):
                # Trigger.AvailableNow read everything up to its target: no batch can read more
                # (planning caps every segment at the target), so no snapshot is needed to say
                # "no new data" - the query's last call, and now free of broker round trips.
                return begin.to_json()
            return self._latest(begin, limit).to_json()
        finally:
            self._fresh.clear()  # the next trigger looks again

    def _latest(self, begin: SourceOffset, limit: ReadLimit) -> SourceOffset:
        topics: dict[str, TopicProgress] = {}
        for topic in self.options.topics:
            before = begin.topic(topic)
            target = None if self._target is None else self._target.topic(topic)
            plan = plan_next(
                before,
                self.snapshot(topic, before),
                target,
                skip_lost=not self.options.fail_on_data_loss,
            )
            if plan.lost:
                message = (
                    f"data loss in {topic}: segments {list(plan.lost)} were deleted (retention) "
                    "before the query read them to their end"
                )
                if self.options.fail_on_data_loss:
                    raise BraidDataLossError(
                        message + " (set failOnDataLoss=false to skip lost data and continue)"
                    )
                log.warning("%s; continuing after the gap (failOnDataLoss=false)", message)
            topics[topic] = plan.end
        end = SourceOffset(topics)
        if isinstance(limit, ReadMaxRows):
            end = self._admit(begin, end, limit.max_rows)
        return end

    def _admit(self, start: SourceOffset, end: SourceOffset, budget: int) -> SourceOffset:
        """Cap ``(start, end]`` at ``budget`` messages, shared among its ranges."""
        from braid.spark.segment_reader import SegmentRangeReader

        ranges = plan_ranges(start, end)
        if not ranges:
            return end
        client = self.driver.client()
        capped: dict[tuple[str, int], SegmentProgress] = {}
        readers = [
            SegmentRangeReader(
                client,
                r,
                fail_on_data_loss=self.options.fail_on_data_loss,
                receiver_queue_size=self.options.receiver_queue_size,
                receiver_queue_bytes=self.options.receiver_queue_bytes,
            )
            for r in ranges
        ]
        try:
            remaining = budget
            open_readers = list(readers)
            while remaining > 0 and open_readers:
                share = budget_rounds(remaining, open_readers)
                for reader in list(open_readers):
                    took = len(reader.next_columns(min(share, remaining)))
                    remaining -= took
                    if reader.done or took == 0:
                        open_readers.remove(reader)
                    if remaining <= 0:
                        break
            for reader in readers:
                rng = reader.range
                if reader.done:
                    stop = rng.end
                elif reader.last_position is not None:
                    stop = SegmentProgress(reader.last_position)
                else:
                    stop = rng.start
                capped[(rng.topic, rng.segment_id)] = stop
        finally:
            for reader in readers:
                reader.close()
        topics: dict[str, TopicProgress] = {}
        for topic, progress in end.topics.items():
            segments = dict(progress.segments)
            for (t, sid), stop in capped.items():
                if t == topic:
                    segments[sid] = stop
            topics[topic] = TopicProgress(progress.epoch, segments)
        return SourceOffset(topics)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        ranges = plan_ranges(SourceOffset.from_json(start), SourceOffset.from_json(end))
        return [BraidPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BraidPartition)
        yield from read_range(self.options, partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not in a broker cursor."""

    def stop(self) -> None:
        self.close()


def source_schema(options: Mapping[str, str]) -> StructType:
    """The read schema; checks the options first (``load()`` calls this through
    :class:`~braid.spark.data_source.BraidDataSource`, so a mistake fails there; stream- or
    batch-only options are checked when Spark asks for that reader)."""
    source_options(options, streaming=None)
    return SCHEMA


def batch_reader(options: Mapping[str, str], schema: StructType) -> BraidBatchReader:
    _check_schema(schema)
    return BraidBatchReader(source_options(options, streaming=False))


def stream_reader(options: Mapping[str, str], schema: StructType) -> BraidStreamReader:
    _check_schema(schema)
    return BraidStreamReader(source_options(options, streaming=True))


__all__ = [
    "BraidBatchReader",
    "BraidPartition",
    "BraidStreamReader",
    "batch_reader",
    "source_schema",
    "stream_reader",
]
