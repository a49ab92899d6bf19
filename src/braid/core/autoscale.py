"""PIP-483's auto split/merge: the policy, its overrides, load records and the pure decision.

The controller leader's auto-scaler (an I/O shell in ``braid.scalable``) gathers a snapshot — the
topic's :class:`~braid.core.layout.SegmentLayout`, the latest :class:`SegmentLoad` of each active
segment, the consumer count of each STREAM/CHECKPOINT subscription, the resolved
:class:`AutoScalePolicy` and the topic's :class:`AutoScaleState` — and calls :func:`decide`, which
returns at most one action: :class:`Split`, :class:`Merge` or :class:`NoAction` naming the guard
that held. Nothing here reads a clock or does I/O; ``now_ms`` is passed in.

Policy resolution follows PIP-483: ``broker.conf`` defaults
(:meth:`AutoScalePolicy.from_broker_config`) <- namespace :class:`AutoScalePolicyOverride` <-
topic override, most specific wins per field.

Braid adds one guard the PIP does not spell out, to keep the anti-flip-flop promise: a merge is not
proposed when it would leave fewer active segments than the largest STREAM subscription has
consumers, because the consumer-driven split rule would immediately undo it
(:attr:`NoActionReason.CONSUMER_DEMAND`).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from braid.core import units
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentInfo, SegmentLayout
from braid.core.ranges import RING_SIZE


class InvalidAutoScalePolicy(InvalidInputError):
    """An auto-scale policy, override or load record is malformed or inconsistent."""


# ---------------------------------------------------------------------------------------------
# The knobs: one table drives validation, broker.conf parsing and the override's JSON codec.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Knob:
    field: str  # Python attribute name on AutoScalePolicy / AutoScalePolicyOverride
    conf_key: str  # broker.conf key (PIP-483's configuration table)
    json_key: str  # key in the override JSON (ScalableTopicMetadata.autoScalePolicy, Policies)
    kind: str  # "bool" | "int" | "duration" | "rate" | "bytes" | "fraction"
    minimum: float  # smallest allowed value (inclusive)


def _knob(field: str, kind: str, minimum: float = 0, conf_key: str = "") -> _Knob:
    """Derive the keys from the field name: ``split_cooldown_ms`` -> ``splitCooldownMs`` (JSON)
    and ``scalableTopicSplitCooldown`` (broker.conf, whose durations carry their own units)."""
    words = field.removesuffix("_ms").split("_")
    camel = words[0] + "".join(word.capitalize() for word in words[1:])
    json_key = camel + ("Ms" if field.endswith("_ms") else "")
    conf_key = conf_key or "scalableTopic" + camel[0].upper() + camel[1:]
    return _Knob(field, conf_key, json_key, kind, minimum)


_KNOBS: tuple[_Knob, ...] = (
    _knob("enabled", "bool", conf_key="scalableTopicAutoScaleEnabled"),
    _knob("auto_scale_interval_ms", "duration", minimum=1),
    _knob("max_segments", "int", minimum=1),
    _knob("min_segments", "int", minimum=1),
    _knob("max_dag_depth", "int"),
    _knob("split_cooldown_ms", "duration"),
    _knob("merge_cooldown_ms", "duration"),
    _knob("merge_window_ms", "duration"),
    _knob("split_msg_rate_in_threshold", "rate"),
    _knob("split_bytes_rate_in_threshold", "bytes"),
    _knob("split_msg_rate_out_threshold", "rate"),
    _knob("split_bytes_rate_out_threshold", "bytes"),
    _knob("merge_msg_rate_in_threshold", "rate"),
    _knob("merge_bytes_rate_in_threshold", "bytes"),
    _knob("merge_msg_rate_out_threshold", "rate"),
    _knob("merge_bytes_rate_out_threshold", "bytes"),
    _knob("load_report_interval_ms", "duration", minimum=1),
    _knob("load_report_rate_change_threshold", "fraction"),
)

#: The four rates, in the order used by thresholds and load tuples.
METRICS = ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
_METRIC_JSON_NAMES = ("msgRateIn", "bytesRateIn", "msgRateOut", "bytesRateOut")

_KNOB_BY_JSON_KEY = {knob.json_key: knob for knob in _KNOBS}

_CONF_PARSERS: dict[str, Callable[[str], object]] = {
    "bool": units.parse_bool,
    "int": units.parse_int,
    "duration": units.parse_duration_ms,
    "rate": units.parse_rate,
    "bytes": units.parse_bytes,
    "fraction": units.parse_fraction,
}

# The ring has RING_SIZE positions, so no layout can hold more active segments than that.
_MAX_SEGMENTS_LIMIT = RING_SIZE


def _check_knob_value(knob: _Knob, value: object) -> object:
    """Type- and range-check one knob value; returns it normalised (numbers -> float for rates)."""
    name = knob.json_key
    if knob.kind == "bool":
        if not isinstance(value, bool):
            raise InvalidAutoScalePolicy(f"{name} must be a boolean, got {value!r}")
        return value
    if knob.kind in ("int", "duration"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidAutoScalePolicy(f"{name} must be an integer, got {value!r}")
        if value < knob.minimum:
            raise InvalidAutoScalePolicy(f"{name} must be >= {knob.minimum:g}, got {value}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAutoScalePolicy(f"{name} must be a number, got {value!r}")
    number = _as_float(value)
    if not math.isfinite(number) or number < knob.minimum:
        raise InvalidAutoScalePolicy(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _as_float(value: int | float) -> float:
    # float() of an integer beyond the float range raises; treat it as infinite (rejected).
    try:
        return float(value)
    except OverflowError:
        return math.inf


# ---------------------------------------------------------------------------------------------
# Policy and overrides
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AutoScalePolicy:
    """The effective auto-scale policy of one topic, with PIP-483's defaults.

    Durations are integer milliseconds; rate thresholds are floats (messages or bytes per
    second); ``load_report_rate_change_threshold`` is a fraction (0.25 = 25 %). The instance is
    validated on construction.

    Raises:
        InvalidAutoScalePolicy: a value has the wrong type or is negative, ``min_segments < 1``,
            ``min_segments > max_segments``, ``max_segments`` exceeds the ring's 65536
            positions, an interval is zero, or a split threshold is not strictly above the
            matching merge threshold (the dead band PIP-483 relies on against flip-flopping).
    """

    enabled: bool = True
    auto_scale_interval_ms: int = 60_000
    max_segments: int = 64
    min_segments: int = 1
    max_dag_depth: int = 10
    split_cooldown_ms: int = 60_000
    merge_cooldown_ms: int = 300_000
    merge_window_ms: int = 300_000
    split_msg_rate_in_threshold: float = 10_000.0
    split_bytes_rate_in_threshold: float = 50_000_000.0
    split_msg_rate_out_threshold: float = 50_000.0
    split_bytes_rate_out_threshold: float = 250_000_000.0
    merge_msg_rate_in_threshold: float = 1_000.0
    merge_bytes_rate_in_threshold: float = 5_000_000.0
    merge_msg_rate_out_threshold: float = 5_000.0
    merge_bytes_rate_out_threshold: float = 25_000_000.0
    load_report_interval_ms: int = 10_000
    load_report_rate_change_threshold: float = 0.25

    def __post_init__(self) -> None:
        for knob in _KNOBS:
            normalised = _check_knob_value(knob, getattr(self, knob.field))
            object.__setattr__(self, knob.field, normalised)
        if self.min_segments > self.max_segments:
            raise InvalidAutoScalePolicy(
                f"minSegments ({self.min_segments}) must not exceed maxSegments "
                f"({self.max_segments})"
            )
        if self.max_segments > _MAX_SEGMENTS_LIMIT:
            raise InvalidAutoScalePolicy(
                f"maxSegments ({self.max_segments}) cannot exceed the ring's "
                f"{_MAX_SEGMENTS_LIMIT} hash positions"
            )
        for metric, split, merge in zip(
            _METRIC_JSON_NAMES, self.split_thresholds, self.merge_thresholds, strict=True
        ):
            if not split > merge:
                raise InvalidAutoScalePolicy(
                    f"split threshold for {metric} ({split:g}) must be above its merge "
                    f"threshold ({merge:g}): the gap is the dead band that prevents flip-flopping"
                )

    def validate(self) -> None:
        """Re-check the invariants (they already hold after construction); kept for callers."""
        self.__post_init__()

    @property
    def split_thresholds(self) -> tuple[float, float, float, float]:
        """The split thresholds in :data:`METRICS` order (msgRateIn, bytesRateIn, out...)."""
        return (
            self.split_msg_rate_in_threshold,
            self.split_bytes_rate_in_threshold,
            self.split_msg_rate_out_threshold,
            self.split_bytes_rate_out_threshold,
        )

    @property
    def merge_thresholds(self) -> tuple[float, float, float, float]:
        """The merge thresholds in :data:`METRICS` order."""
        return (
            self.merge_msg_rate_in_threshold,
            self.merge_bytes_rate_in_threshold,
            self.merge_msg_rate_out_threshold,
            self.merge_bytes_rate_out_threshold,
        )

    @classmethod
    def from_broker_config(cls, conf: Mapping[str, str]) -> AutoScalePolicy:
        """Build the broker-wide default policy from ``broker.conf``-style string values.

        Reads PIP-483's keys (``scalableTopicAutoScaleEnabled``, ``scalableTopicMaxSegments``,
        ``scalableTopicSplitCooldown`` = ``1m``, ``scalableTopicSplitBytesRateInThreshold`` =
        ``50MB``, ...), parsing units with :mod:`braid.core.units`. Absent keys keep PIP-483's
        defaults; keys this policy does not know are ignored (the file holds other settings too).

        Raises:
            InvalidAutoScalePolicy: a value does not parse (the message names the key) or the
                resulting policy is inconsistent.
        """
        values: dict[str, object] = {}
        for knob in _KNOBS:
            raw = conf.get(knob.conf_key)
            if raw is None:
                continue
            try:
                values[knob.field] = _CONF_PARSERS[knob.kind](raw)
            except units.InvalidConfigValueError as exc:
                raise InvalidAutoScalePolicy(f"{knob.conf_key}: {exc}") from exc
        return cls(**values)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        """The effective policy with the override's camelCase keys (for stats endpoints)."""
        return {knob.json_key: getattr(self, knob.field) for knob in _KNOBS}


@dataclass(frozen=True)
class AutoScalePolicyOverride:
    """A namespace- or topic-level override: the same knobs, each optional (``None`` falls through).

    JSON form (:meth:`to_json` / :meth:`from_json`), stored as ``autoScalePolicy`` in
    ``ScalableTopicMetadata`` and ``scalableTopicAutoScalePolicy`` in namespace ``Policies``:
    ``enabled`` (bool); ``autoScaleIntervalMs``, ``splitCooldownMs``, ``mergeCooldownMs``,
    ``mergeWindowMs``, ``loadReportIntervalMs`` (integer milliseconds); ``maxSegments``,
    ``minSegments``, ``maxDagDepth`` (integers); ``split``/``merge`` +
    ``MsgRateIn``/``BytesRateIn``/``MsgRateOut``/``BytesRateOut`` + ``Threshold`` (numbers per
    second, bytes as plain bytes); ``loadReportRateChangeThreshold`` (fraction, 0.25 = 25 %).
    Absent keys and ``null`` mean "not set". Each set value is type- and sign-checked here;
    cross-field consistency is checked when the override is resolved (:func:`resolve_policy`).

    Raises:
        InvalidAutoScalePolicy: a set value has the wrong type or is out of range.
    """

    enabled: bool | None = None
    auto_scale_interval_ms: int | None = None
    max_segments: int | None = None
    min_segments: int | None = None
    max_dag_depth: int | None = None
    split_cooldown_ms: int | None = None
    merge_cooldown_ms: int | None = None
    merge_window_ms: int | None = None
    split_msg_rate_in_threshold: float | None = None
    split_bytes_rate_in_threshold: float | None = None
    split_msg_rate_out_threshold: float | None = None
    split_bytes_rate_out_threshold: float | None = None
    merge_msg_rate_in_threshold: float | None = None
    merge_bytes_rate_in_threshold: float | None = None
    merge_msg_rate_out_threshold: float | None = None
    merge_bytes_rate_out_threshold: float | None = None
    load_report_interval_ms: int | None = None
    load_report_rate_change_threshold: float | None = None

    def __post_init__(self) -> None:
        for knob in _KNOBS:
            value = getattr(self, knob.field)
            if value is not None:
                object.__setattr__(self, knob.field, _check_knob_value(knob, value))

    def set_fields(self) -> dict[str, Any]:
        """The fields this override sets, by Python attribute name."""
        return {
            knob.field: getattr(self, knob.field)
            for knob in _KNOBS
            if getattr(self, knob.field) is not None
        }

    def apply_to(self, base: AutoScalePolicy) -> AutoScalePolicy:
        """``base`` with every field this override sets replaced (validated).

        Raises:
            InvalidAutoScalePolicy: the combination is inconsistent.
        """
        return replace(base, **self.set_fields())

    def to_json(self) -> dict[str, object]:
        """The set fields under their camelCase keys; unset fields are omitted."""
        return {
            knob.json_key: getattr(self, knob.field)
            for knob in _KNOBS
            if getattr(self, knob.field) is not None
        }

    @classmethod
    def from_json(cls, doc: object) -> AutoScalePolicyOverride:
        """Parse the JSON object form (already decoded to Python values).

        Raises:
            InvalidAutoScalePolicy: ``doc`` is not an object, has an unknown key, or a value of
                the wrong type or range.
        """
        if not isinstance(doc, Mapping):
            raise InvalidAutoScalePolicy(
                f"an auto-scale policy override must be a JSON object, got {type(doc).__name__}"
            )
        values: dict[str, Any] = {}
        for key, value in doc.items():
            knob = _KNOB_BY_JSON_KEY.get(key) if isinstance(key, str) else None
            if knob is None:
                raise InvalidAutoScalePolicy(
                    f"unknown auto-scale policy key {key!r}; known keys: "
                    f"{', '.join(sorted(_KNOB_BY_JSON_KEY))}"
                )
            if value is not None:
                values[knob.field] = value
        return cls(**values)


def resolve_policy(
    broker: AutoScalePolicy,
    namespace: AutoScalePolicyOverride | None,
    topic: AutoScalePolicyOverride | None,
) -> AutoScalePolicy:
    """The effective policy: broker defaults <- namespace override <- topic override.

    Each field takes the value of the most specific level that sets it, ``enabled`` included:
    ``enabled=False`` on the namespace opts all its topics out unless a topic explicitly sets
    ``enabled=True`` (the ``autoTopicCreationOverride`` convention PIP-483 follows), and the
    broker's ``scalableTopicAutoScaleEnabled=false`` is likewise only a default.

    Raises:
        InvalidAutoScalePolicy: the merged result is inconsistent (e.g. a topic lowers a split
            threshold below the namespace's merge threshold); the admin API should resolve a
            new override against the current levels before storing it.
    """
    effective = broker
    for level, override in (("namespace", namespace), ("topic", topic)):
        if override is None:
            continue
        try:
            effective = override.apply_to(effective)
        except InvalidAutoScalePolicy as exc:
            raise InvalidAutoScalePolicy(
                f"the {level} auto-scale override makes the policy invalid: {exc}"
            ) from exc
    return effective


# ---------------------------------------------------------------------------------------------
# Load records (SegmentLoadStats) and the reporter's change rule
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentLoad:
    """One segment's ``SegmentLoadStats`` record plus the store's last-modified time of it.

    The JSON record (at ``/topics/{tenant}/{ns}/{topic}/segments/{id}/load``) carries only the
    four rates; ``modified_ms`` comes from the metadata store's ``Stat`` and is what the merge
    window is measured from (a record still "cold" that was last written at ``modified_ms`` proves
    the segment has been cold since then, because the reporter rewrites on material change).

    Raises:
        InvalidAutoScalePolicy: a rate is negative, not finite or not a number, or
            ``modified_ms`` is not an integer.
    """

    msg_rate_in: float
    bytes_rate_in: float
    msg_rate_out: float
    bytes_rate_out: float
    modified_ms: int

    def __post_init__(self) -> None:
        for attr, name in zip(METRICS, _METRIC_JSON_NAMES, strict=True):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidAutoScalePolicy(f"load {name} must be a number, got {value!r}")
            number = _as_float(value)
            if not math.isfinite(number) or number < 0:
                raise InvalidAutoScalePolicy(
                    f"load {name} must be a finite number >= 0, got {value!r}"
                )
            object.__setattr__(self, attr, number)
        if isinstance(self.modified_ms, bool) or not isinstance(self.modified_ms, int):
            raise InvalidAutoScalePolicy(
                f"load modified time must be integer ms, got {self.modified_ms!r}"
            )

    @property
    def rates(self) -> tuple[float, float, float, float]:
        """The four rates in :data:`METRICS` order."""
        return (self.msg_rate_in, self.bytes_rate_in, self.msg_rate_out, self.bytes_rate_out)

    def to_json(self) -> dict[str, float]:
        """The ``SegmentLoadStats`` document (no timestamp: the store's Stat has it)."""
        return dict(zip(_METRIC_JSON_NAMES, self.rates, strict=True))

    def encode(self) -> bytes:
        """The record as stored: compact UTF-8 JSON."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, doc: object, modified_ms: int) -> SegmentLoad:
        """Parse a decoded ``SegmentLoadStats`` object; ``modified_ms`` is the store's Stat time.

        All four rates are required. Unknown keys are ignored, so a newer broker may add fields.

        Raises:
            InvalidAutoScalePolicy: not an object, a rate missing, or a rate of the wrong type.
        """
        if not isinstance(doc, Mapping):
            raise InvalidAutoScalePolicy(
                f"a SegmentLoadStats record must be a JSON object, got {type(doc).__name__}"
            )
        missing = [name for name in _METRIC_JSON_NAMES if name not in doc]
        if missing:
            raise InvalidAutoScalePolicy(f"SegmentLoadStats record lacks {', '.join(missing)}")
        msg_in, bytes_in, msg_out, bytes_out = (doc[name] for name in _METRIC_JSON_NAMES)
        return cls(msg_in, bytes_in, msg_out, bytes_out, modified_ms=modified_ms)

    @classmethod
    def decode(cls, data: bytes, modified_ms: int) -> SegmentLoad:
        """Parse the stored bytes of a ``SegmentLoadStats`` record.

        Raises:
            InvalidAutoScalePolicy: not UTF-8 JSON, or not a valid record.
        """
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidAutoScalePolicy(f"SegmentLoadStats record is not JSON: {exc}") from exc
        return cls.from_json(doc, modified_ms)


def is_material_change(
    last_written: SegmentLoad | None, current: SegmentLoad, threshold: float
) -> bool:
    """The load reporter's write rule: should ``current`` replace the last record written?

    True when nothing was written yet, or when any of the four rates moved by *more than*
    ``threshold`` relative to the last written value (``|new - old| / old > threshold``), or
    crossed from or to zero (a relative change from zero is undefined, and a segment going
    idle or waking up is always worth recording). Modified times are not compared.

    Raises:
        InvalidAutoScalePolicy: ``threshold`` is negative or not finite.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidAutoScalePolicy(f"rate change threshold must be a number, got {threshold!r}")
    if not math.isfinite(threshold) or threshold < 0:
        raise InvalidAutoScalePolicy(f"rate change threshold must be >= 0, got {threshold!r}")
    if last_written is None:
        return True
    for old, new in zip(last_written.rates, current.rates, strict=True):
        if old == 0.0 or new == 0.0:
            if old != new:
                return True
            continue
        if abs(new - old) / old > threshold:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# State and decisions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AutoScaleState:
    """Per-topic auto-scale memory kept by the controller leader (in memory).

    The I/O shell sets ``last_split_at_ms`` / ``last_merge_at_ms`` after it *executes* a split or
    merge — automatic or manual (PIP-483: a manual split starts the split cooldown, a manual merge
    the merge cooldown) — and ``operation_in_flight`` while one is running.
    """

    last_split_at_ms: int | None = None
    last_merge_at_ms: int | None = None
    operation_in_flight: bool = False

    def after_split(self, now_ms: int) -> AutoScaleState:
        """The state once a split (auto or manual) has completed at ``now_ms``."""
        return replace(self, last_split_at_ms=now_ms, operation_in_flight=False)

    def after_merge(self, now_ms: int) -> AutoScaleState:
        """The state once a merge (auto or manual) has completed at ``now_ms``."""
        return replace(self, last_merge_at_ms=now_ms, operation_in_flight=False)


class NoActionReason(Enum):
    """Why :func:`decide` proposed nothing: the guard that held (feeds stats and metrics).

    ``MAX_SEGMENTS`` is reported only when a split was warranted (PIP-483's
    ``split_suppressed_max_segments`` metric) and ``MAX_DAG_DEPTH`` only when a pair was cold for
    the whole window but its lineage is at the cap (``merge_suppressed_max_depth``).
    """

    DISABLED = "disabled"  # the resolved policy has enabled=False
    OPERATION_IN_FLIGHT = "operation_in_flight"  # a split or merge is still running
    MAX_SEGMENTS = "max_segments"  # a split is warranted; the topic is at maxSegments
    SPLIT_COOLDOWN = "split_cooldown"  # a split is warranted; last split within splitCooldown
    UNSPLITTABLE = "unsplittable"  # only one-hash-wide segments are over a split threshold
    MERGE_COOLDOWN = "merge_cooldown"  # a merge is warranted; last merge within mergeCooldown
    MIN_SEGMENTS = "min_segments"  # the topic is at or below minSegments
    CONSUMER_DEMAND = "consumer_demand"  # a merge would leave fewer segments than consumers
    MAX_DAG_DEPTH = "max_dag_depth"  # every durably cold pair's lineage is at maxDagDepth
    MERGE_WINDOW = "merge_window"  # a pair is cold, but not yet for mergeWindow
    NO_LOAD_RECORD = "no_load_record"  # a segment has no SegmentLoadStats record yet
    DEAD_BAND = "dead_band"  # load sits between the merge and split thresholds


@dataclass(frozen=True)
class Split:
    """Split the active segment ``segment_id`` at its midpoint."""

    segment_id: int
    reason: str


@dataclass(frozen=True)
class Merge:
    """Merge two hash-adjacent active segments; ``segment_id1`` has the lower range start."""

    segment_id1: int
    segment_id2: int
    reason: str


@dataclass(frozen=True)
class NoAction:
    """Nothing to do this time; ``reason`` names the guard that held, ``detail`` explains it."""

    reason: NoActionReason
    detail: str


Decision = Split | Merge | NoAction

# Merge-pair evaluation stages, in the order a pair passes them; a pair that fails later got
# "closer" to merging, so its failure is the most informative reason to report.
_STAGE_NO_LOAD, _STAGE_NOT_COLD, _STAGE_WINDOW, _STAGE_DEPTH, _STAGE_ELIGIBLE = range(5)
_STAGE_REASON = {
    _STAGE_NO_LOAD: NoActionReason.NO_LOAD_RECORD,
    _STAGE_NOT_COLD: NoActionReason.DEAD_BAND,
    _STAGE_WINDOW: NoActionReason.MERGE_WINDOW,
    _STAGE_DEPTH: NoActionReason.MAX_DAG_DEPTH,
}


def decide(
    layout: SegmentLayout,
    load_by_segment: Mapping[int, SegmentLoad],
    stream_consumers_by_subscription: Mapping[str, int],
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
) -> Decision:
    """PIP-483's ``AutoScalePolicyEvaluator.decide``: at most one split or merge, or why not.

    Args:
        layout: the topic's current layout.
        load_by_segment: the latest load record per segment id; records of segments that are not
            active are ignored; an active segment without one counts as idle for splits and can
            never be merged.
        stream_consumers_by_subscription: consumer count of each STREAM/CHECKPOINT subscription
            (QUEUE subscriptions must not be passed: more segments add no parallelism for them).
        policy: the resolved policy.
        state: cooldown and in-flight memory. This function does not change it: the caller sets
            ``last_split_at_ms`` / ``last_merge_at_ms`` after executing the action (and after
            manual splits and merges too), see :class:`AutoScaleState`.
        now_ms: the current wall-clock time in ms (same clock as the store's modified times).

    Returns:
        Split pass first: if any STREAM subscription has more consumers than there are active
        segments (the per-subscription maximum, not the sum), split the busiest segment by
        msgRateIn; otherwise split the most overloaded segment (largest rate/threshold over the
        four metrics) among those with any rate above its split threshold. A wanted split is
        held back by ``maxSegments`` and ``splitCooldown``. Only if no split fires, the merge
        pass: among hash-adjacent active pairs where both segments have a load record with all
        four rates below the merge thresholds, unchanged for at least ``mergeWindow``
        (``now_ms - modified_ms``) and a merge depth below ``maxDagDepth``, merge the coldest
        pair (smallest sum of rate/merge-threshold over both segments), held back by
        ``mergeCooldown``, ``minSegments`` and consumer demand. Ties go to the lowest range start.
        The depth rule "neither segment is at maxDagDepth merges" (``merge_depth < maxDagDepth``
        for both) is the same as "the merged child's depth ``max(d1, d2) + 1`` stays
        ``<= maxDagDepth``". When a wanted split was held back and no merge fires, the split's
        guard is reported.

    Raises:
        InvalidInputError: a consumer count is negative or not an integer, ``now_ms`` is not an
            integer, or a load entry is not a :class:`SegmentLoad`.
    """
    if isinstance(now_ms, bool) or not isinstance(now_ms, int):
        raise InvalidInputError(f"now_ms must be integer milliseconds, got {now_ms!r}")
    required, busiest_subscription = _required_consumers(stream_consumers_by_subscription)
    if not policy.enabled:
        return NoAction(NoActionReason.DISABLED, "auto split/merge is disabled for this topic")
    if state.operation_in_flight:
        return NoAction(NoActionReason.OPERATION_IN_FLIGHT, "a split or merge is still in progress")
    active = list(layout.active_segments)
    loads = {seg.segment_id: _load_of(load_by_segment, seg.segment_id) for seg in active}

    held_split = _split_pass(active, loads, required, busiest_subscription, policy, state, now_ms)
    if isinstance(held_split, Split):
        return held_split
    merge = _merge_pass(layout, active, loads, required, policy, state, now_ms)
    if isinstance(merge, Merge) or held_split is None:
        return merge
    return held_split


def _required_consumers(counts: Mapping[str, int]) -> tuple[int, str | None]:
    """The largest per-subscription consumer count and the subscription that has it."""
    required, which = 0, None
    for name in sorted(counts):
        count = counts[name]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidInputError(
                f"consumer count of subscription {name!r} must be a non-negative integer, "
                f"got {count!r}"
            )
        if count > required:
            required, which = count, name
    return required, which


def _load_of(load_by_segment: Mapping[int, SegmentLoad], segment_id: int) -> SegmentLoad | None:
    load = load_by_segment.get(segment_id)
    if load is not None and not isinstance(load, SegmentLoad):
        raise InvalidInputError(
            f"load of segment {segment_id} must be a SegmentLoad, got {type(load).__name__}"
        )
    return load


def _split_pass(
    active: Sequence[SegmentInfo],
    loads: Mapping[int, SegmentLoad | None],
    required: int,
    busiest_subscription: str | None,
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
) -> Split | NoAction | None:
    """The split that is warranted (or the guard holding it back), or None if none is."""
    count = len(active)
    target: SegmentInfo | None
    if required > count:
        # Consumer-driven: give the extra consumer the busiest segment's half. Segments with no
        # record count as rate 0; ties go to the lowest range start (active is sorted by it).
        splittable = [seg for seg in active if seg.hash_range.size >= 2]
        target = max(splittable, key=lambda seg: _msg_rate_in(loads, seg), default=None)
        why = (
            f"consumer-driven: subscription {busiest_subscription!r} has {required} consumers "
            f"for {count} active segments"
        )
    else:
        # "Over" compares rates to thresholds directly (a ratio can round to exactly 1.0).
        hot = [
            (seg, _overload(load, policy))
            for seg in active
            if (load := loads[seg.segment_id]) is not None
            and any(r > t for r, t in zip(load.rates, policy.split_thresholds, strict=True))
        ]
        if not hot:
            return None
        # A segment covering one hash position cannot split; the next most overloaded can.
        candidates = [(seg, score) for seg, score in hot if seg.hash_range.size >= 2]
        target, score = max(candidates, key=lambda pair: pair[1], default=(None, 0.0))
        why = f"load-driven: a rate is at {score:.2f}x its split threshold"
    if count >= policy.max_segments:
        return NoAction(
            NoActionReason.MAX_SEGMENTS,
            f"a split is warranted but the topic has {count} active segments "
            f"(maxSegments={policy.max_segments})",
        )
    if _in_cooldown(state.last_split_at_ms, policy.split_cooldown_ms, now_ms):
        return NoAction(
            NoActionReason.SPLIT_COOLDOWN,
            f"a split is warranted but the last split was at {state.last_split_at_ms} "
            f"(splitCooldown={policy.split_cooldown_ms} ms)",
        )
    if target is None:
        return NoAction(
            NoActionReason.UNSPLITTABLE,
            "every segment over a split threshold covers a single hash position",
        )
    return Split(target.segment_id, f"{why}; splitting segment {target.segment_id}")


def _merge_pass(
    layout: SegmentLayout,
    active: Sequence[SegmentInfo],
    loads: Mapping[int, SegmentLoad | None],
    required: int,
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
) -> Merge | NoAction:
    """The coldest mergeable adjacent pair, or the guard that held."""
    count = len(active)
    # A tiling layout has no gaps, so consecutive active segments are adjacent; check anyway,
    # since mergeSegments only accepts hash-adjacent pairs.
    pairs = [
        (first, second)
        for first, second in itertools.pairwise(active)
        if first.hash_range.is_adjacent_to(second.hash_range)
    ]
    if not pairs:
        return NoAction(
            NoActionReason.MIN_SEGMENTS,
            f"no two adjacent active segments ({count} active, minSegments={policy.min_segments})",
        )
    best_stage, best_detail = -1, ""
    eligible: list[tuple[float, SegmentInfo, SegmentInfo]] = []
    for first, second in pairs:
        stage, detail = _pair_stage(layout, first, second, loads, policy, now_ms)
        if stage == _STAGE_ELIGIBLE:
            first_load, second_load = loads[first.segment_id], loads[second.segment_id]
            assert first_load is not None and second_load is not None  # eligible implies loads
            heat = _coldness(first_load, policy) + _coldness(second_load, policy)
            eligible.append((heat, first, second))
        if stage > best_stage:
            best_stage, best_detail = stage, detail
    if best_stage < _STAGE_DEPTH:
        return NoAction(_STAGE_REASON[best_stage], best_detail)
    # Some pair has been cold for the whole window: the topic-level guards now decide.
    if _in_cooldown(state.last_merge_at_ms, policy.merge_cooldown_ms, now_ms):
        return NoAction(
            NoActionReason.MERGE_COOLDOWN,
            f"a merge is warranted but the last merge was at {state.last_merge_at_ms} "
            f"(mergeCooldown={policy.merge_cooldown_ms} ms)",
        )
    if count <= policy.min_segments:
        return NoAction(
            NoActionReason.MIN_SEGMENTS,
            f"a merge is warranted but the topic has {count} active segments "
            f"(minSegments={policy.min_segments})",
        )
    if count - 1 < required:
        return NoAction(
            NoActionReason.CONSUMER_DEMAND,
            f"a merge would leave {count - 1} segments for a subscription with {required} "
            "consumers",
        )
    if not eligible:
        return NoAction(NoActionReason.MAX_DAG_DEPTH, best_detail)
    _, first, second = min(eligible, key=lambda item: item[0])
    return Merge(
        first.segment_id,
        second.segment_id,
        f"cold for at least {policy.merge_window_ms} ms: merging adjacent segments "
        f"{first.segment_id} and {second.segment_id}",
    )


def _pair_stage(
    layout: SegmentLayout,
    first: SegmentInfo,
    second: SegmentInfo,
    loads: Mapping[int, SegmentLoad | None],
    policy: AutoScalePolicy,
    now_ms: int,
) -> tuple[int, str]:
    """How far an adjacent pair gets towards merging, with a sentence saying where it stopped."""
    pair = (first, second)
    for seg in pair:
        if loads[seg.segment_id] is None:
            return _STAGE_NO_LOAD, f"segment {seg.segment_id} has no load record yet"
    for seg in pair:
        load = loads[seg.segment_id]
        assert load is not None
        if not all(
            rate < limit for rate, limit in zip(load.rates, policy.merge_thresholds, strict=True)
        ):
            return _STAGE_NOT_COLD, (
                f"segment {seg.segment_id} is between its merge and split thresholds"
            )
    for seg in pair:
        load = loads[seg.segment_id]
        assert load is not None
        cold_for = now_ms - load.modified_ms
        if cold_for < policy.merge_window_ms:
            return _STAGE_WINDOW, (
                f"segment {seg.segment_id} has been cold for {cold_for} ms "
                f"(mergeWindow={policy.merge_window_ms} ms)"
            )
    for seg in pair:
        depth = layout.merge_depth(seg.segment_id)
        if depth >= policy.max_dag_depth:
            return _STAGE_DEPTH, (
                f"a merge is warranted but segment {seg.segment_id}'s lineage already has "
                f"{depth} merges (maxDagDepth={policy.max_dag_depth})"
            )
    return _STAGE_ELIGIBLE, ""


def _in_cooldown(last_at_ms: int | None, cooldown_ms: int, now_ms: int) -> bool:
    return last_at_ms is not None and now_ms - last_at_ms < cooldown_ms


def _msg_rate_in(loads: Mapping[int, SegmentLoad | None], seg: SegmentInfo) -> float:
    load = loads[seg.segment_id]
    return 0.0 if load is None else load.msg_rate_in


def _overload(load: SegmentLoad, policy: AutoScalePolicy) -> float:
    """Largest rate/split-threshold ratio: how overloaded a hot segment is, for ranking."""
    # Split thresholds are > merge thresholds >= 0, so never zero.
    return max(
        rate / limit for rate, limit in zip(load.rates, policy.split_thresholds, strict=True)
    )


def _coldness(load: SegmentLoad, policy: AutoScalePolicy) -> float:
    """Sum of rate/merge-threshold ratios: unit-free, so bytes do not swamp message counts."""
    # Only called for cold segments, whose rates are strictly below positive merge thresholds.
    return sum(
        rate / limit for rate, limit in zip(load.rates, policy.merge_thresholds, strict=True)
    )


__all__ = [
    "METRICS",
    "AutoScalePolicy",
    "AutoScalePolicyOverride",
    "AutoScaleState",
    "Decision",
    "InvalidAutoScalePolicy",
    "Merge",
    "NoAction",
    "NoActionReason",
    "SegmentLoad",
    "Split",
    "decide",
    "is_material_change",
    "resolve_policy",
]
