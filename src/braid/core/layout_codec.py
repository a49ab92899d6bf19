"""PIP-468's ``ScalableTopicMetadata``: the JSON document a :class:`SegmentLayout` is stored as.

The document is the PIP's, camelCase keys and all: ``epoch``, ``nextSegmentId``, ``segments``
keyed by id string (each with an inclusive ``hashRange``, ``state``, ``parentIds``, ``childIds``,
``createdAtEpoch``, ``sealedAtEpoch``), ``properties``, plus Braid's ``createdAtMs``/``sealedAtMs``
per segment (written only when non-zero, so the PIP's own example round-trips unchanged),
Braid's ``legacyTopicName`` of a migrated topic's legacy roots (ADR 0063, written only when set)
and PIP-483's optional top-level ``autoScalePolicy``.

Reading is strict: unknown keys, duplicate keys, ``NaN``/``Infinity`` and malformed values are
rejected with :class:`~braid.core.segment_info.CorruptLayout`, so a rewrite never silently drops
data written by a newer version; the decoded layout then passes the same invariants as a computed
one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout, freeze_json, thaw_json
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout, SegmentInfo, SegmentState, check_long


def layout_to_metadata(layout: SegmentLayout) -> dict[str, object]:
    """The PIP-468 ``ScalableTopicMetadata`` document of ``layout``.

    Keys as in the PIP; ``createdAtMs``/``sealedAtMs`` are written only when non-zero (so the
    PIP's own example, which has none, round-trips unchanged) and ``autoScalePolicy`` only when
    set; Braid's ``entryBuckets`` (PIP-486 buckets per segment) only when above 1.
    """
    doc: dict[str, object] = {
        "epoch": layout.epoch,
        "nextSegmentId": layout.next_segment_id,
        "segments": {str(sid): _segment_to_doc(info) for sid, info in layout.segments.items()},
        "properties": dict(layout.properties),
    }
    if layout.auto_scale_policy is not None:
        doc["autoScalePolicy"] = thaw_json(layout.auto_scale_policy)
    if layout.entry_buckets != 1:
        doc["entryBuckets"] = layout.entry_buckets
    return doc


def layout_from_metadata(doc: object) -> SegmentLayout:
    """Load and validate a ``ScalableTopicMetadata`` document.

    ``epoch``, ``nextSegmentId`` and ``segments`` are required; ``properties`` defaults to
    ``{}`` and ``autoScalePolicy`` to none. Unknown keys are rejected rather than dropped, so a
    rewrite never silently loses data written by a newer version.

    Raises:
        CorruptLayout: a field is missing or malformed, or the DAG is inconsistent.
    """
    top = _expect_object(doc, "the layout document")
    _check_keys(top, _TOP_REQUIRED, _TOP_OPTIONAL, "the layout document")
    raw_segments = _expect_object(top["segments"], "segments")
    segments: dict[int, SegmentInfo] = {}
    for key, raw in raw_segments.items():
        info = _segment_from_doc(key, raw)
        segments[info.segment_id] = info
    policy = top.get("autoScalePolicy")
    return SegmentLayout(
        epoch=check_long("epoch", top["epoch"]),
        next_segment_id=check_long("nextSegmentId", top["nextSegmentId"]),
        segments=segments,
        properties=_expect_object(top.get("properties", {}), "properties"),  # type: ignore[arg-type]
        auto_scale_policy=None if policy is None else freeze_json(policy, "autoScalePolicy"),
        entry_buckets=top.get("entryBuckets", 1),  # type: ignore[arg-type]
    )


def encode_layout(layout: SegmentLayout) -> bytes:
    """``layout``'s metadata document as compact JSON bytes.

    Non-ASCII text is written as ``\\u`` escapes, so even a string holding a lone surrogate
    (which ``json.loads`` can produce) encodes and round-trips.
    """
    return json.dumps(layout_to_metadata(layout), separators=(",", ":"), allow_nan=False).encode(
        "ascii"
    )


def decode_layout(data: bytes | str) -> SegmentLayout:
    """Parse and validate a JSON metadata document.

    Raises:
        CorruptLayout: not UTF-8, not JSON (duplicate keys and NaN/Infinity included), or the
            document is rejected by :func:`layout_from_metadata`.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptLayout(f"layout JSON is not valid UTF-8: {exc}") from exc
    elif isinstance(data, str):
        text = data
    else:
        raise CorruptLayout(f"layout JSON must be bytes or str, got {type(data).__name__}")
    try:
        doc = json.loads(
            text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        raise CorruptLayout(f"layout document is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise CorruptLayout("layout document is nested too deeply") from exc
    return layout_from_metadata(doc)


_TOP_REQUIRED = frozenset({"epoch", "nextSegmentId", "segments"})
_TOP_OPTIONAL = frozenset({"properties", "autoScalePolicy", "entryBuckets"})
_SEGMENT_REQUIRED = frozenset(
    {
        "segmentId",
        "hashRange",
        "state",
        "parentIds",
        "childIds",
        "createdAtEpoch",
        "sealedAtEpoch",
    }
)
_SEGMENT_OPTIONAL = frozenset({"createdAtMs", "sealedAtMs", "legacyTopicName"})
_RANGE_KEYS = frozenset({"start", "end"})


def _segment_to_doc(info: SegmentInfo) -> dict[str, object]:
    doc: dict[str, object] = {
        "segmentId": info.segment_id,
        "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
        "state": info.state.value,
        "parentIds": list(info.parent_ids),
        "childIds": list(info.child_ids),
        "createdAtEpoch": info.created_at_epoch,
        "sealedAtEpoch": info.sealed_at_epoch,
    }
    if info.created_at_ms:
        doc["createdAtMs"] = info.created_at_ms
    if info.sealed_at_ms:
        doc["sealedAtMs"] = info.sealed_at_ms
    if info.legacy_topic_name is not None:
        doc["legacyTopicName"] = info.legacy_topic_name
    return doc


def _segment_from_doc(key: str, raw: object) -> SegmentInfo:
    where = f"segment {key!r}"
    seg = _expect_object(raw, where)
    _check_keys(seg, _SEGMENT_REQUIRED, _SEGMENT_OPTIONAL, where)
    sid = check_long(f"{where}: segmentId", seg["segmentId"])
    if key != str(sid):
        raise CorruptLayout(f"{where} is keyed differently from its segmentId {sid}")
    where = f"segment {sid}"
    rng = _expect_object(seg["hashRange"], f"{where}: hashRange")
    _check_keys(rng, _RANGE_KEYS, frozenset(), f"{where}: hashRange")
    try:
        hash_range = HashRange(rng["start"], rng["end"])  # type: ignore[arg-type]
    except InvalidInputError as exc:
        raise CorruptLayout(f"{where}: {exc}") from exc
    state = seg["state"]
    if state not in (SegmentState.ACTIVE.value, SegmentState.SEALED.value):
        raise CorruptLayout(f"{where}: unknown state {state!r} (expected 'ACTIVE' or 'SEALED')")
    ids: dict[str, tuple[int, ...]] = {}
    for name in ("parentIds", "childIds"):
        value = seg[name]
        if not isinstance(value, list):
            raise CorruptLayout(f"{where}: {name} must be an array of ids, got {value!r}")
        ids[name] = tuple(check_long(f"{where}: {name} entry", i) for i in value)
    return SegmentInfo(
        segment_id=sid,
        hash_range=hash_range,
        state=SegmentState(state),
        parent_ids=ids["parentIds"],
        child_ids=ids["childIds"],
        created_at_epoch=check_long(f"{where}: createdAtEpoch", seg["createdAtEpoch"]),
        sealed_at_epoch=check_long(f"{where}: sealedAtEpoch", seg["sealedAtEpoch"]),
        created_at_ms=check_long(f"{where}: createdAtMs", seg.get("createdAtMs", 0)),
        sealed_at_ms=check_long(f"{where}: sealedAtMs", seg.get("sealedAtMs", 0)),
        legacy_topic_name=_legacy_name(where, seg.get("legacyTopicName")),
    )


def _legacy_name(where: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise CorruptLayout(f"{where}: legacyTopicName must be a string, got {value!r}")


def _expect_object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise CorruptLayout(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def _check_keys(
    obj: Mapping[str, object], required: frozenset[str], optional: frozenset[str], where: str
) -> None:
    missing = sorted(required - obj.keys())
    if missing:
        raise CorruptLayout(f"{where} is missing the field(s) {', '.join(missing)}")
    unknown = sorted(str(k) for k in obj.keys() - required - optional)
    if unknown:
        raise CorruptLayout(f"{where} has unknown field(s) {', '.join(unknown)}")


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise CorruptLayout(f"layout JSON repeats the key {key!r} in one object")
        out[key] = value
    return out


def _reject_constant(name: str) -> object:
    raise CorruptLayout(f"layout JSON holds the non-standard constant {name}")


__all__ = ["decode_layout", "encode_layout", "layout_from_metadata", "layout_to_metadata"]
