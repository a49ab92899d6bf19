"""The managed ledger contract: a named, durable, append-only log with cursors.

A managed ledger is an ordered list of ledgers (``LedgerInfo``) kept in the broker's metadata store
with compare-and-swap. It rolls over to a new ledger by entries / size / age, can be *terminated*
(sealed: no more appends; PIP-468's segment termination), and trims ledgers every cursor has passed,
subject to retention. A new owner (or the same broker after a crash) reopens it by recovering - and
so fencing - the last ledger, so no acknowledged entry is lost and the old owner cannot write again.

Cursors track a subscription's progress: a cumulative mark-delete position plus individually deleted
ranges above it, persisted (stamped with the storage cluster that holds them, PIP-470) and restored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from braid.core.errors import (
    AlreadyClosedError,
    BraidError,
    FencedError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    TopicTerminatedError,
)

if TYPE_CHECKING:
    from braid.ledger.routing import StorageRouting


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A place in a managed ledger: ``(ledger_id, entry_id)``, ordered lexicographically."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


_new_object = object.__new__
_set_ledger_id = Position.__dict__["ledger_id"].__set__
_set_entry_id = Position.__dict__["entry_id"].__set__


def new_position(ledger_id: int, entry_id: int) -> Position:
    """``Position(ledger_id, entry_id)``, built by setting its two slots directly: the same
    object, at ~60 % of the frozen dataclass's ``__init__`` (which pays ``object.__setattr__``
    per field). For the append path, which makes one per entry."""
    position: Position = _new_object(Position)
    _set_ledger_id(position, ledger_id)
    _set_entry_id(position, entry_id)
    return position


#: Before the first entry of any ledger (``(-1, -1)``, as in Pulsar).
EARLIEST = Position(-1, -1)
#: After the last entry (used as the "latest" sentinel).
LATEST = Position(2**63 - 1, 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    data: bytes


@dataclass(frozen=True, slots=True)
class LedgerInfo:
    """One ledger of a managed ledger (PIP-470 adds ``bookie_cluster_name``)."""

    ledger_id: int
    entries: int
    size: int
    timestamp_ms: int
    bookie_cluster_name: str


@dataclass(frozen=True, slots=True)
class ManagedLedgerConfig:
    max_entries_per_ledger: int = 50_000
    max_size_per_ledger: int = 256 * 1024 * 1024
    max_ledger_age_s: float = 4 * 3600.0
    retention_time_s: float = 0.0  # keep consumed ledgers this long (-1 = forever)
    retention_size_bytes: int = 0  # keep consumed ledgers up to this size (-1 = unlimited)
    ensemble: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    # Snapshots per cursor ledger before a new one is started and the old one deleted.
    max_entries_per_cursor_ledger: int = 5_000
    # Snapshots a cursor writes into its metadata node after opening before it starts a cursor
    # ledger (the broker sets it for segment topics, whose cursors are written a few times in
    # their life: ADR 0043).
    cursor_node_snapshots: int = 0


class ManagedLedgerError(BraidError):
    """Root of managed-ledger errors."""


class ManagedLedgerTerminated(ManagedLedgerError, TopicTerminatedError):
    """Append to a terminated managed ledger."""


class ManagedLedgerFenced(ManagedLedgerError, FencedError):
    """Another owner opened this managed ledger; this instance must stop."""


class ManagedLedgerClosed(ManagedLedgerError, AlreadyClosedError):
    """The managed ledger (or cursor) was closed."""


class ManagedLedgerNotFound(ManagedLedgerError, NotFoundError):
    """Opening with ``create_if_missing=False`` a managed ledger that does not exist."""


class CursorNotFound(ManagedLedgerError, NotFoundError):
    """The named cursor does not exist."""


class InvalidPosition(ManagedLedgerError, InvalidInputError):
    """A position that does not belong to this managed ledger or goes backwards."""


class ManagedCursor(Protocol):
    """A subscription's durable read state over a managed ledger."""

    @property
    def name(self) -> str: ...

    @property
    def mark_delete_position(self) -> Position:
        """Everything at or before this position is acknowledged (cumulatively)."""
        ...

    @property
    def read_position(self) -> Position:
        """Next position ``read_entries`` returns from."""
        ...

    @property
    def properties(self) -> Mapping[str, int]:
        """Properties stored with the last mark-delete (deduplication keeps sequence ids here)."""
        ...

    @property
    def individually_deleted(self) -> Sequence[tuple[Position, Position]]:
        """Acknowledged ranges above the mark-delete position, as inclusive ``(first, last)``."""
        ...

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` from the read position, skipping deleted ones."""
        ...

    async def read_entries_or_wait(self, max_entries: int) -> list[Entry]:
        """Like ``read_entries`` but waits until at least one entry is available (cancellable).

        Raises :class:`ManagedLedgerTerminated` once the log is terminated and this cursor has
        read all of it (Pulsar's "no more entries to read"), instead of waiting forever.
        """
        ...

    async def mark_delete(
        self, position: Position, properties: Mapping[str, int] | None = None
    ) -> None:
        """Acknowledge everything up to and including ``position`` (persisted)."""
        ...

    async def delete(self, positions: Sequence[Position]) -> None:
        """Acknowledge individual positions; contiguous ones advance the mark-delete position."""
        ...

    async def delete_batch_indexes(self, acks: Sequence[tuple[Position, Sequence[int]]]) -> None:
        """Acknowledge messages of batch entries (PIP-54): each ack set keeps set the bits of the
        messages still unacknowledged; an entry is deleted once the AND of its sets is empty."""
        ...

    def batch_deleted_indexes(self, position: Position) -> tuple[int, ...] | None:
        """A partly acknowledged batch entry's ack-set words (set bits: still to deliver)."""
        ...

    def is_deleted(self, position: Position) -> bool: ...

    async def seek(self, position: Position) -> None:
        """Move the read position (a rewind makes acknowledged entries above it deliverable only if
        they were not acked; acks are kept)."""
        ...

    async def reset(self, position: Position) -> None:
        """Move both mark-delete and read position so ``position`` is the next entry delivered,
        forgetting individual acks (Pulsar's subscription seek / reset cursor)."""
        ...

    def rewind(self) -> None:
        """Set the read position back to the first unacknowledged entry (redeliver everything)."""
        ...

    def backlog(self) -> int:
        """Entries not yet acknowledged (in memory: an acknowledgement counts at once, before
        its write; see :meth:`write_state`)."""
        ...

    @property
    def state_written(self) -> bool:
        """Whether every change so far is in the store: what a restart would come back to."""
        ...

    @property
    def write_in_flight(self) -> bool:
        """Whether a state write is under way (when not, and not :attr:`state_written`, the
        last write failed)."""
        ...

    async def write_state(self) -> None:
        """Return once every change made so far is in the store: waits for the write under way,
        or writes again when the last write failed.

        Raises:
            BraidError: the write failed.
        """
        ...

    def has_more_entries(self) -> bool: ...


_Ctx = TypeVar("_Ctx")
#: How an append reports back: ``(position, None, ctx)`` once durable, ``(None, error, ctx)`` if it
#: failed; ``ctx`` is what the caller passed with the append (Pulsar's ``AddEntryCallback``).
AppendCallback = Callable[[Position | None, BaseException | None, _Ctx], None]


class ManagedLedger(Protocol):
    """A named durable log."""

    @property
    def name(self) -> str: ...

    @property
    def last_confirmed_position(self) -> Position:
        """Position of the last appended entry (``(ledger, -1)``-style when empty)."""
        ...

    @property
    def is_terminated(self) -> bool: ...

    @property
    def ledgers(self) -> Sequence[LedgerInfo]: ...

    @property
    def number_of_entries(self) -> int: ...

    @property
    def total_size(self) -> int: ...

    def next_position(self, position: Position) -> Position:
        """The position that follows ``position`` (crossing into the next ledger when needed)."""
        ...

    def is_acknowledgeable(self, position: Position) -> bool:
        """A position a cursor may acknowledge (an entry so far, or ``(ledger, -1)``)."""
        ...

    @property
    def storage(self) -> StorageRouting:
        """The storage clusters behind this log: a side ledger the owner keeps for it (a
        compacted topic's) is created on ``storage.active`` and read by its cluster's name."""
        ...

    @property
    def config(self) -> ManagedLedgerConfig:
        """The settings the log was opened with (ensemble and quorums for side ledgers)."""
        ...

    async def append(self, data: bytes) -> Position:
        """Append; returns the entry's position once it is durable.

        Raises :class:`ManagedLedgerTerminated`, :class:`ManagedLedgerFenced`.
        """
        ...

    def append_with_callback(self, data: bytes, callback: AppendCallback[_Ctx], ctx: _Ctx) -> None:
        """Append without waiting (Pulsar's ``asyncAddEntry(data, callback, ctx)``):
        ``callback(position, None, ctx)`` once the entry is durable, or ``callback(None, error,
        ctx)``; called once, on the event loop, in the order of the calls. No task, future or
        closure per entry: the broker's publish path.

        Raises at once (without calling ``callback``) when the log cannot take appends:
        :class:`ManagedLedgerTerminated`, :class:`ManagedLedgerFenced`,
        :class:`ManagedLedgerClosed`.
        """
        ...

    async def read(self, position: Position, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` starting at ``position`` (inclusive)."""
        ...

    async def terminate(self) -> Position:
        """Seal: no further appends. Returns the last position. Idempotent."""
        ...

    async def open_cursor(self, name: str, initial_position: Position = LATEST) -> ManagedCursor:
        """Open (or create at ``initial_position``: ``EARLIEST``, ``LATEST`` or a position)."""
        ...

    async def delete_cursor(self, name: str) -> None: ...

    @property
    def cursors(self) -> Mapping[str, ManagedCursor]: ...

    async def trim(self) -> int:
        """Delete ledgers every cursor has passed and retention allows; returns how many."""
        ...

    async def close(self) -> None: ...

    async def delete(self) -> None:
        """Delete every ledger, cursor and the metadata of this managed ledger."""
        ...


class ManagedLedgerFactory(Protocol):
    async def open(
        self,
        name: str,
        config: ManagedLedgerConfig | None = None,
        *,
        create_if_missing: bool = True,
    ) -> ManagedLedger: ...

    async def exists(self, name: str) -> bool: ...

    async def delete(self, name: str) -> None: ...

    async def list(self) -> Sequence[str]: ...

    async def close(self) -> None: ...

    @property
    def storage(self) -> StorageRouting:
        """The storage clusters the ledgers live on."""
        ...

    def register_listener(self, listener: Callable[[str, bool], None]) -> Callable[[], None]:
        """``listener(name, created)`` on every managed ledger created or deleted."""
        ...


class InvalidManagedLedgerName(ManagedLedgerError, InvalidInputError):
    """A managed-ledger name that cannot be mapped onto a metadata path (empty segment, ``..``,
    control characters, too long)."""


class InvalidCursorName(ManagedLedgerError, InvalidInputError):
    """A cursor name that is empty, too long or has control characters."""


class ManagedLedgerMetadataError(ManagedLedgerError):
    """A managed-ledger or cursor metadata document is unreadable (corrupt or an unknown format)."""


class LedgerIdNotIncreasing(ManagedLedgerError, IllegalStateError):
    """The active storage cluster handed out a ledger id not above the log's last ledger id.

    Positions order by ledger id, so a log's ledger ids must increase; PIP-470's switch precheck
    (invariant I11) advances a new cluster's id generator beyond the old one's to guarantee it.
    """
