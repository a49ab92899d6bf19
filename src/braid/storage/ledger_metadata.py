"""Ledger metadata documents and paths in a storage cluster's metadata root (pure, no I/O).

A cluster named ``c`` keeps its state under ``/storage/c``:

* ``/storage/c/idgen`` - the ledger-id generator: the next free id as decimal ASCII, advanced with
  compare-and-swap;
* ``/storage/c/ledgers/<id>`` - one JSON document per ledger (camelCase keys, custom metadata values
  in base64), updated with compare-and-swap.

A ledger's bookies are recorded per fragment: ``"ensembles": [{"firstEntryId": 0, "bookies":
[...]}, ...]`` in entry order (BookKeeper's ``LedgerMetadata`` segments). Documents written before
ensemble changes existed carry a single ``"ensemble": [...]``; they decode as one fragment from
entry 0, so old data directories still open. New documents carry only ``ensembles`` (an older
Braid cannot read a ledger that changed ensembles, and must not guess).

The edits the ledger client makes to a document are pure functions here:
:func:`with_ensemble_change` (a writer's or a recovery's new fragment) and
:func:`with_replaced_bookie` (auto-recovery moved a fragment's replica).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Mapping

from braid.storage.api import (
    InvalidClusterName,
    InvalidLedgerMetadata,
    LedgerMetadata,
    LedgerState,
)

_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_cluster_name(name: str) -> str:
    """Return ``name`` if it can be a storage-cluster name (a metadata path segment).

    Raises:
        InvalidClusterName: empty, too long, or with characters other than letters, digits, ``.``,
            ``_`` and ``-``.
    """
    if not isinstance(name, str) or not _CLUSTER_NAME.match(name):
        raise InvalidClusterName(f"invalid storage cluster name {name!r}")
    return name


def cluster_root(cluster_name: str) -> str:
    """The cluster's metadata root, ``/storage/<cluster>``."""
    return f"/storage/{validate_cluster_name(cluster_name)}"


def idgen_path(cluster_name: str) -> str:
    """Path of the cluster's ledger-id generator."""
    return f"{cluster_root(cluster_name)}/idgen"


def ledgers_path(cluster_name: str) -> str:
    """Parent of the cluster's ledger documents."""
    return f"{cluster_root(cluster_name)}/ledgers"


def ledger_path(cluster_name: str, ledger_id: int) -> str:
    """Path of one ledger's metadata document."""
    return f"{ledgers_path(cluster_name)}/{ledger_id}"


def validate_custom_metadata(custom: Mapping[str, bytes] | None) -> dict[str, bytes]:
    """Copy custom metadata, checking it maps ``str`` to ``bytes``."""
    out: dict[str, bytes] = {}
    for key, value in (custom or {}).items():
        if not isinstance(key, str) or not isinstance(value, bytes | bytearray):
            raise InvalidLedgerMetadata(f"custom metadata must map str to bytes, got {key!r}")
        out[key] = bytes(value)
    return out


def encode_ledger_metadata(md: LedgerMetadata) -> bytes:
    """Serialise ``md`` as the JSON document stored at :func:`ledger_path`."""
    doc = {
        "ledgerId": md.ledger_id,
        "clusterName": md.cluster_name,
        "state": md.state.value,
        "ensembles": [
            {"firstEntryId": start, "bookies": list(bookies)}
            for start, bookies in md.ensembles.items()
        ],
        "writeQuorum": md.write_quorum,
        "ackQuorum": md.ack_quorum,
        "lastEntryId": md.last_entry_id,
        "length": md.length,
        "createdMs": md.created_ms,
        "customMetadata": {
            k: base64.b64encode(v).decode("ascii") for k, v in sorted(md.custom_metadata.items())
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _int(doc: Mapping[str, object], key: str) -> int:
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidLedgerMetadata(f"ledger metadata field {key!r} is not an integer")
    return value


def _bookie_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(b, str) for b in value):
        raise InvalidLedgerMetadata(f"ledger metadata {what} is not a list of bookie ids")
    return tuple(value)


def _ensembles(doc: Mapping[str, object]) -> dict[int, tuple[str, ...]]:
    if "ensembles" not in doc:  # a document from before ensemble changes: one fragment
        return {0: _bookie_list(doc["ensemble"], "'ensemble'")}
    raw = doc["ensembles"]
    if not isinstance(raw, list) or not raw:
        raise InvalidLedgerMetadata("ledger metadata 'ensembles' is not a non-empty list")
    out: dict[int, tuple[str, ...]] = {}
    for item in raw:
        if not isinstance(item, dict):
            raise InvalidLedgerMetadata("ledger metadata 'ensembles' holds a non-object")
        start = _int(item, "firstEntryId")
        if out and start <= max(out):
            raise InvalidLedgerMetadata("ledger metadata 'ensembles' are not in entry order")
        out[start] = _bookie_list(item["bookies"], f"ensemble at entry {start}")
    return out


def decode_ledger_metadata(raw: bytes) -> LedgerMetadata:
    """Parse a ledger metadata document (either form, see the module docstring).

    Raises:
        InvalidLedgerMetadata: not JSON, a field missing or of the wrong type, fragments out of
            order or of different sizes, impossible quorums.
    """
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise InvalidLedgerMetadata("ledger metadata is not a JSON object")
        custom = doc.get("customMetadata", {})
        cluster = doc["clusterName"]
        if not isinstance(custom, dict) or not isinstance(cluster, str):
            raise InvalidLedgerMetadata("ledger metadata has a malformed field")
        return LedgerMetadata(
            ledger_id=_int(doc, "ledgerId"),
            cluster_name=cluster,
            state=LedgerState(doc["state"]),
            ensembles=_ensembles(doc),
            write_quorum=_int(doc, "writeQuorum"),
            ack_quorum=_int(doc, "ackQuorum"),
            last_entry_id=_int(doc, "lastEntryId"),
            length=_int(doc, "length"),
            created_ms=_int(doc, "createdMs"),
            custom_metadata={str(k): base64.b64decode(v, validate=True) for k, v in custom.items()},
        )
    except InvalidLedgerMetadata:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidLedgerMetadata(f"cannot decode ledger metadata: {exc}") from exc


def with_ensemble_change(
    md: LedgerMetadata, first_entry_id: int, ensemble: tuple[str, ...]
) -> LedgerMetadata:
    """``md`` with a new last fragment ``ensemble`` from ``first_entry_id`` on.

    A change at the last fragment's own first entry replaces that fragment (no entry was
    acknowledged in it): BookKeeper's rule, so repeated failures do not pile up empty fragments.

    Raises:
        InvalidLedgerMetadata: ``first_entry_id`` before the last fragment, or a bad ensemble.
    """
    last = md.last_fragment_start
    if first_entry_id < last:
        raise InvalidLedgerMetadata(
            f"ledger {md.ledger_id}: ensemble change at entry {first_entry_id} is before the "
            f"last fragment (entry {last})"
        )
    ensembles = dict(md.ensembles)
    ensembles[first_entry_id] = tuple(ensemble)
    return dataclasses.replace(md, ensembles=ensembles)


def with_replaced_bookie(
    md: LedgerMetadata, first_entry_id: int, old: str, new: str
) -> LedgerMetadata:
    """``md`` with bookie ``old`` replaced by ``new`` in the fragment starting at
    ``first_entry_id`` (auto-recovery copied that fragment's replica to ``new``).

    Raises:
        InvalidLedgerMetadata: no such fragment, or ``old`` is not in it.
    """
    ensemble = md.ensembles.get(first_entry_id)
    if ensemble is None or old not in ensemble:
        raise InvalidLedgerMetadata(
            f"ledger {md.ledger_id}: no fragment at entry {first_entry_id} holding bookie {old}"
        )
    ensembles = dict(md.ensembles)
    ensembles[first_entry_id] = tuple(new if b == old else b for b in ensemble)
    return dataclasses.replace(md, ensembles=ensembles)
