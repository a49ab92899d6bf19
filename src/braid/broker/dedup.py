"""Broker-side message deduplication by (producer name, sequence id), as Pulsar does it.

A producer numbers its messages; after a reconnect the client resends everything not yet receipted.
When deduplication is on, a message whose sequence id is not above the highest one already seen for
that producer name is a duplicate: it gets a receipt (with ledger/entry ``-1:-1``, as Pulsar) and is
not written again. Two watermarks per producer name:

* *pushed* - highest sequence id handed to the managed ledger (possibly not yet durable);
* *persisted* - highest sequence id whose entry is durable.

A resend between the two (its first copy still in flight) cannot be answered yet: Pulsar calls this
"unknown" and closes the producer so the client resends later; Braid does the same.

The persisted map survives restarts as the properties of a dedicated cursor (``pulsar.dedup``,
like Pulsar's) whose mark-delete position is the entry the snapshot covers; on load the entries
after that position are replayed (their metadata carries producer name and sequence ids) to
rebuild the map.

A segment of a scalable topic also holds what it *inherited* from the segments a split or merge
sealed (:mod:`braid.core.inherited_sequence_ids`): a resend of a message an ancestor stored is a
duplicate here too (PIP-460 "exactly-once across splits", ADR 0055). The inherited state is
written to the same cursor's properties (under ``braid.inherited.``) before the segment is
published, so it survives restarts and is never written again except by a repeated carry, which
merges (maximum) and therefore changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import enum
import logging
from collections.abc import Mapping

from braid.broker.entries import parse_metadata
from braid.core.hashing import hash16
from braid.core.inherited_sequence_ids import (
    PROPERTY_PREFIX,
    InheritedSequenceIds,
    SegmentSequenceIds,
    base_name,
)
from braid.ledger.api import LATEST, ManagedCursor, ManagedLedger, Position
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: Name of the cursor holding the dedup snapshot (Pulsar's name; hidden from subscription lists).
DEDUP_CURSOR_NAME = "pulsar.dedup"
#: Take a snapshot after this many persisted entries (bounds replay work after a crash).
SNAPSHOT_INTERVAL_ENTRIES = 1000
_REPLAY_BATCH = 500


class DupStatus(enum.Enum):
    """Outcome of :meth:`MessageDeduplication.check`."""

    NOT_DUP = "not_dup"
    DUP = "dup"
    UNKNOWN = "unknown"


class MessageDeduplication:
    """Sequence-id watermarks per producer name for one topic, snapshotted into a cursor."""

    def __init__(self, ledger: ManagedLedger, cursor: ManagedCursor) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self._pushed: dict[str, int] = {}
        self._persisted: dict[str, int] = {}
        self._last_position: Position | None = None
        self._since_snapshot = 0
        self._snapshot_task: asyncio.Task[None] | None = None
        self._snapshot_again = False
        self._inherited = InheritedSequenceIds()
        #: Highest inherited sequence id per producer name (a lookup per publish on a child).
        self._inherited_highest: dict[str, int] = {}

    @classmethod
    async def load(cls, ledger: ManagedLedger) -> MessageDeduplication:
        """Open (or create) the dedup cursor and rebuild the watermarks from snapshot + replay."""
        cursor = await ledger.open_cursor(DEDUP_CURSOR_NAME, LATEST)
        dedup = cls(ledger, cursor)
        dedup._inherited = InheritedSequenceIds.from_properties(cursor.properties)
        dedup._persisted.update(
            (k, v) for k, v in cursor.properties.items() if not k.startswith(PROPERTY_PREFIX)
        )
        while True:
            entries = await cursor.read_entries(_REPLAY_BATCH)
            if not entries:
                break
            for entry in entries:
                dedup._replay(entry.data)
                dedup._last_position = entry.position
        dedup._pushed.update(dedup._persisted)
        if dedup._last_position is not None:
            await dedup.snapshot()
        return dedup

    def _replay(self, data: bytes) -> None:
        try:
            meta = parse_metadata(data)
        except Exception:  # a corrupt entry must not stop the topic from loading
            log.warning("dedup replay: skipping an entry whose metadata does not parse")
            return
        if not meta.producer_name:
            return
        highest = meta.sequence_id
        if meta.HasField("num_messages_in_batch"):
            highest += max(meta.num_messages_in_batch - 1, 0)
        if meta.HasField("highest_sequence_id"):
            highest = max(highest, meta.highest_sequence_id)
        if highest > self._persisted.get(meta.producer_name, -1):
            self._persisted[meta.producer_name] = highest

    def last_sequence_id(self, producer_name: str) -> int:
        """Highest persisted sequence id of ``producer_name`` (``-1`` when none), counting what
        the segment inherited for the producer's base name (where a restarted producer must
        continue from)."""
        own = self._persisted.get(producer_name, -1)
        if not self._inherited:
            return own
        return max(own, self._highest_inherited(producer_name))

    @property
    def persisted(self) -> Mapping[str, int]:
        return self._persisted

    @property
    def inherited(self) -> InheritedSequenceIds:
        return self._inherited

    def check(
        self,
        producer_name: str,
        sequence_id: int,
        highest_sequence_id: int,
        data: bytes | None = None,
        metadata: pb.MessageMetadata | None = None,
    ) -> DupStatus:
        """Classify a publish; a ``NOT_DUP`` publish raises the pushed watermark.

        ``data``/``metadata`` (the entry, its parsed metadata if at hand) are read only when the
        segment inherited state and the sequence id falls under it: a resend's key decides which
        ancestor's floor applies.
        """
        if sequence_id <= self._pushed.get(producer_name, -1):
            if sequence_id <= self._persisted.get(producer_name, -1):
                return DupStatus.DUP
            return DupStatus.UNKNOWN
        if self._inherited and self._stored_by_ancestor(producer_name, sequence_id, data, metadata):
            return DupStatus.DUP
        self._pushed[producer_name] = max(sequence_id, highest_sequence_id)
        return DupStatus.NOT_DUP

    def is_duplicate(
        self,
        producer_name: str,
        sequence_id: int,
        data: bytes | None = None,
        metadata: pb.MessageMetadata | None = None,
    ) -> bool:
        """Whether a publish is known stored (here or by an ancestor); changes nothing."""
        if sequence_id <= self._persisted.get(producer_name, -1):
            return True
        return bool(self._inherited) and self._stored_by_ancestor(
            producer_name, sequence_id, data, metadata
        )

    def _stored_by_ancestor(
        self,
        producer_name: str,
        sequence_id: int,
        data: bytes | None,
        metadata: pb.MessageMetadata | None,
    ) -> bool:
        if sequence_id > self._highest_inherited(producer_name):
            return False
        return sequence_id <= self._inherited.floor(
            base_name(producer_name), _key_hash(data, metadata)
        )

    def _highest_inherited(self, producer_name: str) -> int:
        highest = self._inherited_highest.get(producer_name)
        if highest is None:
            highest = self._inherited.highest(base_name(producer_name))
            self._inherited_highest[producer_name] = highest
        return highest

    async def inherit(self, state: InheritedSequenceIds) -> None:
        """Add what a split or merge carried over, durably (idempotent: a repeat adds nothing)."""
        merged = self._inherited.merged(state)
        if merged == self._inherited:
            return
        self._inherited = merged
        self._inherited_highest.clear()
        position = self._cursor.mark_delete_position
        if self._last_position is not None and self._last_position > position:
            position = self._last_position
        await self._cursor.mark_delete(position, self._properties())

    def export(self) -> SegmentSequenceIds:
        """The state a sealed segment hands its children."""
        return SegmentSequenceIds(dict(self._persisted), self._inherited)

    def _properties(self) -> dict[str, int]:
        properties = dict(self._persisted)
        properties.update(self._inherited.to_properties())
        return properties

    def on_persisted(
        self, producer_name: str, highest_sequence_id: int, position: Position
    ) -> None:
        """Record a durable publish and snapshot every :data:`SNAPSHOT_INTERVAL_ENTRIES`."""
        if highest_sequence_id > self._persisted.get(producer_name, -1):
            self._persisted[producer_name] = highest_sequence_id
        if self._last_position is None or position > self._last_position:
            self._last_position = position
        self._since_snapshot += 1
        if self._since_snapshot >= SNAPSHOT_INTERVAL_ENTRIES:
            self._since_snapshot = 0
            self._schedule_snapshot()

    def on_failed(self, producer_name: str) -> None:
        """A publish failed: forget what was pushed but not persisted (the client will resend)."""
        self._pushed[producer_name] = self._persisted.get(producer_name, -1)

    def _schedule_snapshot(self) -> None:
        if self._snapshot_task is not None and not self._snapshot_task.done():
            self._snapshot_again = True
            return
        self._snapshot_task = asyncio.ensure_future(self._snapshot_loop())

    async def _snapshot_loop(self) -> None:
        while True:
            self._snapshot_again = False
            try:
                await self.snapshot()
            except Exception:
                log.exception("dedup snapshot of %s failed", self._ledger.name)
                return
            if not self._snapshot_again:
                return

    async def snapshot(self) -> None:
        """Persist the persisted map as the dedup cursor's mark-delete properties."""
        position = self._last_position
        if position is None or position < self._cursor.mark_delete_position:
            return
        properties = self._properties()
        if position == self._cursor.mark_delete_position and properties == dict(
            self._cursor.properties
        ):
            return
        await self._cursor.mark_delete(position, properties)

    async def close(self) -> None:
        """Wait for a running snapshot and take a final one."""
        if self._snapshot_task is not None:
            await asyncio.gather(self._snapshot_task, return_exceptions=True)
        await self.snapshot()


def _key_hash(data: bytes | None, metadata: pb.MessageMetadata | None) -> int | None:
    """The ``hash16`` of a single-message entry's key; ``None`` for a batch or a keyless one."""
    if metadata is None:
        if data is None:
            return None
        try:
            metadata = parse_metadata(data)
        except Exception:
            return None
    if metadata.HasField("num_messages_in_batch") or not metadata.HasField("partition_key"):
        return None
    key = metadata.partition_key
    if metadata.partition_key_b64_encoded:
        try:
            return hash16(base64.b64decode(key, validate=True))
        except (binascii.Error, ValueError):
            return None
    return hash16(key)
