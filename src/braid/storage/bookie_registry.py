"""Where bookie processes announce themselves in a storage cluster's metadata root, and the
documents they write there (pure, no I/O).

A cluster named ``c`` (its root is ``/storage/c``, see :mod:`braid.storage.ledger_metadata`) keeps:

* ``/storage/c/bookies/available/<bookieId>`` - an *ephemeral* node per writable bookie, holding
  a :class:`BookieRegistration` (JSON: address, port, rack, state). BookKeeper's
  ``/ledgers/available``;
* ``/storage/c/bookies/readonly/<bookieId>`` - the same for a bookie whose disk is full (it
  serves reads, refuses new entries). BookKeeper's ``/ledgers/available/readonly``. A bookie is
  in at most one of the two lists; it moves between them as its disk fills and frees;
* ``/storage/c/bookies/cookies/<bookieId>`` - a persistent :class:`Cookie`: which directories
  hold that bookie's data, for which cluster instance. BookKeeper's ``/ledgers/cookies``;
* ``/storage/c/instanceid`` - the cluster instance id (a UUID, made once), which every cookie
  names so a bookie of another cluster cannot join by mistake.

A bookie id is ``advertisedAddress:bookiePort`` unless ``bookieId`` is configured (BookKeeper's
rule); it is a single metadata path segment.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass

from braid.core.errors import InvalidInputError
from braid.storage.api import StorageError
from braid.storage.ledger_metadata import cluster_root

_BOOKIE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,254}$")


class InvalidBookieId(StorageError, InvalidInputError):
    """A bookie id that cannot be a metadata path segment."""


class InvalidRegistration(StorageError, InvalidInputError):
    """A registration or cookie document that does not decode."""


def validate_bookie_id(bookie_id: str) -> str:
    """Return ``bookie_id`` if it can name a bookie (letters, digits, ``.``, ``_``, ``:``, ``-``).

    Raises:
        InvalidBookieId: anything else (it must be one metadata path segment).
    """
    if not isinstance(bookie_id, str) or not _BOOKIE_ID.match(bookie_id):
        raise InvalidBookieId(f"invalid bookie id {bookie_id!r}")
    return bookie_id


class BookieState(enum.Enum):
    """Which list a registration is in."""

    WRITABLE = "writable"
    READ_ONLY = "readonly"


def bookies_root(cluster_name: str) -> str:
    return f"{cluster_root(cluster_name)}/bookies"


def available_path(cluster_name: str) -> str:
    """Parent of the writable bookies' registrations."""
    return f"{bookies_root(cluster_name)}/available"


def readonly_path(cluster_name: str) -> str:
    """Parent of the read-only bookies' registrations."""
    return f"{bookies_root(cluster_name)}/readonly"


def registration_path(cluster_name: str, bookie_id: str, state: BookieState) -> str:
    parent = (
        available_path(cluster_name)
        if state is BookieState.WRITABLE
        else readonly_path(cluster_name)
    )
    return f"{parent}/{validate_bookie_id(bookie_id)}"


def cookie_path(cluster_name: str, bookie_id: str) -> str:
    return f"{bookies_root(cluster_name)}/cookies/{validate_bookie_id(bookie_id)}"


def instance_id_path(cluster_name: str) -> str:
    return f"{cluster_root(cluster_name)}/instanceid"


@dataclass(frozen=True, slots=True)
class BookieRegistration:
    """What a running bookie announces: where to reach it and its state."""

    bookie_id: str
    host: str
    port: int
    state: BookieState = BookieState.WRITABLE
    rack: str | None = None
    read_only_reason: str | None = None
    http_port: int | None = None

    def __post_init__(self) -> None:
        validate_bookie_id(self.bookie_id)
        if not self.host or not 0 < self.port < 65536:
            raise InvalidRegistration(
                f"bookie {self.bookie_id}: bad address {self.host}:{self.port}"
            )

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)


def encode_registration(reg: BookieRegistration) -> bytes:
    doc = {
        "bookieId": reg.bookie_id,
        "host": reg.host,
        "port": reg.port,
        "state": reg.state.value,
        "rack": reg.rack,
        "readOnlyReason": reg.read_only_reason,
        "httpPort": reg.http_port,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_registration(data: bytes) -> BookieRegistration:
    """Decode a registration. Raises :class:`InvalidRegistration` (or ``InvalidBookieId``)."""
    try:
        doc = json.loads(data)
        return BookieRegistration(
            bookie_id=doc["bookieId"],
            host=str(doc["host"]),
            port=int(doc["port"]),
            state=BookieState(doc.get("state", "writable")),
            rack=doc.get("rack"),
            read_only_reason=doc.get("readOnlyReason"),
            http_port=doc.get("httpPort"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidRegistration(f"bad bookie registration: {exc}") from None


@dataclass(frozen=True, slots=True)
class Cookie:
    """Which directories hold a bookie's data, for which cluster instance (BookKeeper's cookie).

    The same cookie is written in each of the bookie's directories and in the metadata store; a
    start whose directories and store disagree is refused (see :mod:`braid.storage.bookie.cookie`).
    """

    instance_id: str
    bookie_id: str
    journal_dir: str
    ledger_dir: str

    def matches(self, other: Cookie) -> bool:
        return self == other


def encode_cookie(cookie: Cookie) -> bytes:
    doc = {
        "instanceId": cookie.instance_id,
        "bookieId": cookie.bookie_id,
        "journalDir": cookie.journal_dir,
        "ledgerDir": cookie.ledger_dir,
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def decode_cookie(data: bytes) -> Cookie:
    try:
        doc = json.loads(data)
        return Cookie(
            str(doc["instanceId"]),
            str(doc["bookieId"]),
            str(doc["journalDir"]),
            str(doc["ledgerDir"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidRegistration(f"bad bookie cookie: {exc}") from None
