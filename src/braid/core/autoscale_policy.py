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

Validation runs in two steps wherever values come from: each value alone (type and range; the
error names that one key), then the rules *between* values (:data:`_CROSS_FIELD_RULES`) once, on
the merged result — ``broker.conf`` values over the defaults, an override over the levels below
it — and a conflict names every key involved and where each value came from. A value is never
checked against the default of a key that was set at the same time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from braid.core import units
from braid.core.errors import InvalidInputError
from braid.core.ranges import RING_SIZE


class InvalidAutoScalePolicy(InvalidInputError):
    """An auto-scale policy, override or load record is malformed or inconsistent.

    Attributes:
        fields: the policy fields (attribute names) at fault: one for a malformed or out-of-range
            value, every field of a conflict between values, none for a malformed document.
    """

    def __init__(self, message: str, fields: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.fields: tuple[str, ...] = tuple(fields)


# ---------------------------------------------------------------------------------------------
# The knobs: one table drives validation, broker.conf parsing and the override's JSON codec.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knob:
    """One setting of the policy under its three names, with its kind and integer range."""

    field: str  # Python attribute name on AutoScalePolicy / AutoScalePolicyOverride
    conf_key: str  # broker.conf key (PIP-483's configuration table)
    json_key: str  # key in the override JSON (ScalableTopicMetadata.autoScalePolicy, Policies)
    kind: str  # "bool" | "int" | "duration" | "rate" | "bytes" | "fraction"
    minimum: int = 0  # smallest allowed integer value (inclusive); numbers are always >= 0
    maximum: int | None = None  # largest allowed integer value (inclusive), if any


# broker.conf durations carry their own units (``1m``), so their keys have no ``Ms`` suffix; the
# JSON override's durations are plain milliseconds (``splitCooldownMs``).
_KNOBS: tuple[Knob, ...] = (
    Knob("enabled", "scalableTopicAutoScaleEnabled", "enabled", "bool"),
    Knob(
        "auto_scale_interval_ms",
        "scalableTopicAutoScaleInterval",
        "autoScaleIntervalMs",
        "duration",
        minimum=1,
    ),
    # The ring has RING_SIZE hash positions, so no layout can hold more active segments.
    Knob(
        "max_segments",
        "scalableTopicMaxSegments",
        "maxSegments",
        "int",
        minimum=1,
        maximum=RING_SIZE,
    ),
    Knob("min_segments", "scalableTopicMinSegments", "minSegments", "int", minimum=1),
    Knob("max_dag_depth", "scalableTopicMaxDagDepth", "maxDagDepth", "int"),
    Knob("split_cooldown_ms", "scalableTopicSplitCooldown", "splitCooldownMs", "duration"),
    Knob("merge_cooldown_ms", "scalableTopicMergeCooldown", "mergeCooldownMs", "duration"),
    Knob("merge_window_ms", "scalableTopicMergeWindow", "mergeWindowMs", "duration"),
    Knob(
        "split_msg_rate_in_threshold",
        "scalableTopicSplitMsgRateInThreshold",
        "splitMsgRateInThreshold",
        "rate",
    ),
    Knob(
        "split_bytes_rate_in_threshold",
        "scalableTopicSplitBytesRateInThreshold",
        "splitBytesRateInThreshold",
        "bytes",
    ),
    Knob(
        "split_msg_rate_out_threshold",
        "scalableTopicSplitMsgRateOutThreshold",
        "splitMsgRateOutThreshold",
        "rate",
    ),
    Knob(
        "split_bytes_rate_out_threshold",
        "scalableTopicSplitBytesRateOutThreshold",
        "splitBytesRateOutThreshold",
        "bytes",
    ),
    Knob(
        "merge_msg_rate_in_threshold",
        "scalableTopicMergeMsgRateInThreshold",
        "mergeMsgRateInThreshold",
        "rate",
    ),
    Knob(
        "merge_bytes_rate_in_threshold",
        "scalableTopicMergeBytesRateInThreshold",
        "mergeBytesRateInThreshold",
        "bytes",
    ),
    Knob(
        "merge_msg_rate_out_threshold",
        "scalableTopicMergeMsgRateOutThreshold",
        "mergeMsgRateOutThreshold",
        "rate",
    ),
    Knob(
        "merge_bytes_rate_out_threshold",
        "scalableTopicMergeBytesRateOutThreshold",
        "mergeBytesRateOutThreshold",
        "bytes",
    ),
    Knob(
        "load_report_interval_ms",
        "scalableTopicLoadReportInterval",
        "loadReportIntervalMs",
        "duration",
        minimum=1,
    ),
    Knob(
        "load_report_rate_change_threshold",
        "scalableTopicLoadReportRateChangeThreshold",
        "loadReportRateChangeThreshold",
        "fraction",
    ),
)

#: The four rates of a ``SegmentLoadStats`` record, in the order used by thresholds and loads.
METRICS = ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
#: The same four rates as spelled in JSON (``SegmentLoadStats`` keys, messages).
METRIC_JSON_KEYS = ("msgRateIn", "bytesRateIn", "msgRateOut", "bytesRateOut")

#: Every knob, in the order of PIP-483's configuration table (CLI flags and docs are built from it).
KNOBS = _KNOBS

_KNOB_BY_JSON_KEY = {knob.json_key: knob for knob in _KNOBS}
_KNOB_BY_FIELD = {knob.field: knob for knob in _KNOBS}

#: Every ``broker.conf`` key of PIP-483's configuration table, as the policy reads them.
BROKER_CONFIG_KEYS = frozenset(knob.conf_key for knob in _KNOBS)


def broker_config_key(field: str) -> str:
    """The ``broker.conf`` key of a policy field: ``split_cooldown_ms`` ->
    ``scalableTopicSplitCooldown`` (to report the keys of :attr:`InvalidAutoScalePolicy.fields`).

    Raises:
        KeyError: not a policy field.
    """
    return _KNOB_BY_FIELD[field].conf_key


_CONF_PARSERS: dict[str, Callable[[str], object]] = {
    "bool": units.parse_bool,
    "int": units.parse_int,
    "duration": units.parse_duration_ms,
    "rate": units.parse_rate,
    "bytes": units.parse_bytes,
    "fraction": units.parse_fraction,
}


def _check_knob_value(knob: Knob, value: object, name: str) -> object:
    """Type- and range-check one knob value alone; returns it normalised (rates -> float).

    Raises:
        InvalidAutoScalePolicy: naming the value ``name`` (its JSON or broker.conf key).
    """
    try:
        if knob.kind == "bool":
            if not isinstance(value, bool):
                raise InvalidAutoScalePolicy(f"{name} must be a boolean, got {value!r}")
            return value
        if knob.kind in ("int", "duration"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidAutoScalePolicy(f"{name} must be an integer, got {value!r}")
            if value < knob.minimum:
                raise InvalidAutoScalePolicy(f"{name} must be >= {knob.minimum}, got {value}")
            if knob.maximum is not None and value > knob.maximum:
                raise InvalidAutoScalePolicy(f"{name} must be <= {knob.maximum}, got {value}")
            return value
        return check_rate(name, value)
    except InvalidAutoScalePolicy as exc:
        raise InvalidAutoScalePolicy(str(exc), (knob.field,)) from None


@dataclass(frozen=True)
class _Ordered:
    """A rule between two fields: ``lower < upper`` (``strict``) or ``lower <= upper``."""

    lower: str
    upper: str
    strict: bool
    why: str


#: The rules between values, checked once on merged values (never a value against a default
#: of a key set alongside it).
_CROSS_FIELD_RULES: tuple[_Ordered, ...] = (
    _Ordered("min_segments", "max_segments", strict=False, why=""),
    *(
        _Ordered(
            f"merge_{metric}_threshold",
            f"split_{metric}_threshold",
            strict=True,
            why="the gap is the dead band that prevents flip-flopping",
        )
        for metric in ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
    ),
)


def _show(value: object) -> str:
    """A value as written in a message: ``50000000`` rather than ``5e+07`` or ``50000000.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        return str(int(value))
    return str(value)


def _check_cross_field_rules(values: Mapping[str, Any], describe: Callable[[str], str]) -> None:
    """Check :data:`_CROSS_FIELD_RULES` on a full set of (already individually valid) values.

    ``describe(field)`` names a value in the message, e.g. ``"splitMsgRateInThreshold (300)"``
    or ``"scalableTopicMergeMsgRateInThreshold (default 1000)"``.

    Raises:
        InvalidAutoScalePolicy: the first rule broken, naming both fields.
    """
    for rule in _CROSS_FIELD_RULES:
        lower, upper = values[rule.lower], values[rule.upper]
        if rule.strict and not lower < upper:
            message = f"{describe(rule.upper)} must be above {describe(rule.lower)}"
        elif not rule.strict and not lower <= upper:
            message = f"{describe(rule.lower)} must not exceed {describe(rule.upper)}"
        else:
            continue
        why = f": {rule.why}" if rule.why else ""
        raise InvalidAutoScalePolicy(message + why, (rule.lower, rule.upper))


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
            normalised = _check_knob_value(knob, getattr(self, knob.field), knob.json_key)
            object.__setattr__(self, knob.field, normalised)
        _check_cross_field_rules(
            self.__dict__,
            lambda field: f"{_KNOB_BY_FIELD[field].json_key} ({_show(getattr(self, field))})",
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
        Each value is parsed and range-checked alone, then the rules between values are checked
        once on the merged result, so ``split=300`` with ``merge=30`` is fine although 300 is
        below the default merge threshold.

        Raises:
            InvalidAutoScalePolicy: a value does not parse or is out of range (the message names
                its key; :attr:`~InvalidAutoScalePolicy.fields` holds its field), or values
                conflict (the message names every key involved, with the value of each and
                whether it is a default; ``fields`` holds them all).
        """
        values: dict[str, object] = {}
        for knob in _KNOBS:
            raw = conf.get(knob.conf_key)
            if raw is None:
                continue
            try:
                parsed = _CONF_PARSERS[knob.kind](raw)
            except units.InvalidConfigValueError as exc:
                raise InvalidAutoScalePolicy(f"{knob.conf_key}: {exc}", (knob.field,)) from exc
            values[knob.field] = _check_knob_value(knob, parsed, knob.conf_key)
        merged = {field.name: field.default for field in fields(cls)} | values

        def describe(field: str) -> str:
            key = broker_config_key(field)
            if field in values:
                return f"{key}={conf[key].strip()}"
            return f"{key} (default {_show(merged[field])})"

        _check_cross_field_rules(merged, describe)
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
    Absent keys and ``null`` mean "not set". Each set value is type- and range-checked here, alone;
    the rules between values are checked when the override is resolved against the levels below
    it (:func:`resolve_policy`), never against defaults here.

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
                normalised = _check_knob_value(knob, value, knob.json_key)
                object.__setattr__(self, knob.field, normalised)

    def set_fields(self) -> dict[str, Any]:
        """The fields this override sets, by Python attribute name."""
        return {
            knob.field: getattr(self, knob.field)
            for knob in _KNOBS
            if getattr(self, knob.field) is not None
        }

    def to_json(self) -> dict[str, object]:
        """The set fields under their camelCase keys; unset fields are omitted."""
        return {
            knob.json_key: getattr(self, knob.field)
            for knob in _KNOBS
            if getattr(self, knob.field) is not None
        }

    @classmethod
    def from_text(cls, settings: Mapping[str, str]) -> AutoScalePolicyOverride:
        """Parse ``{field: text}`` as a person types it, with ``broker.conf``'s units: durations
        ``30s``/``5m``/``250ms`` (a bare number is seconds), sizes ``50MB``, fractions ``25%``,
        booleans ``true``/``on``, plain numbers.

        Raises:
            InvalidAutoScalePolicy: an unknown field, a value that does not parse or is out of
                range (the message names the JSON key).
        """
        values: dict[str, Any] = {}
        for field, text in settings.items():
            knob = _KNOB_BY_FIELD.get(field)
            if knob is None:
                raise InvalidAutoScalePolicy(f"unknown auto-scale policy setting {field!r}")
            try:
                values[field] = _CONF_PARSERS[knob.kind](text)
            except units.InvalidConfigValueError as exc:
                raise InvalidAutoScalePolicy(f"{knob.json_key}: {exc}", (field,)) from exc
        return cls(**values)

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
            knob = _KNOB_BY_JSON_KEY.get(key)
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

    Each override is checked after resolution against the levels below it: the namespace's
    values over the broker's, then the topic's over both. A value is never checked against a
    default its own level replaces, so a topic may set ``split=300`` and ``merge=30`` together.

    Raises:
        InvalidAutoScalePolicy: a level makes the merged result inconsistent (e.g. a topic lowers
            a split threshold below the namespace's merge threshold); the message names the
            level, every key involved and the level each value came from, and ``fields`` holds
            the fields. The admin API should resolve a new override against the current levels
            before storing it.
    """
    if namespace is None and topic is None:
        return broker
    values: dict[str, Any] = {knob.field: getattr(broker, knob.field) for knob in _KNOBS}
    source = dict.fromkeys(values, "broker")
    for level, override in (("namespace", namespace), ("topic", topic)):
        if override is None:
            continue
        for field, value in override.set_fields().items():
            values[field], source[field] = value, level

        def describe(field: str) -> str:
            knob = _KNOB_BY_FIELD[field]
            return f"{knob.json_key} ({_show(values[field])}, from the {source[field]})"

        try:
            _check_cross_field_rules(values, describe)
        except InvalidAutoScalePolicy as exc:
            raise InvalidAutoScalePolicy(
                f"the {level} auto-scale override makes the policy invalid: {exc}", exc.fields
            ) from exc
    return AutoScalePolicy(**values)


__all__ = [
    "BROKER_CONFIG_KEYS",
    "KNOBS",
    "METRICS",
    "METRIC_JSON_KEYS",
    "AutoScalePolicy",
    "AutoScalePolicyOverride",
    "InvalidAutoScalePolicy",
    "Knob",
    "broker_config_key",
    "check_rate",
    "resolve_policy",
]
