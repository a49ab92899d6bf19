"""PIP-470 storage-cluster switching, the pure part: registry documents, the switch directive, the
orchestrator's persisted state and its next-step decision.

Nothing here does I/O or reads a clock (``docs/architecture.md#binding-decisions``): the executor in
``braid.clusters`` gathers a :class:`SwitchState`, asks :func:`next_step` what to do, does it, and
records the outcome with the ``with_*`` transitions, persisting the new state with compare-and-swap
after each step, so a restarted broker resumes exactly where the previous one stopped.

Switch states, named as PIP-470 names them (:class:`SwitchPhase`)::

    NOT_REGISTERED -> STANDBY -> SWITCH_TRIGGERED -> LIVE_DUAL_READ -> BUILD -> PROMOTE -> CLEANUP
        -> DONE | DONE_WITH_FAILURES;   any phase before CLEANUP deletes -> ROLLBACK

``NOT_REGISTERED`` and ``STANDBY`` describe the registry before any switch (no other cluster
registered, or one waiting ``STANDBY``); a switch's persisted ``phase`` is one of the other eight.
Two sub-states are fields, not names: in CLEANUP, ``cleanup_started`` is false while the
rollback window is still open (nothing deleted yet; Braid's AWAIT_CLEANUP before ADR 0056); in
ROLLBACK, ``reverted_ms`` records when every attribution was back on the source (the new copies
are then kept for ``rollback_deletion_delay_ms`` before they are deleted: PIP-470's delayed
deletion) and ``finished`` ends the run (before ADR 0056: ROLLED_BACK). :meth:`SwitchState.decode`
migrates a state recorded under the old names, so an in-flight switch resumes after an upgrade.

Item statuses: ``PENDING`` (to copy) -> ``BUILT`` (same ledger id, same entry ids on the target)
or ``FAILED`` (source unreadable, or a conflicting copy); ``BUILT`` -> ``PROMOTED`` (attribution
CAS changed only the cluster name, I9/I10), ``ROLLED_OVER`` (the cursor moved to a new ledger on
the active cluster meanwhile: PIP-470's promoted-via-rollover) or ``DEFERRED`` (CAS retries
exhausted: not a failure, a later ``switch`` to the same target retries it); ``PROMOTED`` ->
``CLEANED`` (the source copy was deleted) or, on rollback, ``REVERTED`` (the stamp is back on
the source; the target copy is kept for delayed deletion) -> ``DISCARDED`` (the copy deleted).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from braid.core.errors import InvalidInputError

#: Default root of the registry in the broker's metadata store (``bookieClusterConfigPath``).
REGISTRY_ROOT = "/admin/bookie-clusters"


@dataclass(frozen=True, slots=True)
class RegistryPaths:
    """Where the registry lives (``bookieClusterConfigPath``, PIP-470: configurable) and the
    reserved nodes under it."""

    root: str = REGISTRY_ROOT

    def __post_init__(self) -> None:
        root = self.root
        if (
            not isinstance(root, str)
            or not root.startswith("/")
            or root.endswith("/")
            or "//" in root
            or any(ch < " " for ch in root)
        ):
            raise InvalidInputError(
                f"invalid bookieClusterConfigPath {root!r}: expected an absolute metadata path "
                f"such as {REGISTRY_ROOT}"
            )

    @property
    def switch_target(self) -> str:
        """The switch directive (``name\\norigin=<url>``)."""
        return f"{self.root}/switch-target"

    @property
    def switch_state(self) -> str:
        """The orchestrator's persisted state (Braid's: PIP-470 keeps it in memory)."""
        return f"{self.root}/switch-state"

    @property
    def orchestrator_leader(self) -> str:
        """The ephemeral leader node electing the orchestrator of a directive without origin."""
        return f"{self.root}/orchestrator-leader"

    @property
    def brokers(self) -> str:
        """Where every started broker announces its origin URL (one ephemeral child each), so
        the elected leader can tell a directive's origin broker is gone and adopt it."""
        return f"{self.root}/brokers"

    def cluster(self, name: str) -> str:
        return f"{self.root}/{validate_registry_name(name)}"


#: The default paths (``bookieClusterConfigPath`` unset).
SWITCH_TARGET_PATH = f"{REGISTRY_ROOT}/switch-target"
SWITCH_STATE_PATH = f"{REGISTRY_ROOT}/switch-state"
ORCHESTRATOR_LEADER_PATH = f"{REGISTRY_ROOT}/orchestrator-leader"
ORCHESTRATOR_BROKERS_PATH = f"{REGISTRY_ROOT}/brokers"
#: Children of the registry root that are not clusters, and the admin API's own path words.
RESERVED_NAMES = frozenset(
    {
        "switch-target",
        "switch-state",
        "orchestrator-leader",
        "brokers",
        "status",
        "switch",
        "rollback",
        "cleanup",
        "internal",
    }
)
#: PIP-470's defaults.
DEFAULT_BUILD_CONCURRENCY = 16
MAX_PROMOTE_RETRIES = 5
DEFAULT_DUAL_READ_TIMEOUT_DAYS = 15
#: How long a rollback keeps the new cluster's copies before deleting them (Braid's default for
#: PIP-470's "scheduled for delayed deletion": ``bookieClusterRollbackDeletionDelaySeconds``).
DEFAULT_ROLLBACK_DELETION_DELAY_S = 3600
#: The persisted state's format: 2 = PIP-470's state names (ADR 0056); absent = Braid's older
#: names, migrated on read.
STATE_FORMAT = 2

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class InvalidClusterDocument(InvalidInputError):
    """A registry document, switch directive or switch state that cannot be decoded."""


class ClusterStatus(enum.Enum):
    ACTIVE = "ACTIVE"
    STANDBY = "STANDBY"
    DEPRECATED = "DEPRECATED"

    @classmethod
    def parse(cls, text: object) -> ClusterStatus:
        """Parse a status name (case-insensitive). Raises :class:`InvalidInputError`."""
        if isinstance(text, str):
            for status in cls:
                if status.value == text.upper():
                    return status
        raise InvalidInputError(
            f"invalid cluster status {text!r}: expected ACTIVE, STANDBY or DEPRECATED"
        )


def validate_registry_name(name: object) -> str:
    """Return ``name`` if it can name a registered storage cluster.

    Raises:
        InvalidInputError: not a metadata path segment, or a reserved name.
    """
    if not isinstance(name, str) or not _NAME.match(name) or name in RESERVED_NAMES:
        raise InvalidInputError(
            f"invalid storage cluster name {name!r} (letters, digits, '.', '_', '-'; "
            f"not {', '.join(sorted(RESERVED_NAMES))})"
        )
    return name


@dataclass(frozen=True, slots=True)
class BookieClusterInfo:
    """One registered storage cluster: PIP-470's znode body."""

    name: str
    metadata_service_uri: str
    status: ClusterStatus

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "metadataServiceUri": self.metadata_service_uri,
            "status": self.status.value,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> BookieClusterInfo:
        """Parse a registry document. Raises :class:`InvalidClusterDocument`."""
        try:
            doc = json.loads(raw.decode("utf-8"))
            uri = doc["metadataServiceUri"]
            if not isinstance(uri, str):
                raise TypeError("metadataServiceUri is not a string")
            return cls(validate_registry_name(doc["name"]), uri, ClusterStatus.parse(doc["status"]))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidClusterDocument(f"corrupt storage cluster document: {exc}") from None


@dataclass(frozen=True, slots=True)
class SwitchTarget:
    """The switch directive: the cluster to make active, and the broker that orchestrates."""

    name: str
    origin: str | None = None

    def encode(self) -> bytes:
        return (self.name + (f"\norigin={self.origin}" if self.origin else "")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SwitchTarget:
        """Parse ``name[\\norigin=<url>]`` (a missing origin line: leader election picks the
        orchestrator). Raises :class:`InvalidClusterDocument`."""
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise InvalidClusterDocument(f"switch target is not UTF-8: {exc}") from None
        if not lines:
            raise InvalidClusterDocument("switch target is empty")
        try:
            name = validate_registry_name(lines[0].strip())
        except InvalidInputError as exc:
            raise InvalidClusterDocument(f"switch target: {exc}") from None
        origin = None
        for line in lines[1:]:
            key, sep, value = line.partition("=")
            if sep and key.strip() == "origin" and value.strip():
                origin = value.strip()
        return cls(name, origin)


class SwitchPhase(enum.Enum):
    """PIP-470's switch states, in its order. The first two describe the registry before a
    switch; a switch's persisted phase is one of the others."""

    NOT_REGISTERED = "NOT_REGISTERED"
    STANDBY = "STANDBY"
    SWITCH_TRIGGERED = "SWITCH_TRIGGERED"
    LIVE_DUAL_READ = "LIVE_DUAL_READ"
    BUILD = "BUILD"
    PROMOTE = "PROMOTE"
    CLEANUP = "CLEANUP"
    DONE = "DONE"
    DONE_WITH_FAILURES = "DONE_WITH_FAILURES"
    ROLLBACK = "ROLLBACK"


#: Braid's phase names before ADR 0056 -> (PIP-470's name, cleanup started, finished).
_LEGACY_PHASES: dict[str, tuple[SwitchPhase, bool, bool]] = {
    "BUILD": (SwitchPhase.BUILD, False, False),
    "PROMOTE": (SwitchPhase.PROMOTE, False, False),
    "AWAIT_CLEANUP": (SwitchPhase.CLEANUP, False, False),
    "CLEANUP": (SwitchPhase.CLEANUP, True, False),
    "DONE": (SwitchPhase.DONE, False, True),
    "DONE_WITH_FAILURES": (SwitchPhase.DONE_WITH_FAILURES, False, True),
    "ROLLBACK": (SwitchPhase.ROLLBACK, False, False),
    "ROLLED_BACK": (SwitchPhase.ROLLBACK, False, True),
}


class ItemKind(enum.Enum):
    SCHEMA = "SCHEMA"
    CURSOR = "CURSOR"


class ItemStatus(enum.Enum):
    PENDING = "PENDING"
    BUILT = "BUILT"
    FAILED = "FAILED"
    PROMOTED = "PROMOTED"
    ROLLED_OVER = "ROLLED_OVER"
    DEFERRED = "DEFERRED"
    CLEANED = "CLEANED"
    REVERTED = "REVERTED"
    DISCARDED = "DISCARDED"


#: Items whose copy on the target must go once a rollback's deletion delay has passed.
_TARGET_COPY_KEPT = (ItemStatus.BUILT, ItemStatus.REVERTED, ItemStatus.DEFERRED)


@dataclass(frozen=True, slots=True)
class MigrationItem:
    """One schema or cursor ledger to carry over.

    ``owner`` is the schema id or the managed ledger's name; ``cursor`` the cursor's name (empty
    for a schema). ``copied_last_entry`` is the last entry id BUILD copied (what PROMOTE compares
    with a live cursor's writer). ``reason`` says why an item failed or was deferred.
    """

    kind: ItemKind
    owner: str
    cursor: str
    ledger_id: int
    source: str
    status: ItemStatus = ItemStatus.PENDING
    copied_last_entry: int = -1
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.kind.value, self.owner, self.cursor, self.ledger_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "owner": self.owner,
            "cursor": self.cursor,
            "ledgerId": self.ledger_id,
            "source": self.source,
            "status": self.status.value,
            "copiedLastEntry": self.copied_last_entry,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MigrationItem:
        return cls(
            ItemKind(doc["kind"]),
            str(doc["owner"]),
            str(doc.get("cursor", "")),
            int(doc["ledgerId"]),
            str(doc["source"]),
            ItemStatus(doc["status"]),
            int(doc.get("copiedLastEntry", -1)),
            str(doc.get("reason", "")),
        )


@dataclass(frozen=True, slots=True)
class CleanupRequest:
    """An operator's ``cleanup`` (PIP-470's body): applied once, then cleared."""

    src_cluster_filter: str | None = None
    max_deletions: int = 0  # 0 = unlimited
    force: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "srcClusterFilter": self.src_cluster_filter,
            "maxDeletions": self.max_deletions,
            "force": self.force,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CleanupRequest:
        src = doc.get("srcClusterFilter")
        return cls(None if src is None else str(src), int(doc["maxDeletions"]), bool(doc["force"]))


@dataclass(frozen=True, slots=True)
class SwitchState:
    """The orchestrator's whole state, persisted as JSON at ``RegistryPaths.switch_state``.

    ``discovered`` is false until BUILD has listed the schema and cursor ledgers of the source
    (listing is part of BUILD, so a restart before it lists again). ``boundary_ledger_id`` is the
    target's next ledger id at the switch (PIP-470's ``switchLedgerIdBoundary``): every ledger
    id below it was allocated by an older cluster. ``cleanup_started``: CLEANUP is deleting (the
    window closed or a forced request); before, a rollback is still possible. ``reverted_ms``:
    when ROLLBACK had every attribution back (-1: not yet); ``finished``: the run is over.
    """

    source: str
    target: str
    origin: str | None
    phase: SwitchPhase
    switched_ms: int
    boundary_ledger_id: int
    initial_cluster: str
    discovered: bool = False
    items: tuple[MigrationItem, ...] = ()
    id_conflicts: int = 0
    cleanup: CleanupRequest | None = None
    rollback_requested: bool = False
    cleanup_status_failed: bool = False
    finished_ms: int = 0
    cleanup_started: bool = False
    reverted_ms: int = -1
    finished: bool = False

    @property
    def terminal(self) -> bool:
        """The run is over: DONE, DONE_WITH_FAILURES, or a ROLLBACK that deleted its copies."""
        return self.finished

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": STATE_FORMAT,
            "source": self.source,
            "target": self.target,
            "origin": self.origin,
            "phase": self.phase.value,
            "switchTimestampMillis": self.switched_ms,
            "switchLedgerIdBoundary": self.boundary_ledger_id,
            "initialClusterName": self.initial_cluster,
            "discovered": self.discovered,
            "items": [item.to_json() for item in self.items],
            "idConflicts": self.id_conflicts,
            "cleanup": None if self.cleanup is None else self.cleanup.to_json(),
            "rollbackRequested": self.rollback_requested,
            "cleanupStatusFailed": self.cleanup_status_failed,
            "finishedMillis": self.finished_ms,
            "cleanupStarted": self.cleanup_started,
            "revertedMillis": self.reverted_ms,
            "finished": self.finished,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SwitchState:
        """Parse a persisted state, migrating one recorded under Braid's older phase names
        (no ``formatVersion``: AWAIT_CLEANUP, ROLLED_BACK...). Raises
        :class:`InvalidClusterDocument`."""
        try:
            doc = json.loads(raw.decode("utf-8"))
            cleanup = doc.get("cleanup")
            items = tuple(MigrationItem.from_json(i) for i in doc.get("items", []))
            if doc.get("formatVersion") == STATE_FORMAT:
                phase = SwitchPhase(doc["phase"])
                started = bool(doc.get("cleanupStarted", False))
                finished = bool(doc.get("finished", False))
                reverted_ms = int(doc.get("revertedMillis", -1))
            else:
                phase, started, finished = _LEGACY_PHASES[str(doc["phase"])]
                reverted_ms = -1
                if finished and phase is SwitchPhase.ROLLBACK:
                    # The old ROLLED_BACK had deleted the target copies already.
                    reverted_ms = int(doc.get("finishedMillis", 0))
                    items = tuple(
                        replace(i, status=ItemStatus.DISCARDED)
                        if i.status in _TARGET_COPY_KEPT
                        else i
                        for i in items
                    )
            if phase in (SwitchPhase.NOT_REGISTERED, SwitchPhase.STANDBY):
                raise ValueError(f"{phase.value} is not a phase of a switch")
            return cls(
                source=str(doc["source"]),
                target=str(doc["target"]),
                origin=None if doc.get("origin") is None else str(doc["origin"]),
                phase=phase,
                switched_ms=int(doc["switchTimestampMillis"]),
                boundary_ledger_id=int(doc["switchLedgerIdBoundary"]),
                initial_cluster=str(doc["initialClusterName"]),
                discovered=bool(doc.get("discovered", False)),
                items=items,
                id_conflicts=int(doc.get("idConflicts", 0)),
                cleanup=None if cleanup is None else CleanupRequest.from_json(cleanup),
                rollback_requested=bool(doc.get("rollbackRequested", False)),
                cleanup_status_failed=bool(doc.get("cleanupStatusFailed", False)),
                finished_ms=int(doc.get("finishedMillis", 0)),
                cleanup_started=started,
                reverted_ms=reverted_ms,
                finished=finished,
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidClusterDocument(f"corrupt switch state: {exc}") from None

    def count(self, status: ItemStatus) -> int:
        return sum(1 for item in self.items if item.status is status)

    def progress(self) -> dict[str, int]:
        """Items per status (every status listed), plus ``total`` and ``idConflicts``."""
        counts = {status.value: self.count(status) for status in ItemStatus}
        counts["total"] = len(self.items)
        counts["idConflicts"] = self.id_conflicts
        return counts

    def failed(self) -> list[MigrationItem]:
        return [i for i in self.items if i.status is ItemStatus.FAILED]

    def kept_target_copies(self) -> list[MigrationItem]:
        """After a rollback: the items whose copy on the target still awaits deletion."""
        return [i for i in self.items if i.status in _TARGET_COPY_KEPT]


# --- decisions ------------------------------------------------------------------------------------


class StepKind(enum.Enum):
    DISCOVER = "DISCOVER"  # list the source's schema and cursor ledgers
    BUILD = "BUILD"  # copy ``items``
    PROMOTE = "PROMOTE"  # CAS the attribution of ``items``
    WAIT = "WAIT"  # nothing to do before ``until_ms`` (a window or delay) or a request
    START_CLEANUP = "START_CLEANUP"  # CLEANUP may delete now (window closed, or forced)
    CLEANUP = "CLEANUP"  # delete the source copies of ``items``
    FLIP_STATUS = "FLIP_STATUS"  # registry: source -> DEPRECATED, target -> ACTIVE
    ROLLBACK = "ROLLBACK"  # reverse-CAS ``items``
    REVERTED = "REVERTED"  # every attribution is back: schedule the new copies' deletion
    DISCARD = "DISCARD"  # delete the target copies of ``items`` (after a rollback's delay)
    FINISH = "FINISH"  # enter ``phase`` (the next phase, or a terminal one)
    END = "END"  # the rollback is over: mark the run finished
    IDLE = "IDLE"  # terminal: nothing left


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    items: tuple[MigrationItem, ...] = ()
    phase: SwitchPhase | None = None
    until_ms: int = 0


def can_roll_back(state: SwitchState) -> bool:
    """A rollback is possible until CLEANUP deleted (or starts deleting) a source copy; a
    request arriving later is ignored by :func:`next_step` and refused by the service."""
    return (
        not state.terminal
        and state.phase is not SwitchPhase.ROLLBACK
        and not (state.phase is SwitchPhase.CLEANUP and state.cleanup_started)
        and state.count(ItemStatus.CLEANED) == 0
    )


def cleanup_deadline_ms(state: SwitchState, window_ms: int) -> int:
    """When the dual-read window closes and CLEANUP runs on its own."""
    return state.switched_ms + window_ms


def discard_deadline_ms(state: SwitchState, delay_ms: int) -> int | None:
    """When a rollback's kept copies on the target are deleted (None: not rolled back yet)."""
    return None if state.reverted_ms < 0 else state.reverted_ms + delay_ms


def _bounded(request: CleanupRequest, items: Sequence[MigrationItem]) -> tuple[MigrationItem, ...]:
    return tuple(items[: request.max_deletions or len(items)])


def _rollback_step(state: SwitchState, now_ms: int, delay_ms: int) -> Step:
    if state.phase is not SwitchPhase.ROLLBACK:
        return Step(StepKind.FINISH, phase=SwitchPhase.ROLLBACK)
    promoted = tuple(i for i in state.items if i.status is ItemStatus.PROMOTED)
    if promoted:
        return Step(StepKind.ROLLBACK, items=promoted)
    if state.reverted_ms < 0:
        return Step(StepKind.REVERTED)
    kept = state.kept_target_copies()
    if not kept:
        return Step(StepKind.END)
    deadline = state.reverted_ms + delay_ms
    request = state.cleanup
    if now_ms >= deadline or (request is not None and request.force):
        return Step(StepKind.DISCARD, items=_bounded(request or CleanupRequest(), kept))
    return Step(StepKind.WAIT, until_ms=deadline)


def next_step(
    state: SwitchState,
    now_ms: int,
    window_ms: int,
    concurrency: int,
    rollback_deletion_delay_ms: int = DEFAULT_ROLLBACK_DELETION_DELAY_S * 1000,
) -> Step:
    """What the orchestrator does next (pure: the state, the time, the window, the batch size,
    the rollback's deletion delay).

    SWITCH_TRIGGERED -> LIVE_DUAL_READ once the orchestrating broker applied the directive (the
    executor acts only then) -> BUILD. A rollback request wins over everything while
    :func:`can_roll_back` holds; ROLLBACK reverts the promoted items, then keeps the target copies
    until the deletion delay passed (or a forced ``cleanup``) and deletes them. BUILD copies at
    most ``concurrency`` pending items per step; PROMOTE takes every built item; CLEANUP waits for
    the window to close or an explicit request (``force`` or past the window), deletes the
    source copies of promoted items (at most ``maxDeletions``, only of ``srcClusterFilter``) and
    then flips the registry statuses.
    """
    if concurrency < 1:
        raise InvalidInputError(f"concurrency must be >= 1, got {concurrency}")
    phase = state.phase
    if state.terminal:
        return Step(StepKind.IDLE)
    if phase is SwitchPhase.ROLLBACK or (state.rollback_requested and can_roll_back(state)):
        return _rollback_step(state, now_ms, rollback_deletion_delay_ms)
    if phase is SwitchPhase.SWITCH_TRIGGERED:
        return Step(StepKind.FINISH, phase=SwitchPhase.LIVE_DUAL_READ)
    if phase is SwitchPhase.LIVE_DUAL_READ:
        return Step(StepKind.FINISH, phase=SwitchPhase.BUILD)
    if phase is SwitchPhase.BUILD:
        if not state.discovered:
            return Step(StepKind.DISCOVER)
        pending = tuple(i for i in state.items if i.status is ItemStatus.PENDING)
        if pending:
            return Step(StepKind.BUILD, items=pending[:concurrency])
        return Step(StepKind.FINISH, phase=SwitchPhase.PROMOTE)
    if phase is SwitchPhase.PROMOTE:
        built = tuple(i for i in state.items if i.status is ItemStatus.BUILT)
        if built:
            return Step(StepKind.PROMOTE, items=built)
        return Step(StepKind.FINISH, phase=SwitchPhase.CLEANUP)
    if phase is not SwitchPhase.CLEANUP:  # DONE / DONE_WITH_FAILURES not marked finished
        return Step(StepKind.FINISH, phase=phase)
    request = state.cleanup
    if not state.cleanup_started:
        deadline = cleanup_deadline_ms(state, window_ms)
        if now_ms >= deadline or (request is not None and request.force):
            return Step(StepKind.START_CLEANUP)
        return Step(StepKind.WAIT, until_ms=deadline)
    request = request or CleanupRequest()
    candidates = [
        i
        for i in state.items
        if i.status is ItemStatus.PROMOTED
        and (request.src_cluster_filter is None or i.source == request.src_cluster_filter)
    ]
    if candidates:
        return Step(StepKind.CLEANUP, items=_bounded(request, candidates))
    if any(i.status is ItemStatus.PROMOTED for i in state.items):
        # A filtered cleanup left other sources' copies: wait for the next request.
        return Step(StepKind.FINISH, phase=SwitchPhase.CLEANUP)
    return Step(StepKind.FLIP_STATUS)


def with_cleanup_done(state: SwitchState, cleaned: Iterable[MigrationItem]) -> SwitchState:
    """Record a CLEANUP or DISCARD step. A bounded request (``maxDeletions``) is used up by one
    step: when copies remain, the orchestrator goes back to waiting (for the window, the delay or
    the next request) instead of deleting past the operator's bound."""
    after = with_items(state, cleaned)
    request = state.cleanup
    if state.phase is SwitchPhase.ROLLBACK:
        remaining = bool(after.kept_target_copies())
    else:
        remaining = any(i.status is ItemStatus.PROMOTED for i in after.items)
    if request is not None and request.max_deletions and remaining:
        if state.phase is SwitchPhase.ROLLBACK:
            return replace(after, cleanup=None)
        return replace(after, cleanup_started=False, cleanup=None)
    return after


def final_phase(state: SwitchState) -> SwitchPhase:
    """DONE, or DONE_WITH_FAILURES when an item failed or the status flip did."""
    if state.failed() or state.cleanup_status_failed:
        return SwitchPhase.DONE_WITH_FAILURES
    return SwitchPhase.DONE


def with_items(state: SwitchState, updated: Iterable[MigrationItem]) -> SwitchState:
    """``state`` with the items of the same key replaced by ``updated``."""
    by_key = {item.key: item for item in updated}
    if not by_key:
        return state
    return replace(state, items=tuple(by_key.get(i.key, i) for i in state.items))


def with_discovered(state: SwitchState, items: Sequence[MigrationItem]) -> SwitchState:
    """Record BUILD's listing; items already known (a resumed run) keep their status."""
    known = {item.key: item for item in state.items}
    merged = [known.get(item.key, item) for item in items]
    seen = {item.key for item in merged}
    merged.extend(item for item in state.items if item.key not in seen)
    return replace(state, discovered=True, items=tuple(merged))


def with_phase(state: SwitchState, phase: SwitchPhase, now_ms: int) -> SwitchState:
    """Enter ``phase``. Entering CLEANUP (again, after a bounded or filtered request) waits
    for the window or the next request and drops the used-up request; entering DONE or
    DONE_WITH_FAILURES finishes the run and stamps the time."""
    if phase is SwitchPhase.CLEANUP:
        return replace(state, phase=phase, cleanup=None, cleanup_started=False)
    if phase in (SwitchPhase.DONE, SwitchPhase.DONE_WITH_FAILURES):
        return replace(state, phase=phase, finished=True, finished_ms=now_ms)
    return replace(state, phase=phase)


def with_cleanup_started(state: SwitchState) -> SwitchState:
    """CLEANUP may delete from now on (a rollback is no longer possible)."""
    return replace(state, cleanup_started=True)


def with_reverted(state: SwitchState, now_ms: int) -> SwitchState:
    """Every attribution is back on the source: the new copies are kept until the delay."""
    return replace(state, reverted_ms=now_ms, cleanup=None)


def with_rollback_ended(state: SwitchState, now_ms: int) -> SwitchState:
    """The rollback deleted every kept copy: the run is over (still named ROLLBACK)."""
    return replace(state, finished=True, finished_ms=now_ms, cleanup=None)


def new_switch_state(
    source: str,
    target: str,
    origin: str | None,
    now_ms: int,
    boundary_ledger_id: int,
    initial_cluster: str,
    previous: SwitchState | None = None,
) -> SwitchState:
    """The state a switch starts with. A switch to the same target as an unfinished or
    partly-failed previous run resumes it in BUILD (PIP-470: ``switch --target <same>`` retries
    deferred and failed items); otherwise a fresh run in SWITCH_TRIGGERED."""
    if (
        previous is not None
        and previous.target == target
        and previous.source == source
        and previous.phase is not SwitchPhase.ROLLBACK
    ):
        retry = tuple(
            replace(i, status=ItemStatus.PENDING, reason="")
            if i.status is ItemStatus.FAILED
            else replace(i, status=ItemStatus.BUILT, reason="")
            if i.status is ItemStatus.DEFERRED
            else i
            for i in previous.items
        )
        return replace(
            previous,
            origin=origin,
            phase=SwitchPhase.BUILD,
            discovered=False,
            items=retry,
            rollback_requested=False,
            cleanup=None,
            finished_ms=0,
            finished=False,
            cleanup_started=False,
        )
    return SwitchState(
        source=source,
        target=target,
        origin=origin,
        phase=SwitchPhase.SWITCH_TRIGGERED,
        switched_ms=now_ms,
        boundary_ledger_id=boundary_ledger_id,
        initial_cluster=initial_cluster,
    )


__all__ = [
    "DEFAULT_BUILD_CONCURRENCY",
    "DEFAULT_DUAL_READ_TIMEOUT_DAYS",
    "DEFAULT_ROLLBACK_DELETION_DELAY_S",
    "MAX_PROMOTE_RETRIES",
    "ORCHESTRATOR_BROKERS_PATH",
    "REGISTRY_ROOT",
    "RESERVED_NAMES",
    "STATE_FORMAT",
    "SWITCH_STATE_PATH",
    "SWITCH_TARGET_PATH",
    "BookieClusterInfo",
    "CleanupRequest",
    "ClusterStatus",
    "InvalidClusterDocument",
    "ItemKind",
    "ItemStatus",
    "MigrationItem",
    "RegistryPaths",
    "Step",
    "StepKind",
    "SwitchPhase",
    "SwitchState",
    "SwitchTarget",
    "can_roll_back",
    "cleanup_deadline_ms",
    "discard_deadline_ms",
    "final_phase",
    "new_switch_state",
    "next_step",
    "validate_registry_name",
    "with_cleanup_done",
    "with_cleanup_started",
    "with_discovered",
    "with_items",
    "with_phase",
    "with_reverted",
    "with_rollback_ended",
]
