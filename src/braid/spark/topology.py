"""The driver's view of a topic: its segment DAG and the newest position of each segment.

:class:`Topology` builds :class:`~braid.spark.planning.TopicSnapshot` values:

* a ``topic://`` topic: one admin REST read, ``GET /admin/v2/scalable/.../positions``
  (:mod:`braid.scalable.read_snapshot`): the DAG and the last stored entry of every active
  segment, of one layout epoch (the broker takes it again when a split or merge lands in
  between). Over ``http.client`` (:mod:`braid.spark.admin_reads`): the planning process imports
  neither the client, its protocol nor ``httpx`` (ADR 0072);
* a ``persistent://`` topic is a layout of legacy segments with no DAG: the newest position
  from a checkpoint consumer started at ``Checkpoint.latest()`` (which pins each segment's
  reader to its last message when it is created, and whose ``checkpoint()`` reports those
  positions without reading anything); its segments are the ones the checkpoint reports plus
  those already recorded in the query's offsets (a classic topic never loses a segment).

A position is a whole entry, ``(ledger, entry, WHOLE_ENTRY)``: where a reader started at "latest"
starts after, the same in both paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from braid.core.names import TopicDomain, TopicName
from braid.spark.admin_reads import AdminReadError, get_json, scalable_path
from braid.spark.offsets import WHOLE_ENTRY, InvalidOffset, Position, check_position
from braid.spark.planning import SegmentView, TopicSnapshot

if TYPE_CHECKING:
    from braid.client import Client


def is_scalable(topic: str) -> bool:
    """Whether ``topic`` (a canonical name) is a ``topic://`` topic."""
    return TopicName.parse(topic).domain is TopicDomain.TOPIC


class Topology:
    """Snapshots of topics: ``topic://`` ones from the admin API at ``admin_url``, classic ones
    through the client ``client()`` returns (created on first use: only a classic topic needs
    it)."""

    def __init__(self, admin_url: str, client: Callable[[], Client]) -> None:
        self._admin_url = admin_url
        self._client = client

    def read_snapshot(self, topic: str) -> dict[str, Any]:
        """The broker's read snapshot of a ``topic://`` topic (``NotFoundError`` if it is gone)."""
        doc: dict[str, Any] = get_json(self._admin_url, scalable_path(topic) + "/positions")
        return doc

    def latest_positions(self, topic: str) -> dict[int, Position]:
        """The newest stored position of every segment with data, from a checkpoint consumer."""
        from braid.core.checkpoint import Checkpoint, CursorKind, checkpoint_cursors

        with self._client().create_checkpoint_consumer(
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
            return snapshot_from_json(topic, self.read_snapshot(topic))
        latest = self.latest_positions(topic)
        ids = set(latest) | set(known) or {0}
        return TopicSnapshot(topic, 0, {sid: SegmentView(sid) for sid in ids}, latest)


def snapshot_from_json(topic: str, doc: Mapping[str, Any]) -> TopicSnapshot:
    """A :class:`TopicSnapshot` from the ``positions`` answer (checked strictly).

    Raises:
        AdminReadError: the answer does not have the documented shape.
    """
    try:
        epoch = doc["epoch"]
        segments = doc["segments"]
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not isinstance(segments, dict):
            raise TypeError("epoch must be an integer and segments an object")
        views: dict[int, SegmentView] = {}
        latest: dict[int, Position] = {}
        for key, entry in segments.items():
            sid = int(key)
            parents = tuple(int(p) for p in entry["parentIds"])
            active = entry["active"]
            if not isinstance(active, bool):
                raise TypeError(f"segment {key}: active must be true or false")
            views[sid] = SegmentView(sid, parents, not active)
            last = entry.get("lastConfirmed")
            if active and last is not None:
                ledger, entry_id = last
                latest[sid] = check_position([ledger, entry_id, WHOLE_ENTRY], f"segment {key}")
        return TopicSnapshot(topic, epoch, views, latest)
    except (KeyError, TypeError, ValueError, InvalidOffset) as exc:
        raise AdminReadError(f"{topic}: unexpected positions answer ({exc!r})") from exc


__all__ = ["Topology", "is_scalable", "snapshot_from_json"]
