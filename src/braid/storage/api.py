"""The ledger API (BookKeeper's client model) the managed ledger and the broker program against.

A *storage cluster* is a name, a metadata root and its bookies. A :class:`StorageClient` talks to
one cluster: it allocates ledger ids from that cluster's id generator, keeps ledger metadata under
that cluster's metadata root (updated with compare-and-swap) and writes entries to its
bookies. Several clients for several clusters can be open at once in one broker (PIP-470);
every ledger is stamped with its cluster's name at creation, so a reader can route by that stamp.

A ledger has exactly one writer. ``add_entry`` returns only once the entry is durable (fsync'd)
on an ack quorum of bookies. Opening a ledger with ``recovery=True`` *fences* it: the previous
writer's later adds fail with :class:`LedgerFenced`, the last entry is recovered and the ledger
is closed.

Implementations: ``braid.storage.local`` (in-process bookie(s), standalone). A network bookie with
replication can be added behind the same API without changing callers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from braid.core.errors import (
    AlreadyClosedError,
    AlreadyExistsError,
    BraidError,
    FencedError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
)


class LedgerState(enum.Enum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class Fragment:
    """A run of a ledger's entries stored on one ensemble (BookKeeper's *ledger fragment*).

    ``last_entry_id`` is ``None`` for the open tail of an open ledger (it grows as entries are
    added); an empty fragment has ``last_entry_id == first_entry_id - 1``.
    """

    first_entry_id: int
    last_entry_id: int | None
    ensemble: tuple[str, ...]

    @property
    def is_empty(self) -> bool:
        return self.last_entry_id is not None and self.last_entry_id < self.first_entry_id


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    """What the storage cluster's metadata root records about a ledger.

    ``ensembles`` maps the first entry id of each fragment to the bookies that store it
    (BookKeeper's ``getAllEnsembles()``): it starts with ``{0: initial ensemble}`` and gains a key
    at each ensemble change. Every ensemble has the same size; entry ``e`` is stored on the write
    set of the fragment containing ``e``. Validated on construction.
    """

    ledger_id: int
    cluster_name: str
    state: LedgerState
    ensembles: Mapping[int, tuple[str, ...]]
    write_quorum: int
    ack_quorum: int
    last_entry_id: int  # -1 while empty or open
    length: int  # total payload bytes of entries 0..last_entry_id (valid once CLOSED)
    created_ms: int
    custom_metadata: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        starts = sorted(self.ensembles)
        if not starts or starts[0] != 0:
            raise InvalidLedgerMetadata(
                f"ledger {self.ledger_id}: ensembles must start at entry 0, got {starts!r}"
            )
        size = len(self.ensembles[0])
        for start in starts:
            ensemble = self.ensembles[start]
            if not isinstance(ensemble, tuple) or len(ensemble) != size or size == 0:
                raise InvalidLedgerMetadata(
                    f"ledger {self.ledger_id}: ensemble at entry {start} is not a tuple of "
                    f"{size} bookie id(s): {ensemble!r}"
                )
            if len(set(ensemble)) != size:
                raise InvalidLedgerMetadata(
                    f"ledger {self.ledger_id}: ensemble at entry {start} names a bookie twice"
                )
        if not 1 <= self.ack_quorum <= self.write_quorum <= size:
            raise InvalidLedgerMetadata(
                f"ledger {self.ledger_id}: impossible quorums ensemble={size} "
                f"write_quorum={self.write_quorum} ack_quorum={self.ack_quorum}"
            )
        if list(self.ensembles) != starts:  # keep the mapping in entry order
            object.__setattr__(self, "ensembles", {s: self.ensembles[s] for s in starts})

    @property
    def ensemble_size(self) -> int:
        return len(self.ensembles[0])

    @property
    def ensemble(self) -> tuple[str, ...]:
        """The current (last) ensemble: where new entries of an open ledger go."""
        return self.ensembles[self.last_fragment_start]

    @property
    def last_fragment_start(self) -> int:
        """First entry id of the last fragment."""
        return max(self.ensembles)

    def ensemble_at(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble of the fragment holding ``entry_id`` (BookKeeper's ``getEnsembleAt``)."""
        found = self.ensembles[0]
        for start, ensemble in self.ensembles.items():
            if start > entry_id:
                break
            found = ensemble
        return found

    def fragments(self) -> list[Fragment]:
        """The ledger's fragments in entry order (the last one open-ended while OPEN)."""
        starts = list(self.ensembles)
        out = []
        for i, start in enumerate(starts):
            if i + 1 < len(starts):
                last: int | None = starts[i + 1] - 1
            elif self.state is LedgerState.CLOSED:
                last = self.last_entry_id
            else:
                last = None
            out.append(Fragment(start, last, self.ensembles[start]))
        return out

    def bookies(self) -> set[str]:
        """Every bookie that any fragment names."""
        return {b for ensemble in self.ensembles.values() for b in ensemble}


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    ledger_id: int
    entry_id: int
    data: bytes


class StorageError(BraidError):
    """Root of storage errors."""


class LedgerExists(StorageError, AlreadyExistsError):
    """``create_ledger_adv`` with an id that is already taken."""


class NoSuchLedger(StorageError, NotFoundError):
    """The ledger does not exist (or was deleted)."""


class NoSuchEntry(StorageError, NotFoundError):
    """Reading past the last confirmed entry, or an entry that is not stored."""


class LedgerFenced(StorageError, FencedError):
    """The ledger was fenced by a recovery open: this writer must stop."""


class LedgerClosed(StorageError, IllegalStateError):
    """Adding to a ledger that is closed."""


class InvalidEntryId(StorageError, InvalidInputError):
    """An explicit entry id out of order in a ledger created with ``create_ledger_adv``."""


class BookieUnavailable(StorageError, ServiceUnavailableError):
    """Not enough bookies are writable to form the requested quorum."""


class StorageIOError(StorageError):
    """The disk failed (ENOSPC, EIO, ...). The entry is not acknowledged."""


class StorageReadOnly(StorageError, ServiceUnavailableError):
    """Not enough writable bookies: a bookie turned read-only (its disk is full). Raised *before*
    an add is sent, so nothing was written and the ledger stays intact; retriable once space
    comes back. Reads are unaffected."""


class InvalidLedgerId(StorageError, InvalidInputError):
    """A ledger id that is negative or too large for 63 bits."""


class InvalidQuorum(StorageError, InvalidInputError):
    """Impossible ensemble / quorum sizes (e.g. ``ack_quorum > write_quorum``)."""


class EntryTooLarge(StorageError, InvalidInputError):
    """An entry larger than the bookie accepts."""


class InvalidClusterName(StorageError, InvalidInputError):
    """A storage-cluster name that cannot be used in a metadata path."""


class InvalidLedgerMetadata(StorageError, InvalidInputError):
    """A ledger metadata document that cannot be decoded, or custom metadata that is not
    ``str -> bytes``."""


class UnknownStorageCluster(StorageError, NotFoundError):
    """No storage client is registered under that cluster name (read routing by stamp)."""


class StorageClusterExists(StorageError, AlreadyExistsError):
    """A storage client for that cluster name is already registered."""


class StorageClosed(StorageError, AlreadyClosedError):
    """The client or bookie was closed."""


_Ctx = TypeVar("_Ctx")
#: How an add reports back, once, on the event loop: ``(entry_id, None, ctx)`` once the entry is
#: durable on an ack quorum - in entry-id order, after every lower entry - or ``(-1, error, ctx)``
#: if it failed. ``ctx`` is what the caller passed with the add (BookKeeper's ``AddCallback``).
AddCompletion = Callable[[int, BaseException | None, _Ctx], None]


class WriteHandle(Protocol):
    """The single writer of a ledger."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def last_add_confirmed(self) -> int:
        """Highest entry id acknowledged as durable (-1 when empty)."""
        ...

    @property
    def length(self) -> int:
        """Total payload bytes acknowledged so far."""
        ...

    async def add_entry(self, data: bytes) -> int:
        """Append ``data``; returns its entry id (0, 1, 2, ...) once it is durable.

        Raises :class:`LedgerFenced`, :class:`LedgerClosed`, :class:`StorageIOError`.
        """
        ...

    def add_entry_with_callback(
        self, data: bytes, callback: AddCompletion[_Ctx], ctx: _Ctx
    ) -> None:
        """Append ``data`` without waiting: ``callback(entry_id, None, ctx)`` once it is durable
        (BookKeeper's ``asyncAddEntry(data, cb, ctx)``). No task and no future per entry, and
        with a bound method as ``callback`` and an object the caller has anyway as ``ctx``, no
        closure either: the hot path.

        Completions come in entry-id order, so a caller that issues adds in order learns of
        them in order. Raises at once (and does not call ``callback``) when the handle is
        already broken or closed; failures after that come through ``callback``.
        """
        ...

    async def add_entry_with_id(self, entry_id: int, data: bytes) -> int:
        """Append with an explicit id (only for ledgers made by ``create_ledger_adv``); ids must be
        written in order 0, 1, 2, ... so copies keep their source's ids (PIP-470 BUILD)."""
        ...

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]:
        """Read entries ``first..last`` inclusive (all must be <= ``last_add_confirmed``); also
        after :meth:`close`, which leaves the handle a reader of the closed ledger."""
        ...

    async def close(self) -> LedgerMetadata:
        """Close the ledger: record its last entry id and length in the metadata. Idempotent."""
        ...


class ReadHandle(Protocol):
    """A reader of a ledger, opened with or without recovery."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def metadata(self) -> LedgerMetadata: ...

    @property
    def last_add_confirmed(self) -> int: ...

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]: ...

    async def refresh_last_add_confirmed(self) -> int:
        """For a ``recovery=False`` handle on an open ledger: learn how far the writer has got."""
        ...

    async def close(self) -> None: ...


class StorageClient(Protocol):
    """A client of one storage cluster (BookKeeper's ``BookKeeper`` object)."""

    @property
    def cluster_name(self) -> str: ...

    async def create_ledger(
        self,
        ensemble: int = 1,
        write_quorum: int = 1,
        ack_quorum: int = 1,
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> WriteHandle:
        """Create a ledger with an id from the cluster's id generator."""
        ...

    async def create_ledger_adv(
        self,
        ledger_id: int,
        ensemble: int = 1,
        write_quorum: int = 1,
        ack_quorum: int = 1,
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> WriteHandle:
        """Create a ledger with an id the caller chooses, whose entries are then added with
        explicit ids (:meth:`WriteHandle.add_entry_with_id`).

        The name is BookKeeper's ``createLedgerAdv`` ("advanced" creation). PIP-470 copies a
        ledger to another storage cluster under the same id with it, and its entries under
        their ids. Raises :class:`LedgerExists`.
        """
        ...

    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> ReadHandle:
        """Open for reading. ``recovery=True`` fences the ledger, recovers and closes it."""
        ...

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger and reclaim its space. Raises :class:`NoSuchLedger`."""
        ...

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata: ...

    async def list_ledgers(self) -> Sequence[int]: ...

    def write_refusal(self, ack_quorum: int = 1) -> StorageReadOnly | None:
        """Why a new ledger could not take entries now (not enough writable bookies: full
        disks), or ``None``."""
        ...

    def disk_status(self) -> list[Mapping[str, object]]:
        """Each bookie's disk state (``state`` read-write/read-only, ``reason``, usage)."""
        ...

    async def close(self) -> None: ...
