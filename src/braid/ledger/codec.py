"""JSON documents of a managed ledger and of its cursors, as stored in the metadata store.

The field names follow Pulsar's ``MLDataFormats.proto`` in camelCase (``ledgerId``, ``entries``,
``size``, ``timestamp``, PIP-470's ``bookieClusterName``; ``markDeleteLedgerId`` ...), so the
documents can be read beside the PIPs. Decoding validates every field and raises
:class:`ManagedLedgerMetadataError` instead of letting a ``KeyError`` escape.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from braid.ledger.api import LedgerInfo, ManagedLedgerMetadataError, Position

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ManagedLedgerInfo:
    """The managed ledger's node: its ledgers (oldest first), termination and properties."""

    ledgers: tuple[LedgerInfo, ...] = ()
    terminated: bool = False
    terminated_position: Position | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ManagedCursorInfo:
    """A cursor's state: mark-delete position, individually deleted ranges and properties.

    The same document is a cursor-ledger snapshot and the cursor's node. In the node,
    ``cursors_ledger_id`` / ``bookie_cluster_name`` (PIP-470's ``ManagedCursorInfo``) name the
    ledger holding newer snapshots and its storage cluster; ``-1`` / ``None`` when the node itself
    is the latest state (after a clean close or a takeover).

    ``batch_deleted_indexes`` are Pulsar's ``batchedEntryDeletionIndexInfo`` (PIP-54): for a batch
    entry acknowledged only in part, the ``deleteSet`` bit words of the messages still
    *unacknowledged* (bit ``i`` of word ``i // 64`` set = message ``i`` is still to be delivered),
    signed 64-bit words as the wire's ``ack_set`` carries them.
    """

    mark_delete: Position
    individually_deleted: tuple[tuple[Position, Position], ...] = ()
    batch_deleted_indexes: tuple[tuple[Position, tuple[int, ...]], ...] = ()
    properties: Mapping[str, int] = field(default_factory=dict)
    last_active_ms: int = 0
    cursors_ledger_id: int = -1
    bookie_cluster_name: str | None = None


def _fail(what: str, exc: Exception | None = None) -> ManagedLedgerMetadataError:
    return ManagedLedgerMetadataError(
        f"corrupt metadata document: {what}" + (f" ({exc})" if exc else "")
    )


def _load(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail("not JSON", exc) from exc
    if not isinstance(doc, dict):
        raise _fail("not an object")
    version = doc.get("formatVersion", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise _fail(f"unknown formatVersion {version!r}")
    return doc


def _int(doc: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(f"{key!r} must be an integer, got {value!r}")
    return value


def _position(doc: Any) -> Position:
    if not isinstance(doc, dict):
        raise _fail(f"position must be an object, got {doc!r}")
    return Position(_int(doc, "ledgerId"), _int(doc, "entryId"))


def _position_json(p: Position) -> dict[str, int]:
    return {"ledgerId": p.ledger_id, "entryId": p.entry_id}


def encode_ledger_info(info: ManagedLedgerInfo) -> bytes:
    """Serialise the managed ledger's node."""
    doc: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION,
        "ledgers": [
            {
                "ledgerId": li.ledger_id,
                "entries": li.entries,
                "size": li.size,
                "timestamp": li.timestamp_ms,
                "bookieClusterName": li.bookie_cluster_name,
            }
            for li in info.ledgers
        ],
        "terminated": info.terminated,
        "terminatedPosition": (
            _position_json(info.terminated_position) if info.terminated_position else None
        ),
        "properties": dict(info.properties),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_ledger_info(data: bytes) -> ManagedLedgerInfo:
    """Parse the managed ledger's node.

    Raises:
        ManagedLedgerMetadataError: the document is not a valid managed-ledger node.
    """
    doc = _load(data)
    raw_ledgers = doc.get("ledgers", [])
    if not isinstance(raw_ledgers, list):
        raise _fail("'ledgers' must be a list")
    ledgers: list[LedgerInfo] = []
    for raw in raw_ledgers:
        if not isinstance(raw, dict):
            raise _fail("ledger entry must be an object")
        cluster = raw.get("bookieClusterName")
        if not isinstance(cluster, str) or not cluster:
            raise _fail(f"ledger {raw.get('ledgerId')!r} has no bookieClusterName")
        ledgers.append(
            LedgerInfo(
                ledger_id=_int(raw, "ledgerId"),
                entries=_int(raw, "entries", 0),
                size=_int(raw, "size", 0),
                timestamp_ms=_int(raw, "timestamp", 0),
                bookie_cluster_name=cluster,
            )
        )
    if any(a.ledger_id >= b.ledger_id for a, b in itertools.pairwise(ledgers)):
        # Positions compare by ledger id, so the list must be strictly increasing.
        raise _fail("ledger ids are not increasing")
    terminated = doc.get("terminated", False)
    if not isinstance(terminated, bool):
        raise _fail("'terminated' must be a boolean")
    raw_pos = doc.get("terminatedPosition")
    properties = doc.get("properties", {})
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
    ):
        raise _fail("'properties' must map strings to strings")
    return ManagedLedgerInfo(
        ledgers=tuple(ledgers),
        terminated=terminated,
        terminated_position=_position(raw_pos) if raw_pos is not None else None,
        properties=properties,
    )


def encode_cursor_info(info: ManagedCursorInfo) -> bytes:
    """Serialise a cursor's node."""
    doc: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION,
        "markDeleteLedgerId": info.mark_delete.ledger_id,
        "markDeleteEntryId": info.mark_delete.entry_id,
        # [ledgerId, firstEntryId, lastEntryId]: ranges never span ledgers (range_set.py).
        "individualDeletedMessages": [
            [first.ledger_id, first.entry_id, last.entry_id]
            for first, last in info.individually_deleted
        ],
        "batchedEntryDeletionIndexInfo": [
            {"position": _position_json(position), "deleteSet": list(words)}
            for position, words in info.batch_deleted_indexes
        ],
        "properties": dict(info.properties),
        "lastActive": info.last_active_ms,
        "cursorsLedgerId": info.cursors_ledger_id,
        "bookieClusterName": info.bookie_cluster_name,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _batch_deleted_indexes(raw: Any) -> tuple[tuple[Position, tuple[int, ...]], ...]:
    if not isinstance(raw, list):
        raise _fail("'batchedEntryDeletionIndexInfo' must be a list")
    out: list[tuple[Position, tuple[int, ...]]] = []
    for item in raw:
        if not isinstance(item, dict):
            raise _fail(f"bad batch deletion index {item!r}")
        words = item.get("deleteSet")
        if not isinstance(words, list) or not all(
            isinstance(w, int) and not isinstance(w, bool) and _INT64_MIN <= w <= _INT64_MAX
            for w in words
        ):
            raise _fail(f"'deleteSet' must be a list of 64-bit integers, got {words!r}")
        out.append((_position(item.get("position")), tuple(words)))
    return tuple(out)


def decode_cursor_info(data: bytes) -> ManagedCursorInfo:
    """Parse a cursor's node.

    Raises:
        ManagedLedgerMetadataError: the document is not a valid cursor node.
    """
    doc = _load(data)
    ranges: list[tuple[Position, Position]] = []
    raw_ranges = doc.get("individualDeletedMessages", [])
    if not isinstance(raw_ranges, list):
        raise _fail("'individualDeletedMessages' must be a list")
    for raw in raw_ranges:
        if (
            not isinstance(raw, list)
            or len(raw) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
            or raw[1] < 0
            or raw[2] < raw[1]
        ):
            raise _fail(f"bad deleted range {raw!r}")
        ranges.append((Position(raw[0], raw[1]), Position(raw[0], raw[2])))
    properties = doc.get("properties", {})
    batch_indexes = _batch_deleted_indexes(doc.get("batchedEntryDeletionIndexInfo", []))
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in properties.items()
    ):
        raise _fail("cursor 'properties' must map strings to integers")
    cluster = doc.get("bookieClusterName")
    if cluster is not None and not isinstance(cluster, str):
        raise _fail("'bookieClusterName' must be a string")
    return ManagedCursorInfo(
        mark_delete=Position(_int(doc, "markDeleteLedgerId"), _int(doc, "markDeleteEntryId")),
        individually_deleted=tuple(ranges),
        batch_deleted_indexes=batch_indexes,
        properties=properties,
        last_active_ms=_int(doc, "lastActive", 0),
        cursors_ledger_id=_int(doc, "cursorsLedgerId", -1),
        bookie_cluster_name=cluster,
    )
