"""A topic's layout as a client sees it: the segment DAG plus where each segment is served.

A client drives every topic — ``topic://`` and ``persistent://`` alike — from a
:class:`TopicLayout` (ADR ``client-layout-driven``): the validated
:class:`~braid.core.layout.SegmentLayout` of the DAG, and for each segment a
:class:`SegmentRoute` naming the topic the client actually produces to and subscribes on:

* a managed segment's ``segment://tenant/ns/name/<descriptor>``
  (``docs/protocol.md#segment-topic-names``), or
* for a *legacy* segment (``legacy_topic_name`` set, the migration bridge of
  ``docs/protocol.md#feature-gating``) the wrapped ``persistent://`` topic itself.

:meth:`TopicLayout.synthetic` builds the single-segment (or N-partition) layout a client uses for a
``persistent://`` name when the broker does not speak the scalable-topic protocol; a broker that
does answers the same shape over the DAG watch. :class:`LayoutTracker` applies pushed layouts by
epoch monotonicity (``docs/protocol.md#the-segment-dag``: only a strictly newer epoch is applied).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicDomain, TopicName
from braid.core.segment_info import CorruptLayout

_PARTITION_SUFFIX = re.compile(r"-partition-(0|[1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class SegmentRoute:
    """How a client reaches one segment.

    Attributes:
        segment_id: the segment's id in the DAG.
        topic: the topic the client produces to and subscribes on for this segment.
        legacy: whether the segment wraps a classic ``persistent://`` topic.
        broker_url: the owning broker advertised in the layout, or ``None`` (then the client
            looks the segment topic up).
        entry_bucket_splits: PIP-486 bucket boundaries (start hashes of buckets 1..N-1).
    """

    segment_id: int
    topic: str
    legacy: bool = False
    broker_url: str | None = None
    entry_bucket_splits: tuple[int, ...] = ()


def partition_index(topic: str) -> int | None:
    """The ``N`` of a ``...-partition-N`` topic name, or ``None``."""
    match = _PARTITION_SUFFIX.search(topic)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class TopicLayout:
    """An immutable snapshot of one topic's DAG and segment routes.

    Attributes:
        topic: the canonical topic name (``resolved_topic_name`` from the broker, or the
            normalized ``persistent://`` name of a synthetic layout).
        dag: the validated segment DAG.
        routes: one :class:`SegmentRoute` per segment of ``dag``.
        controller_broker_url: the controller leader (for ordered consumers), if advertised.

    Raises:
        CorruptLayout: a segment has no route, a route names an unknown segment, or a segment
            topic name does not fit the topic.
    """

    topic: str
    dag: SegmentLayout
    routes: Mapping[int, SegmentRoute]
    controller_broker_url: str | None = None
    _active_ids: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _legacy_order: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        routes = dict(self.routes)
        missing = sorted(set(self.dag.segments) - set(routes))
        extra = sorted(set(routes) - set(self.dag.segments))
        if missing or extra:
            raise CorruptLayout(
                f"layout of {self.topic}: segments without a route {missing}, "
                f"routes without a segment {extra}"
            )
        for sid, route in routes.items():
            if route.segment_id != sid:
                raise CorruptLayout(f"route keyed {sid} names segment {route.segment_id}")
            if route.legacy and not route.topic.startswith("persistent://"):
                raise CorruptLayout(
                    f"legacy segment {sid} of {self.topic} wraps {route.topic!r}, "
                    "which is not a persistent:// topic"
                )
            if not route.legacy and not route.topic.startswith("segment://"):
                raise CorruptLayout(
                    f"segment {sid} of {self.topic} is neither legacy nor a segment:// topic"
                )
        object.__setattr__(self, "routes", MappingProxyType(routes))
        active = tuple(s.segment_id for s in self.dag.active_segments)
        object.__setattr__(self, "_active_ids", active)
        legacy: tuple[int, ...] = ()
        if active and all(routes[sid].legacy for sid in active):
            legacy = _legacy_order(active, routes)
        object.__setattr__(self, "_legacy_order", legacy)

    @property
    def epoch(self) -> int:
        """The DAG's epoch (monotonic layout version)."""
        return self.dag.epoch

    @property
    def active_ids(self) -> tuple[int, ...]:
        """Ids of the active segments, ordered by hash range start."""
        return self._active_ids

    @property
    def entry_buckets(self) -> bool:
        """Whether the layout advertises PIP-486 entry buckets (some managed segment lists a
        bucket boundary list): the observed broker support producers gate bucketing and
        stamping on (``docs/protocol.md#entry-buckets``)."""
        return any(r.entry_bucket_splits and not r.legacy for r in self.routes.values())

    @property
    def all_legacy(self) -> bool:
        """Whether every active segment wraps a classic topic (mod-N routing applies)."""
        return bool(self._legacy_order)

    @property
    def legacy_order(self) -> tuple[int, ...]:
        """For an all-legacy layout, the active segment ids in partition order (else empty)."""
        return self._legacy_order

    def route(self, segment_id: int) -> SegmentRoute:
        """The route of a segment of this layout.

        Raises:
            CorruptLayout: no such segment.
        """
        route = self.routes.get(segment_id)
        if route is None:
            raise CorruptLayout(f"segment {segment_id} is not in the layout of {self.topic}")
        return route

    def is_active(self, segment_id: int) -> bool:
        """Whether ``segment_id`` is an active segment of this layout."""
        info = self.dag.segments.get(segment_id)
        return info is not None and info.is_active

    @classmethod
    def synthetic(cls, topic: str | TopicName, partitions: int = 0, epoch: int = 0) -> TopicLayout:
        """The layout that wraps a classic topic (``docs/protocol.md#feature-gating``).

        ``partitions == 0`` (not partitioned) gives one legacy segment, id 0, over the whole ring,
        wrapping the topic itself; ``N > 0`` gives N legacy segments, ids ``0..N-1``, wrapping
        ``<topic>-partition-<i>``. Routing on it is v4's ``signSafeMod(murmur3, N)``.

        Raises:
            InvalidInputError: the name is not a ``persistent://`` name or ``partitions < 0``.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.domain is not TopicDomain.PERSISTENT:
            raise InvalidInputError(f"only a persistent:// topic has a synthetic layout: {name}")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidInputError(f"partitions must be a non-negative integer: {partitions!r}")
        count = max(partitions, 1)
        base = SegmentLayout.initial(count)
        dag = SegmentLayout(epoch, base.next_segment_id, base.segments)
        routes = {
            sid: SegmentRoute(
                sid,
                str(name) if partitions == 0 else f"{name}-partition-{sid}",
                legacy=True,
            )
            for sid in dag.segments
        }
        return cls(str(name), dag, routes)


def segment_topic_name(topic: str, dag: SegmentLayout, segment_id: int) -> str:
    """The ``segment://`` name of a managed segment of ``topic`` (a ``topic://`` name).

    Raises:
        CorruptLayout: ``topic`` is not a ``topic://`` name or the segment is unknown.
    """
    info = dag.segments.get(segment_id)
    if info is None:
        raise CorruptLayout(f"segment {segment_id} is not in the layout of {topic}")
    try:
        parent = TopicName.parse(topic)
        return str(SegmentTopicName.of(parent, info.hash_range, segment_id))
    except InvalidInputError as exc:
        raise CorruptLayout(
            f"segment {segment_id} of {topic} has no segment:// name: {exc}"
        ) from exc


def _legacy_order(active: tuple[int, ...], routes: Mapping[int, SegmentRoute]) -> tuple[int, ...]:
    """Active legacy segments in v4 partition order: by partition suffix, else ring order."""
    indexes = {sid: partition_index(routes[sid].topic) for sid in active}
    if all(i is not None for i in indexes.values()) and len(set(indexes.values())) == len(active):
        return tuple(sorted(active, key=lambda sid: indexes[sid] or 0))
    return active


class LayoutTracker:
    """The latest applied layout of one topic; pushes apply only with a strictly newer epoch, or
    the same epoch and DAG placed differently."""

    def __init__(self, initial: TopicLayout | None = None) -> None:
        self._current = initial

    @property
    def current(self) -> TopicLayout | None:
        """The last applied layout (``None`` before the first)."""
        return self._current

    def offer(self, layout: TopicLayout) -> bool:
        """Apply ``layout`` if it is the first or its epoch is greater, or if it has the current
        epoch and DAG with another placement (a segment owner or the controller leader moved);
        return whether it was.

        Raises:
            InvalidInputError: ``layout`` is for another topic than the tracked one.
        """
        current = self._current
        if current is not None:
            if layout.topic != current.topic:
                raise InvalidInputError(
                    f"layout for {layout.topic} offered to the tracker of {current.topic}"
                )
            if layout.epoch < current.epoch:
                return False
            if layout.epoch == current.epoch and (layout.dag != current.dag or layout == current):
                return False
        self._current = layout
        return True


__all__ = [
    "LayoutTracker",
    "SegmentRoute",
    "TopicLayout",
    "partition_index",
    "segment_topic_name",
]
