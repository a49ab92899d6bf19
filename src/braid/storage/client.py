"""``BookKeeperClient``: the :class:`~braid.storage.api.StorageClient` of one storage cluster.

It keeps ledger metadata under the cluster's metadata root (:mod:`ledger_metadata`), allocates
ids from the cluster's id generator, and writes and reads entries through the bookies of a
:class:`~braid.storage.bookie_set.BookieSet` - in-process bookies (``StaticBookieSet``) or bookie
processes found by their registrations - so the same code drives both. Placement
(:mod:`placement`) picks ensembles among the set's *writable* bookies, leaving quarantined ones
(:mod:`bookie_health`) out while enough others remain; the handles (:mod:`handles`) do ensemble
changes through :meth:`BookKeeperClient.choose_replacements`; reads go to any replica
(:mod:`ledger_reads`); recovery fences and closes (:mod:`ledger_recovery`).

Id rule (PIP-470's I11 on one cluster): ``create_ledger`` takes the generator's value with CAS
and then creates the ledger document with ``expected_version=-1``; ``create_ledger_adv(id)``
creates the document the same way (``LedgerExists`` if taken) and then raises the generator's
floor to ``id + 1``. So the generator never hands out an id made by ``create_ledger_adv``: the
floor normally skips it, and if a crash came between the two steps the ``-1`` create fails and
the generator moves on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from braid.clock import Clock, SystemClock
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import (
    BookieUnavailable,
    InvalidEntryId,
    InvalidQuorum,
    LedgerEntry,
    LedgerExists,
    LedgerMetadata,
    LedgerState,
    NoSuchEntry,
    NoSuchLedger,
    ReadHandle,
    StorageClient,
    StorageClosed,
    StorageError,
    StorageReadOnly,
    WriteHandle,
)
from braid.storage.bookie_client import BookieClient
from braid.storage.bookie_health import BookieHealth, HealthPolicy
from braid.storage.bookie_set import BookieSet
from braid.storage.handles import LedgerReader, LedgerWriter
from braid.storage.ledger_metadata import (
    decode_ledger_metadata,
    encode_ledger_metadata,
    idgen_path,
    ledger_path,
    ledgers_path,
    validate_cluster_name,
    validate_custom_metadata,
)
from braid.storage.ledger_reads import read_range
from braid.storage.ledger_recovery import probe_lac, recover_and_close
from braid.storage.placement import (
    NotEnoughBookies,
    PlacementPolicy,
    new_ensemble,
    replace_bookie,
)
from braid.storage.validation import MAX_LEDGER_ID, validate_ledger_id

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How a storage client places, watches and reads (Pulsar's ``bookkeeperClient*`` keys)."""

    placement: PlacementPolicy = field(default_factory=PlacementPolicy)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    #: ``bookkeeperClientSpeculativeReadTimeoutInMillis``: ask the next replica after this long
    #: without an answer (0: only when a replica fails).
    speculative_read_timeout_ms: int = 0


class BookKeeperClient:
    """A client of one storage cluster: ledger metadata + id generator + bookies."""

    def __init__(
        self,
        metadata: MetadataStore,
        cluster_name: str,
        bookies: BookieSet,
        *,
        clock: Clock | None = None,
        settings: ClientSettings | None = None,
        rng: random.Random | None = None,
        owns_bookies: bool = True,
    ) -> None:
        """Use :func:`braid.storage.open_local_cluster` for the standalone cluster.

        Args:
            metadata: the store holding the cluster's metadata root.
            cluster_name: stamped on every ledger this client creates.
            bookies: the cluster's bookies; closing the client closes the set when it owns it.
            settings: placement, health check and read settings.
            rng: the randomness of placement and quarantine (tests pass a seeded one).
        """
        self._md_store = metadata
        self._cluster = validate_cluster_name(cluster_name)
        self._set = bookies
        self._owns_set = owns_bookies
        self._clock: Clock = clock or SystemClock()
        self._settings = settings or ClientSettings()
        self._rng = rng or random.Random()
        self._health = BookieHealth(self._settings.health, self._clock, self._rng)
        self._closed = False
        # The open writers of this client, told when the bookie registry changes (ADR 0074).
        self._writers: weakref.WeakSet[LedgerWriter] = weakref.WeakSet()
        bookies.add_listener(self._bookies_changed)

    @property
    def cluster_name(self) -> str:
        return self._cluster

    @property
    def bookie_set(self) -> BookieSet:
        """The bookies of this cluster."""
        return self._set

    @property
    def metadata_store(self) -> MetadataStore:
        """The store holding this cluster's metadata root."""
        return self._md_store

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def settings(self) -> ClientSettings:
        return self._settings

    @property
    def health(self) -> BookieHealth:
        """Failure counts, sampled latencies and quarantines of the cluster's bookies."""
        return self._health

    @property
    def speculative_read_timeout_s(self) -> float:
        return self._settings.speculative_read_timeout_ms / 1000.0

    def bookie(self, bookie_id: str) -> BookieClient:
        """The client of one bookie (for tests and tools). Raises ``BookieUnavailable``."""
        return self._set.client(bookie_id)

    def client_of(self, bookie_id: str) -> BookieClient | None:
        """The client of one bookie, or ``None`` when the cluster cannot name it any more."""
        try:
            return self._set.client(bookie_id)
        except BookieUnavailable:
            return None

    def record_failure(self, bookie_id: str) -> None:
        """A request to ``bookie_id`` failed or timed out (health check)."""
        self._health.record_failure(bookie_id)

    def read_order(self, bookie_ids: Sequence[str]) -> list[str]:
        """``bookie_ids`` to read from, those neither gone nor quarantined first (stable)."""
        members = set(self._set.writable()) | set(self._set.readonly())
        quarantined = self._health.quarantined()
        return sorted(bookie_ids, key=lambda b: (b not in members) * 2 + (b in quarantined))

    def _bookies_changed(self) -> None:
        if self._closed or not self._writers:
            return
        members = set(self._set.writable()) | set(self._set.readonly())
        for writer in list(self._writers):
            writer.bookies_changed(members)

    def _writer(self, md: LedgerMetadata, *, explicit_entry_ids: bool) -> LedgerWriter:
        writer = LedgerWriter(self, md, 0, explicit_entry_ids=explicit_entry_ids)
        self._writers.add(writer)
        return writer

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosed(f"storage client of cluster {self._cluster} is closed")

    def write_refusal(self, ack_quorum: int = 1) -> StorageReadOnly | None:
        """Why a new ledger could not take entries now (fewer than ``ack_quorum`` writable
        bookies: their disks are full), or ``None``. Cheap: a managed ledger asks before it rolls
        over rather than create ledgers nobody can write to."""
        if len(self._set.writable()) >= ack_quorum:
            return None
        refusals = []
        for bookie_id in self._set.readonly():
            client = self.client_of(bookie_id)
            reason = None if client is None else client.read_only_reason
            refusals.append(f"bookie {bookie_id} is read-only: {reason or 'registered read-only'}")
        return StorageReadOnly(
            f"cluster {self._cluster}: {len(self._set.writable())} writable bookie(s), "
            f"{ack_quorum} needed; {'; '.join(refusals) or 'no read-only bookie'}"
        )

    def disk_status(self) -> list[Mapping[str, object]]:
        """Each bookie's disk state (for health checks)."""
        out = []
        for bookie_id in sorted([*self._set.writable(), *self._set.readonly()]):
            client = self.client_of(bookie_id)
            if client is not None:
                out.append(client.disk_status())
        return out

    # -- placement -----------------------------------------------------------------------------
    def _candidates(self, exclude: Iterable[str]) -> tuple[list[str], list[str]]:
        """Writable bookies not excluded: (healthy ones, all of them)."""
        excluded = set(exclude)
        writable = [b for b in self._set.writable() if b not in excluded]
        quarantined = self._health.quarantined()
        return [b for b in writable if b not in quarantined], writable

    def _racks(self, bookies: Iterable[str]) -> dict[str, str | None]:
        return {b: self._set.rack_of(b) for b in bookies}

    def choose_ensemble(self, size: int, write_quorum: int) -> tuple[str, ...]:
        """The ensemble of a new ledger.

        Raises:
            StorageReadOnly: enough bookies, but too many are read-only (full disks).
            NotEnoughBookies: too few bookies (or racks, when enforced).
        """
        healthy, writable = self._candidates(())
        policy = self._settings.placement
        for pool in (healthy, writable) if len(healthy) < len(writable) else (writable,):
            try:
                return new_ensemble(policy, pool, size, write_quorum, self._racks(pool), self._rng)
            except NotEnoughBookies:
                if pool is writable:
                    if len(writable) + len(self._set.readonly()) >= size:
                        refusal = self.write_refusal(size)
                        raise refusal or StorageReadOnly(
                            f"cluster {self._cluster}: not enough writable bookies"
                        ) from None
                    raise
        raise AssertionError("unreachable")

    def can_replace(self, ensemble: Sequence[str]) -> bool:
        """Whether some writable bookie outside ``ensemble`` could take a place in it."""
        _, writable = self._candidates(ensemble)
        return bool(writable)

    def choose_replacements(
        self,
        ensemble: Sequence[str],
        indices: Sequence[int],
        write_quorum: int,
        exclude: Iterable[str] = (),
    ) -> dict[int, str]:
        """A replacement for the bookie at each of ``indices`` of ``ensemble`` (an ensemble
        change, recovery, re-replication), none of them in the ensemble or ``exclude``.

        Raises:
            NotEnoughBookies: no writable bookie left to take one of the places.
        """
        current = list(ensemble)
        excluded = set(exclude) | set(ensemble)
        out: dict[int, str] = {}
        for index in indices:
            healthy, writable = self._candidates(excluded)
            pool = healthy or writable
            chosen = replace_bookie(
                self._settings.placement,
                current,
                index,
                pool,
                write_quorum,
                self._racks([*pool, *current]),
                self._rng,
            )
            out[index] = chosen
            current[index] = chosen
            excluded.add(chosen)
        return out

    # -- metadata ------------------------------------------------------------------------------
    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """A ledger's metadata and its version. Raises :class:`NoSuchLedger`."""
        validate_ledger_id(ledger_id)
        got = await self._md_store.get(ledger_path(self._cluster, ledger_id))
        if got is None:
            raise NoSuchLedger(f"ledger {ledger_id} does not exist in cluster {self._cluster}")
        return decode_ledger_metadata(got[0]), got[1].version

    async def write_metadata(self, md: LedgerMetadata, version: int) -> bool:
        """CAS ``md`` over ``version``; ``False`` if the version moved (re-read and retry)."""
        try:
            await self._md_store.put(
                ledger_path(self._cluster, md.ledger_id), encode_ledger_metadata(md), version
            )
        except BadVersion:
            return False
        return True

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        """A ledger's metadata. Raises :class:`NoSuchLedger`."""
        self._check_open()
        md, _ = await self.read_metadata(ledger_id)
        return md

    async def list_ledgers(self) -> list[int]:
        """Ids of every ledger of the cluster, ascending."""
        self._check_open()
        names = await self._md_store.children(ledgers_path(self._cluster))
        return sorted(int(n) for n in names if n.isdigit())

    # -- ids -----------------------------------------------------------------------------------
    async def _read_idgen(self) -> tuple[int, int]:
        got = await self._md_store.get(idgen_path(self._cluster))
        if got is None:
            return 0, -1
        try:
            return int(got[0]), got[1].version
        except ValueError as exc:
            raise StorageError(f"cluster {self._cluster}: corrupt id generator") from exc

    async def _next_id(self) -> int:
        while True:
            value, version = await self._read_idgen()
            try:
                await self._md_store.put(idgen_path(self._cluster), b"%d" % (value + 1), version)
            except BadVersion:
                continue
            return value

    async def _raise_idgen_floor(self, floor: int) -> None:
        while True:
            value, version = await self._read_idgen()
            if value >= floor:
                return
            try:
                await self._md_store.put(idgen_path(self._cluster), b"%d" % floor, version)
            except BadVersion:
                continue
            return

    async def next_ledger_id(self) -> int:
        """The id the generator hands out next: every id below it may be taken (PIP-470 I11)."""
        self._check_open()
        value, _ = await self._read_idgen()
        return value

    async def raise_ledger_id_floor(self, floor: int) -> int:
        """Advance the generator to at least ``floor`` (never back); returns its new value.

        What an operator does to a new storage cluster before switching to it (I11), so the ids
        it allocates cannot collide with ledger ids copied over from the old cluster.
        """
        self._check_open()
        validate_ledger_id(floor)
        await self._raise_idgen_floor(floor)
        value, _ = await self._read_idgen()
        return value

    # -- creating ------------------------------------------------------------------------------
    def _ensemble(self, ensemble: int, write_quorum: int, ack_quorum: int) -> tuple[str, ...]:
        if not 1 <= ack_quorum <= write_quorum <= ensemble:
            raise InvalidQuorum(
                f"need 1 <= ack_quorum <= write_quorum <= ensemble, got "
                f"ensemble={ensemble} write_quorum={write_quorum} ack_quorum={ack_quorum}"
            )
        return self.choose_ensemble(ensemble, write_quorum)

    def _new_metadata(
        self,
        ledger_id: int,
        ensemble: tuple[str, ...],
        write_quorum: int,
        ack_quorum: int,
        custom: dict[str, bytes],
    ) -> LedgerMetadata:
        return LedgerMetadata(
            ledger_id=ledger_id,
            cluster_name=self._cluster,
            state=LedgerState.OPEN,
            ensembles={0: ensemble},
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            last_entry_id=-1,
            length=0,
            created_ms=self._clock.now_ms(),
            custom_metadata=custom,
        )

    async def _try_create(self, md: LedgerMetadata) -> bool:
        try:
            await self._md_store.put(
                ledger_path(self._cluster, md.ledger_id), encode_ledger_metadata(md), -1
            )
        except BadVersion:
            return False
        return True

    async def create_ledger(
        self,
        ensemble: int = 1,
        write_quorum: int = 1,
        ack_quorum: int = 1,
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> LedgerWriter:
        """Create a ledger with an id from the cluster's generator; returns its writer.

        Raises:
            InvalidQuorum: impossible quorum sizes.
            StorageReadOnly: enough bookies, but too many of them read-only (full disks).
            NotEnoughBookies: fewer writable bookies than the ensemble size.
        """
        self._check_open()
        custom = validate_custom_metadata(custom_metadata)
        self._ensemble(ensemble, write_quorum, ack_quorum)
        while True:
            ledger_id = await self._next_id()
            md = self._new_metadata(
                ledger_id,
                self._ensemble(ensemble, write_quorum, ack_quorum),
                write_quorum,
                ack_quorum,
                custom,
            )
            if await self._try_create(md):
                return self._writer(md, explicit_entry_ids=False)
            # Taken by create_ledger_adv before it raised the floor: take the next id.
            log.info("cluster %s: ledger id %d already taken, skipping", self._cluster, ledger_id)

    async def create_ledger_adv(
        self,
        ledger_id: int,
        ensemble: int = 1,
        write_quorum: int = 1,
        ack_quorum: int = 1,
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> LedgerWriter:
        """Create a ledger with an explicit id (PIP-470 BUILD keeps ids across clusters).

        Raises:
            LedgerExists: the id is taken in this cluster.
            InvalidLedgerId, InvalidQuorum, BookieUnavailable: bad arguments.
        """
        self._check_open()
        validate_ledger_id(ledger_id)
        custom = validate_custom_metadata(custom_metadata)
        md = self._new_metadata(
            ledger_id,
            self._ensemble(ensemble, write_quorum, ack_quorum),
            write_quorum,
            ack_quorum,
            custom,
        )
        if not await self._try_create(md):
            raise LedgerExists(f"ledger {ledger_id} already exists in cluster {self._cluster}")
        if ledger_id < MAX_LEDGER_ID:
            await self._raise_idgen_floor(ledger_id + 1)
        return self._writer(md, explicit_entry_ids=True)

    # -- reading -------------------------------------------------------------------------------
    async def read_range(
        self, md: LedgerMetadata, first: int, last: int, lac: int
    ) -> list[LedgerEntry]:
        """Read entries ``first..last`` (<= ``lac``) of a ledger from any of their replicas."""
        self._check_open()
        if first < 0 or first > last:
            raise InvalidEntryId(f"invalid entry range {first}..{last}")
        if last > lac:
            raise NoSuchEntry(
                f"ledger {md.ledger_id}: entry {last} is past last add confirmed {lac}"
            )
        return await read_range(self, md, first, last)

    async def probe_lac(self, md: LedgerMetadata, known: int) -> int:
        """How far a writer of an open ledger got: the highest entry durable on an ack quorum with
        every lower one too (for tailing readers)."""
        return await probe_lac(self, md, known)

    # -- opening / recovery ----------------------------------------------------------------------
    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> LedgerReader:
        """Open a ledger for reading.

        ``recovery=True`` fences it (the previous writer's next add fails with ``LedgerFenced``),
        recovers the last entry and closes it (:mod:`ledger_recovery`). ``recovery=False`` only
        reads; use ``refresh_last_add_confirmed`` to follow an open ledger.

        Raises:
            NoSuchLedger: no such ledger in this cluster.
            BookieUnavailable: too few bookies answered to recover safely.
        """
        self._check_open()
        md, version = await self.read_metadata(ledger_id)
        if md.state is LedgerState.CLOSED:
            return LedgerReader(self, md, md.last_entry_id)
        if not recovery:
            return LedgerReader(self, md, await self.probe_lac(md, -1))
        while md.state is LedgerState.OPEN:
            marked = dataclasses.replace(md, state=LedgerState.IN_RECOVERY)
            if await self.write_metadata(marked, version):
                md, version = marked, version + 1
                break
            md, version = await self.read_metadata(ledger_id)
        if md.state is LedgerState.CLOSED:
            return LedgerReader(self, md, md.last_entry_id)
        closed = await recover_and_close(self, md, version)
        return LedgerReader(self, closed, closed.last_entry_id)

    # -- deleting ------------------------------------------------------------------------------
    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger: its entries on every bookie (space is reclaimed), then its metadata.

        Bookies go first so a crash in between leaves a ledger that can be deleted again rather
        than entries nobody can find.

        Raises:
            NoSuchLedger: no such ledger in this cluster.
        """
        self._check_open()
        md, _ = await self.read_metadata(ledger_id)
        clients = [c for c in (self.client_of(b) for b in sorted(md.bookies())) if c is not None]
        results = await asyncio.gather(
            *(c.delete_ledger(ledger_id) for c in clients), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                if not isinstance(result, StorageError):
                    raise result
                log.warning("ledger %d: bookie delete failed: %s", ledger_id, result)
        try:
            await self._md_store.delete(ledger_path(self._cluster, ledger_id))
        except NodeNotFound:
            pass

    async def close(self) -> None:
        """Close the bookie set when this client owns it (and so the bookies it owns).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_set:
            await self._set.close()


def _conforms(client: BookKeeperClient, writer: LedgerWriter, reader: LedgerReader) -> None:
    # Never called: makes mypy prove the classes implement the contract in braid.storage.api.
    as_client: StorageClient = client
    as_writer: WriteHandle = writer
    as_reader: ReadHandle = reader
    del as_client, as_writer, as_reader
