"""Ledger metadata documents and paths in a storage cluster's metadata root (pure, no I/O).

A cluster named ``c`` keeps its state under ``/storage/c``:

* ``/storage/c/idgen`` - the ledger-id generator: the next free id as decimal ASCII, advanced with
  compare-and-swap;
* ``/storage/c/ledgers/<id>`` - one JSON document per ledger (camelCase keys, custom metadata values
  in base64), updated with compare-and-swap.
"""

from __future__ import annotations

import base64
import binascii
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
        "ensemble": list(md.ensemble),
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


def decode_ledger_metadata(raw: bytes) -> LedgerMetadata:
    """Parse a ledger metadata document.

    Raises:
        InvalidLedgerMetadata: not JSON, a field missing or of the wrong type.
    """
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise InvalidLedgerMetadata("ledger metadata is not a JSON object")
        ensemble = doc["ensemble"]
        custom = doc.get("customMetadata", {})
        cluster = doc["clusterName"]
        if not isinstance(ensemble, list) or not all(isinstance(b, str) for b in ensemble):
            raise InvalidLedgerMetadata("ledger metadata 'ensemble' is not a list of bookie ids")
        if not isinstance(custom, dict) or not isinstance(cluster, str):
            raise InvalidLedgerMetadata("ledger metadata has a malformed field")
        write_quorum, ack_quorum = _int(doc, "writeQuorum"), _int(doc, "ackQuorum")
        if not 1 <= ack_quorum <= write_quorum <= len(ensemble):
            raise InvalidLedgerMetadata("ledger metadata has impossible quorums")
        return LedgerMetadata(
            ledger_id=_int(doc, "ledgerId"),
            cluster_name=cluster,
            state=LedgerState(doc["state"]),
            ensemble=tuple(ensemble),
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            last_entry_id=_int(doc, "lastEntryId"),
            length=_int(doc, "length"),
            created_ms=_int(doc, "createdMs"),
            custom_metadata={str(k): base64.b64decode(v, validate=True) for k, v in custom.items()},
        )
    except InvalidLedgerMetadata:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidLedgerMetadata(f"cannot decode ledger metadata: {exc}") from exc
