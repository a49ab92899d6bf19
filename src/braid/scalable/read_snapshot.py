"""A scalable topic's read snapshot: its segment DAG and where each active segment's stored data
ends, both of one layout epoch - what a reader that plans its own ranges asks for in one call.

``GET /admin/v2/scalable/{tenant}/{namespace}/{topic}/positions`` answers it (any broker: the
layout is read from the metadata store, each active segment's last entry from the broker serving
it through :meth:`~braid.scalable.segments.SegmentAdmin.last_confirmed`). The Spark connector's
driver plans every micro-batch from it (docs/spark.md, ADR 0072): one HTTP request instead of a
client that looks up, subscribes to and asks every segment.

Invariant: the positions and the DAG describe the same epoch. A split or merge seals segments;
taken across one, the snapshot would call a sealed segment active with the position it had then,
and leave out its children. So the order is the layout, then the positions, then the layout's
epoch again; when it moved, the snapshot is taken again (:data:`ATTEMPTS` times, then
:class:`~braid.broker.errors.ServiceNotReady`, retriable). A position is the one a reader
started at "latest" would start after: ``(ledger, entry)`` of the last stored entry, whole.

JSON::

    {"topic": "topic://public/default/orders", "epoch": 1, "segments": {
        "0": {"parentIds": [], "active": false, "lastConfirmed": null},
        "1": {"parentIds": [0], "active": true, "lastConfirmed": [12, 41]},
        "2": {"parentIds": [0], "active": true, "lastConfirmed": null}}}

``lastConfirmed`` is ``null`` for a sealed segment (read it to its end) and for an active one
with nothing stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from braid.broker.errors import ServiceNotReady
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.scalable.coordinator import segment_topic_name
from braid.scalable.resources import ScalableTopicResources
from braid.scalable.segments import SegmentAdmin

#: Snapshots taken before giving up on a DAG that keeps changing.
ATTEMPTS = 10


async def read_snapshot(
    resources: ScalableTopicResources,
    segments: SegmentAdmin,
    topic: TopicName,
    *,
    between: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """The read snapshot of ``topic`` as JSON (see the module docstring).

    ``between`` runs after each layout read and before the positions are fetched (tests force a
    split there).

    Raises:
        ScalableTopicNotFound: no such topic.
        ServiceNotReady: the DAG changed during each of :data:`ATTEMPTS` snapshots.
    """
    layout = (await resources.require_layout(topic)).layout
    for _ in range(ATTEMPTS):
        if between is not None:
            await between()
        positions = await _last_confirmed(segments, topic, layout)
        after = (await resources.require_layout(topic)).layout
        if after.epoch == layout.epoch:
            return _to_json(topic, layout, positions)
        layout = after
    raise ServiceNotReady(
        f"{topic}: the segment DAG changed during each of {ATTEMPTS} snapshots "
        f"(epoch now {layout.epoch}); retry"
    )


async def _last_confirmed(
    segments: SegmentAdmin, topic: TopicName, layout: SegmentLayout
) -> dict[int, tuple[int, int] | None]:
    active = [info for info in layout.segments.values() if info.is_active]
    found = await asyncio.gather(
        *(segments.last_confirmed(segment_topic_name(topic, info)) for info in active)
    )
    return {info.segment_id: last for info, last in zip(active, found, strict=True)}


def _to_json(
    topic: TopicName, layout: SegmentLayout, positions: dict[int, tuple[int, int] | None]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sid, info in sorted(layout.segments.items()):
        last = positions.get(sid) if info.is_active else None
        out[str(sid)] = {
            "parentIds": list(info.parent_ids),
            "active": info.is_active,
            "lastConfirmed": None if last is None else list(last),
        }
    return {"topic": str(topic), "epoch": layout.epoch, "segments": out}


__all__ = ["ATTEMPTS", "read_snapshot"]
