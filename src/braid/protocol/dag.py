"""The ``ScalableTopicDAG`` wire message (``docs/protocol.md#the-segment-dag``) as one validated
model, and its codec: the only code that writes the protobuf a broker pushes in
``CommandScalableTopicUpdate`` and the only code that reads it back. The broker
(:mod:`braid.scalable.dag_watch`) and the client (:mod:`braid.client.dag`) both go through it, so
they cannot drift apart.

:class:`ScalableTopicDag` mirrors the message: the epoch, one :class:`DagSegment` per
``SegmentInfoProto`` (a :class:`~braid.core.segment_info.SegmentInfo` plus the wire-only
``legacy_topic_name`` and PIP-486 ``entry_bucket_splits``), one :class:`SegmentBroker` per
``SegmentBrokerAddress`` and the controller leader's URLs. It is frozen and checked on
construction, whichever way it was built:

* the segments form a valid :class:`~braid.core.layout.SegmentLayout` (tiling, edges, epochs; the
  layout's ``nextSegmentId`` is one above the largest id, since the wire does not carry it), each
  id listed once;
* a segment's ``entry_bucket_splits`` ascend strictly within ``1..0xFFFF`` (the start hashes of
  buckets ``1..N-1``; bucket 0 starts at 0);
* a broker entry names a segment of the DAG, at most one entry per segment;
* a URL or legacy name is either absent or a non-empty string.

A violation raises :class:`~braid.core.segment_info.CorruptLayout`, on decode as on construction:
a broker that sends a broken DAG is refused before anything routes on it.

Decisions where the two codecs this one replaces differed (PIP-468's and PIP-486's message is the
reference):

* ``entry_bucket_splits`` (field 12): the model carries it both ways; Braid's broker advertises
  every segment's list when the topic has more than one entry bucket per segment (ADR 0055).
* ``broker_url_tls`` and ``controller_broker_url_tls``: the message has them (fields 3 and 5),
  neither codec read or wrote them. The model carries them.
* ``segment_brokers``: the broker listed the brokers of its active segments, the client every
  route with a broker. The model lists what it is given, in segment-id order (segments too).
* An empty string on the wire (a broker URL, the controller URL, ``legacy_topic_name``) reads as
  absent, as the client read it; the model never holds one, so encoding a decoded DAG gives the
  canonical message.
* ``sealed_at_epoch`` / ``sealed_at_ms`` are written for sealed segments only and ignored on an
  active one when read (both codecs did so).
* A segment id listed twice, an unknown or repeated broker entry, or unsorted bucket splits are
  refused (the client's decoder used to keep the last entry or pass them on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.ranges import MAX_HASH, HashRange
from braid.core.segment_info import CorruptLayout, SegmentInfo, SegmentState
from braid.protocol.generated import PulsarApi_pb2 as pb


def _optional_text(what: str, value: str | None) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise CorruptLayout(f"{what} must be absent or a non-empty string, got {value!r}")
    return value


def _check_bucket_splits(segment_id: int, splits: Sequence[int]) -> tuple[int, ...]:
    previous = 0
    for split in splits:
        if (
            isinstance(split, bool)
            or not isinstance(split, int)
            or not previous < split <= MAX_HASH
        ):
            raise CorruptLayout(
                f"segment {segment_id}: entry_bucket_splits must ascend strictly within "
                f"1..0x{MAX_HASH:04x}, got {list(splits)}"
            )
        previous = split
    return tuple(splits)


@dataclass(frozen=True, slots=True)
class DagSegment:
    """One ``SegmentInfoProto``: a segment of the DAG and its wire-only fields.

    Attributes:
        info: the segment (range, state, edges, epochs, wall-clock times).
        legacy_topic_name: set when the segment wraps a classic ``persistent://`` topic (the
            migration bridge, ``docs/protocol.md#feature-gating``).
        entry_bucket_splits: PIP-486 bucket boundaries, the start hashes of buckets ``1..N-1``;
            empty means one bucket.

    Raises:
        CorruptLayout: a field breaks the rules of the module docstring.
    """

    info: SegmentInfo
    legacy_topic_name: str | None = None
    entry_bucket_splits: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.info, SegmentInfo):
            raise CorruptLayout(f"a DAG segment needs a SegmentInfo, got {self.info!r}")
        sid = self.info.segment_id
        _optional_text(f"segment {sid}: legacy_topic_name", self.legacy_topic_name)
        splits = _check_bucket_splits(sid, self.entry_bucket_splits)
        object.__setattr__(self, "entry_bucket_splits", splits)


@dataclass(frozen=True, slots=True)
class SegmentBroker:
    """One ``SegmentBrokerAddress``: the broker serving a segment."""

    segment_id: int
    broker_url: str
    broker_url_tls: str | None = None

    def __post_init__(self) -> None:
        sid = self.segment_id
        if _optional_text(f"segment {sid}: broker_url", self.broker_url) is None:
            raise CorruptLayout(f"segment {sid}: a broker entry needs a broker_url")
        _optional_text(f"segment {sid}: broker_url_tls", self.broker_url_tls)


@dataclass(frozen=True)
class ScalableTopicDag:
    """The ``ScalableTopicDAG`` message, validated (see the module docstring).

    ``segments`` and ``segment_brokers`` are kept sorted by segment id, whatever order they were
    given in; :attr:`layout` is the segments as a :class:`~braid.core.layout.SegmentLayout`.

    Raises:
        CorruptLayout: the DAG breaks an invariant; the message names it.
    """

    epoch: int
    segments: tuple[DagSegment, ...]
    segment_brokers: tuple[SegmentBroker, ...] = ()
    controller_broker_url: str | None = None
    controller_broker_url_tls: str | None = None
    layout: SegmentLayout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        segments = tuple(sorted(self.segments, key=lambda s: s.info.segment_id))
        infos: dict[int, SegmentInfo] = {}
        for segment in segments:
            if not isinstance(segment, DagSegment):
                raise CorruptLayout(f"a DAG segment must be a DagSegment, got {segment!r}")
            if segment.info.segment_id in infos:
                raise CorruptLayout(f"segment {segment.info.segment_id} is listed twice")
            infos[segment.info.segment_id] = segment.info
        brokers = tuple(sorted(self.segment_brokers, key=lambda b: b.segment_id))
        seen: set[int] = set()
        for broker in brokers:
            if broker.segment_id not in infos:
                raise CorruptLayout(f"a broker is listed for unknown segment {broker.segment_id}")
            if broker.segment_id in seen:
                raise CorruptLayout(f"segment {broker.segment_id} has two broker entries")
            seen.add(broker.segment_id)
        _optional_text("controller_broker_url", self.controller_broker_url)
        _optional_text("controller_broker_url_tls", self.controller_broker_url_tls)
        next_id = max(infos) + 1 if infos else 0
        object.__setattr__(self, "segments", segments)
        object.__setattr__(self, "segment_brokers", brokers)
        object.__setattr__(self, "layout", SegmentLayout(self.epoch, next_id, infos))

    @classmethod
    def of_layout(
        cls,
        layout: SegmentLayout,
        *,
        segment_brokers: Mapping[int, str] | None = None,
        controller_broker_url: str | None = None,
        segment_brokers_tls: Mapping[int, str] | None = None,
        controller_broker_url_tls: str | None = None,
        legacy_topic_names: Mapping[int, str] | None = None,
        entry_bucket_splits: Mapping[int, Sequence[int]] | None = None,
    ) -> ScalableTopicDag:
        """The DAG of ``layout`` (every segment, active and sealed) with the given extras, each
        keyed by segment id (``*_tls``: the ``pulsar+ssl://`` URLs of brokers with TLS).

        Raises:
            CorruptLayout: an extra names an unknown segment or breaks a rule.
        """
        # A legacy root of a migrated topic (ADR 0063) names its classic topic itself.
        legacy = {
            sid: info.legacy_topic_name
            for sid, info in layout.segments.items()
            if info.legacy_topic_name is not None
        }
        legacy.update(legacy_topic_names or {})
        tls = segment_brokers_tls or {}
        splits = entry_bucket_splits or {}
        unknown = sorted((set(legacy) | set(splits)) - set(layout.segments))
        if unknown:
            raise CorruptLayout(f"wire fields given for unknown segments {unknown}")
        return cls(
            epoch=layout.epoch,
            segments=tuple(
                DagSegment(info, legacy.get(sid), tuple(splits.get(sid, ())))
                for sid, info in layout.segments.items()
            ),
            segment_brokers=tuple(
                SegmentBroker(sid, url, tls.get(sid))
                for sid, url in (segment_brokers or {}).items()
            ),
            controller_broker_url=controller_broker_url or None,
            controller_broker_url_tls=controller_broker_url_tls or None,
        )

    @property
    def brokers(self) -> dict[int, SegmentBroker]:
        """The broker entries by segment id."""
        return {b.segment_id: b for b in self.segment_brokers}

    # -- codec ---------------------------------------------------------------------------------

    def to_proto(self) -> pb.ScalableTopicDAG:
        """The protobuf message (segments and brokers in id order, absent fields unset)."""
        dag = pb.ScalableTopicDAG(epoch=self.epoch)
        for segment in self.segments:
            info = segment.info
            seg = dag.segments.add(
                segment_id=info.segment_id,
                hash_start=info.hash_range.start,
                hash_end=info.hash_range.end,
                state=pb.ACTIVE if info.is_active else pb.SEALED,
                parent_ids=info.parent_ids,
                child_ids=info.child_ids,
                created_at_epoch=info.created_at_epoch,
                created_at_ms=info.created_at_ms,
            )
            if not info.is_active:
                seg.sealed_at_epoch = info.sealed_at_epoch
                seg.sealed_at_ms = info.sealed_at_ms
            if segment.legacy_topic_name is not None:
                seg.legacy_topic_name = segment.legacy_topic_name
            seg.entry_bucket_splits.extend(segment.entry_bucket_splits)
        for broker in self.segment_brokers:
            entry = dag.segment_brokers.add(
                segment_id=broker.segment_id, broker_url=broker.broker_url
            )
            if broker.broker_url_tls is not None:
                entry.broker_url_tls = broker.broker_url_tls
        if self.controller_broker_url is not None:
            dag.controller_broker_url = self.controller_broker_url
        if self.controller_broker_url_tls is not None:
            dag.controller_broker_url_tls = self.controller_broker_url_tls
        return dag

    @classmethod
    def from_proto(cls, dag: pb.ScalableTopicDAG) -> ScalableTopicDag:
        """The validated model of a received message.

        Raises:
            CorruptLayout: the message breaks an invariant (a range off the ring, a DAG that does
                not tile it, a segment listed twice, ...).
        """
        try:
            return cls(
                epoch=dag.epoch,
                segments=tuple(_segment_from_proto(s) for s in dag.segments),
                segment_brokers=tuple(
                    SegmentBroker(b.segment_id, b.broker_url, _text(b, "broker_url_tls"))
                    for b in dag.segment_brokers
                    if b.broker_url
                ),
                controller_broker_url=_text(dag, "controller_broker_url"),
                controller_broker_url_tls=_text(dag, "controller_broker_url_tls"),
            )
        except CorruptLayout:
            raise
        except InvalidInputError as exc:  # a hash range off the ring, ...
            raise CorruptLayout(f"DAG of epoch {dag.epoch} is invalid: {exc}") from exc


def _text(message: object, name: str) -> str | None:
    """An optional string field; unset and empty both read as absent."""
    value: str = getattr(message, name)
    return value or None


def _segment_from_proto(s: pb.SegmentInfoProto) -> DagSegment:
    sealed = s.state == pb.SEALED
    info = SegmentInfo(
        segment_id=s.segment_id,
        hash_range=HashRange(s.hash_start, s.hash_end),
        state=SegmentState.SEALED if sealed else SegmentState.ACTIVE,
        parent_ids=tuple(s.parent_ids),
        child_ids=tuple(s.child_ids),
        created_at_epoch=s.created_at_epoch,
        sealed_at_epoch=s.sealed_at_epoch if sealed else 0,
        created_at_ms=s.created_at_ms,
        sealed_at_ms=s.sealed_at_ms if sealed else 0,
    )
    return DagSegment(info, _text(s, "legacy_topic_name"), tuple(s.entry_bucket_splits))


__all__ = ["DagSegment", "ScalableTopicDag", "SegmentBroker"]
