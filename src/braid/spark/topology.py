"""The driver's view of a topic: its segment DAG and the newest position of each segment.

:class:`Topology` builds :class:`~braid.spark.planning.TopicSnapshot` values with the public
client and admin APIs only:

* the DAG of a ``topic://`` topic from the admin API (``scalable_topics.get``, validated by
  :func:`~braid.core.layout_codec.layout_from_metadata`);
* the newest stored position of every active segment from a checkpoint consumer started at
  ``Checkpoint.latest()``, which pins each active segment's reader to its last message when it
  is created, and whose ``checkpoint()`` reports those positions (whole entries) without reading
  anything;
* a ``persistent://`` topic is a layout of legacy segments with no DAG: its segments are the
  ones the checkpoint reports plus those already recorded in the query's offsets (a classic
  topic never loses a segment).

Fetch order matters, and the two must agree: the DAG, then positions, then the DAG's epoch again.
A split or merge in between would seal a segment the snapshot calls active and leave out its
children: the checkpoint reports the sealed segment ``DRAINED`` (no position), so the snapshot
would say it holds nothing - a ``Trigger.AvailableNow`` target or a batch query's end would then
stop short of its data. When the epoch moved, the snapshot is taken again
(:data:`SNAPSHOT_ATTEMPTS` times, then :class:`TopologyChanging`, retriable).
"""

from __future__ import annotations

from collections.abc import Iterable

from braid.admin.client import AdminClient
from braid.client import Client
from braid.core.checkpoint import Checkpoint, CursorKind, checkpoint_cursors
from braid.core.errors import ServiceUnavailableError
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import TopicDomain, TopicName
from braid.spark.offsets import Position
from braid.spark.planning import SegmentView, TopicSnapshot

#: Snapshots of a scalable topic taken before giving up on a DAG that keeps changing.
SNAPSHOT_ATTEMPTS = 10


class TopologyChanging(ServiceUnavailableError):
    """The topic's DAG changed while every snapshot of it was taken (retriable)."""


def is_scalable(topic: str) -> bool:
    """Whether ``topic`` (a canonical name) is a ``topic://`` topic."""
    return TopicName.parse(topic).domain is TopicDomain.TOPIC


class Topology:
    """Snapshots of topics through one client and one admin client (driver side)."""

    def __init__(self, client: Client, admin: AdminClient) -> None:
        self._client = client
        self._admin = admin

    def layout(self, topic: str) -> SegmentLayout:
        """The segment DAG of a ``topic://`` topic (raises ``NotFoundError`` if it is gone)."""
        return layout_from_metadata(self._admin.scalable_topics.get(topic))

    def latest_positions(self, topic: str) -> dict[int, Position]:
        """The newest stored position of every active segment with data."""
        with self._client.create_checkpoint_consumer(
            topic, start=Checkpoint.latest(), receiver_queue_size=1
        ) as reader:
            cursors = checkpoint_cursors(reader.checkpoint()) or {}
        return {
            sid: (c.ledger_id, c.entry_id, c.batch_index)
            for sid, c in cursors.items()
            if c.kind is CursorKind.AFTER
        }

    def snapshot(self, topic: str, known: Iterable[int] = ()) -> TopicSnapshot:
        """The topic's DAG and newest positions now (``known``: segment ids already recorded)."""
        if is_scalable(topic):
            layout, latest = self._consistent_positions(topic)
            views = {
                sid: SegmentView(sid, tuple(info.parent_ids), not info.is_active)
                for sid, info in layout.segments.items()
            }
            positions = {
                sid: p for sid, p in latest.items() if sid in views and not views[sid].sealed
            }
            return TopicSnapshot(topic, layout.epoch, views, positions)
        latest = self.latest_positions(topic)
        ids = set(latest) | set(known) or {0}
        return TopicSnapshot(topic, 0, {sid: SegmentView(sid) for sid in ids}, latest)

    def _consistent_positions(self, topic: str) -> tuple[SegmentLayout, dict[int, Position]]:
        """The DAG and the newest positions, taken while the DAG's epoch did not move."""
        layout = self.layout(topic)
        for _ in range(SNAPSHOT_ATTEMPTS):
            latest = self.latest_positions(topic)
            after = self.layout(topic)
            if after.epoch == layout.epoch:
                return layout, latest
            layout = after
        raise TopologyChanging(
            f"{topic}: the segment DAG changed during each of {SNAPSHOT_ATTEMPTS} snapshots "
            f"(epoch now {layout.epoch}); retry"
        )


__all__ = ["SNAPSHOT_ATTEMPTS", "Topology", "TopologyChanging", "is_scalable"]
