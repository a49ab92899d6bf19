"""PIP-483's ``AutoScaleConfig``: the auto-scale policy, its overrides and their resolution.

One knob table (:data:`_KNOBS`) drives validation, ``broker.conf`` parsing
(:meth:`AutoScalePolicy.from_broker_config`) and the override's JSON codec, so a knob added once is
known everywhere. :class:`AutoScalePolicy` is the effective, validated policy of one topic;
:class:`AutoScalePolicyOverride` is a namespace- or topic-level override whose unset fields fall
through; :func:`resolve_policy` merges ``broker.conf`` defaults <- namespace override <- topic
override, most specific wins per field.

Invariants: every constructed policy has every value in range, ``min_segments <= max_segments <=
65536`` and each split threshold strictly above its merge threshold (the dead band PIP-483 relies
on against flip-flopping). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from braid.core import units
from braid.core.errors import InvalidInputError
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
    minimum: int  # smallest allowed integer value (inclusive); numbers are always >= 0


def _knob(field: str, kind: str, minimum: int = 0, conf_key: str = "") -> _Knob:
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

#: The four rates of a ``SegmentLoadStats`` record, in the order used by thresholds and loads.
METRICS = ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
#: The same four rates as spelled in JSON (``SegmentLoadStats`` keys, messages).
METRIC_JSON_KEYS = ("msgRateIn", "bytesRateIn", "msgRateOut", "bytesRateOut")

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
    return check_rate(name, value)


def check_rate(what: str, value: object) -> float:
    """``value`` as a float if it is a finite number >= 0 (a rate, threshold or fraction).

    Raises:
        InvalidAutoScalePolicy: not a number (``bool`` included), not finite, or negative; the
            message starts with ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAutoScalePolicy(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range: as good as infinite
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise InvalidAutoScalePolicy(f"{what} must be a finite number >= 0, got {value!r}")
    return number


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
            METRIC_JSON_KEYS, self.split_thresholds, self.merge_thresholds, strict=True
        ):
            if not split > merge:
                raise InvalidAutoScalePolicy(
                    f"split threshold for {metric} ({split:g}) must be above its merge "
                    f"threshold ({merge:g}): the gap is the dead band that prevents flip-flopping"
                )

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


__all__ = [
    "METRICS",
    "METRIC_JSON_KEYS",
    "AutoScalePolicy",
    "AutoScalePolicyOverride",
    "InvalidAutoScalePolicy",
    "check_rate",
    "resolve_policy",
]
