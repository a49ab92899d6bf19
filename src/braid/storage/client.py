"""``BookKeeperClient``: the :class:`~braid.storage.api.StorageClient` of one storage cluster.

It keeps ledger metadata under the cluster's metadata root (:mod:`ledger_metadata`), allocates
ids from the cluster's id generator, and writes and reads entries through ``BookieClient`` s, so
the same code drives in-process bookies today and network bookies later.

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
from collections.abc import Mapping, Sequence

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
from braid.storage.handles import (
    LedgerReader,
    LedgerWriter,
    quorum_error,
    read_entry_from_any,
)
from braid.storage.ledger_metadata import (
    decode_ledger_metadata,
    encode_ledger_metadata,
    idgen_path,
    ledger_path,
    ledgers_path,
    validate_cluster_name,
    validate_custom_metadata,
)
from braid.storage.validation import MAX_LEDGER_ID, validate_ledger_id

log = logging.getLogger(__name__)


class BookKeeperClient:
    """A client of one storage cluster: ledger metadata + id generator + bookies."""

    def __init__(
        self,
        metadata: MetadataStore,
        cluster_name: str,
        bookies: Sequence[BookieClient],
        *,
        clock: Clock | None = None,
    ) -> None:
        """Use :func:`braid.storage.open_local_cluster` for the standalone cluster.

        Args:
            metadata: the store holding the cluster's metadata root.
            cluster_name: stamped on every ledger this client creates.
            bookies: the cluster's bookies; closing the client closes these clients.
        """
        self._md_store = metadata
        self._cluster = validate_cluster_name(cluster_name)
        self._bookies = {b.bookie_id: b for b in bookies}
        self._bookie_order = sorted(self._bookies)
        self._clock: Clock = clock or SystemClock()
        self._closed = False

    @property
    def cluster_name(self) -> str:
        return self._cluster

    def bookie(self, bookie_id: str) -> BookieClient:
        """The client of one bookie (for tests and tools)."""
        return self._bookies[bookie_id]

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosed(f"storage client of cluster {self._cluster} is closed")

    def write_refusal(self, ack_quorum: int = 1) -> StorageReadOnly | None:
        """Why a new ledger could not take entries now (fewer than ``ack_quorum`` writable
        bookies: their disks are full), or ``None``. Cheap: a managed ledger asks before it rolls
        over rather than create ledgers nobody can write to."""
        refusals = []
        for bookie_id in self._bookie_order:
            reason = self._bookies[bookie_id].read_only_reason
            if reason is not None:
                refusals.append(f"bookie {bookie_id} is read-only: {reason}")
        if len(self._bookie_order) - len(refusals) >= ack_quorum:
            return None
        return StorageReadOnly(f"cluster {self._cluster}: {'; '.join(refusals)}")

    def disk_status(self) -> list[Mapping[str, object]]:
        """Each bookie's disk state (for health checks)."""
        return [self._bookies[b].disk_status() for b in self._bookie_order]

    def bookies_for(self, md: LedgerMetadata) -> dict[str, BookieClient]:
        """The clients of a ledger's ensemble that this client knows."""
        return {b: self._bookies[b] for b in md.ensemble if b in self._bookies}

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
    def _ensemble(
        self, ledger_id: int, ensemble: int, write_quorum: int, ack_quorum: int
    ) -> tuple[str, ...]:
        if not 1 <= ack_quorum <= write_quorum <= ensemble:
            raise InvalidQuorum(
                f"need 1 <= ack_quorum <= write_quorum <= ensemble, got "
                f"ensemble={ensemble} write_quorum={write_quorum} ack_quorum={ack_quorum}"
            )
        count = len(self._bookie_order)
        if ensemble > count:
            raise BookieUnavailable(
                f"cluster {self._cluster} has {count} bookie(s), ensemble of {ensemble} requested"
            )
        start = ledger_id % count
        return tuple(self._bookie_order[(start + i) % count] for i in range(ensemble))

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
            ensemble=ensemble,
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
            BookieUnavailable: fewer bookies than the ensemble size.
        """
        self._check_open()
        custom = validate_custom_metadata(custom_metadata)
        self._ensemble(0, ensemble, write_quorum, ack_quorum)
        while True:
            ledger_id = await self._next_id()
            md = self._new_metadata(
                ledger_id,
                self._ensemble(ledger_id, ensemble, write_quorum, ack_quorum),
                write_quorum,
                ack_quorum,
                custom,
            )
            if await self._try_create(md):
                return LedgerWriter(self, md, 0, explicit_entry_ids=False)
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
            self._ensemble(ledger_id, ensemble, write_quorum, ack_quorum),
            write_quorum,
            ack_quorum,
            custom,
        )
        if not await self._try_create(md):
            raise LedgerExists(f"ledger {ledger_id} already exists in cluster {self._cluster}")
        if ledger_id < MAX_LEDGER_ID:
            await self._raise_idgen_floor(ledger_id + 1)
        return LedgerWriter(self, md, 0, explicit_entry_ids=True)

    # -- reading -------------------------------------------------------------------------------
    async def read_range(
        self, md: LedgerMetadata, first: int, last: int, lac: int
    ) -> list[LedgerEntry]:
        """Read entries ``first..last`` (<= ``lac``) of a ledger from its bookies."""
        self._check_open()
        if first < 0 or first > last:
            raise InvalidEntryId(f"invalid entry range {first}..{last}")
        if last > lac:
            raise NoSuchEntry(
                f"ledger {md.ledger_id}: entry {last} is past last add confirmed {lac}"
            )
        bookies = self.bookies_for(md)
        if md.write_quorum == len(md.ensemble):
            # Every bookie holds every entry: one range read, falling back bookie by bookie.
            errors: list[BaseException] = []
            for bookie_id in md.ensemble:
                bookie = bookies.get(bookie_id)
                if bookie is None:
                    continue
                try:
                    stored = await bookie.read_entries(md.ledger_id, first, last)
                except StorageError as exc:
                    errors.append(exc)
                    continue
                return [LedgerEntry(md.ledger_id, s.entry_id, s.data) for s in stored]
            raise (
                quorum_error(md.ledger_id, errors)
                if errors
                else BookieUnavailable(f"ledger {md.ledger_id}: no bookie of its ensemble is known")
            )
        out = []
        for entry_id in range(first, last + 1):
            entry, _, _ = await read_entry_from_any(self, md, entry_id)
            out.append(entry)
        return out

    async def _lac_infos(self, md: LedgerMetadata, *, fence: bool) -> list[tuple[int, int]]:
        bookies = self.bookies_for(md)
        calls = [
            (b.fence(md.ledger_id) if fence else b.read_lac(md.ledger_id)) for b in bookies.values()
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        infos = []
        errors = []
        for result in results:
            if isinstance(result, BaseException):
                if not isinstance(result, StorageError):
                    raise result
                errors.append(result)
            else:
                infos.append((result.last_add_confirmed, result.last_entry_id))
        # Enough bookies must answer that every write set keeps at least one (so no acked entry is
        # missed) and, when fencing, that the old writer can no longer reach an ack quorum.
        needed = len(md.ensemble) - md.ack_quorum + 1
        if len(infos) < needed:
            raise quorum_error(md.ledger_id, errors)
        return infos

    async def probe_lac(self, md: LedgerMetadata, known: int) -> int:
        """How far a writer of an open ledger got: the highest entry durable on an ack quorum with
        every lower one too (for tailing readers)."""
        infos = await self._lac_infos(md, fence=False)
        entry_id = max([known, *(lac for lac, _ in infos)])
        highest = max(last for _, last in infos)
        while entry_id < highest:
            try:
                _, lacking, _ = await read_entry_from_any(self, md, entry_id + 1)
            except NoSuchEntry:
                break
            if md.write_quorum - len(lacking) < md.ack_quorum:
                break
            entry_id += 1
        return entry_id

    # -- opening / recovery ----------------------------------------------------------------------
    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> LedgerReader:
        """Open a ledger for reading.

        ``recovery=True`` fences it (the previous writer's next add fails with ``LedgerFenced``),
        recovers the last entry and closes it. ``recovery=False`` only reads; use
        ``refresh_last_add_confirmed`` to follow an open ledger.

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
        last, length = await self._recover_tail(md)
        while True:
            closed = dataclasses.replace(
                md, state=LedgerState.CLOSED, last_entry_id=last, length=length
            )
            if await self.write_metadata(closed, version):
                return LedgerReader(self, closed, last)
            md, version = await self.read_metadata(ledger_id)
            if md.state is LedgerState.CLOSED:
                # Another recovery finished first; both saw the same fenced bookies.
                return LedgerReader(self, md, md.last_entry_id)

    async def _recover_tail(self, md: LedgerMetadata) -> tuple[int, int]:
        """Fence the ledger on its bookies, then find (and re-replicate) its last entry."""
        infos = await self._lac_infos(md, fence=True)
        last = max(lac for lac, _ in infos)
        highest = max(h for _, h in infos)
        length = 0
        if last >= 0:
            _, _, length = await read_entry_from_any(self, md, last)
        bookies = self.bookies_for(md)
        # Entries past the highest piggybacked LAC may or may not have been acknowledged: keep every
        # one still readable in sequence, and make sure its whole write set has it.
        while last < highest:
            try:
                entry, lacking, entry_length = await read_entry_from_any(self, md, last + 1)
            except NoSuchEntry:
                break
            targets = [bookies[b] for b in lacking if b in bookies]
            if targets:
                # Wait for every copy (not just a quorum): the ledger is about to be closed and
                # its write sets should be whole.
                results = await asyncio.gather(
                    *(
                        b.add_entry(
                            md.ledger_id,
                            entry.entry_id,
                            entry.data,
                            last_add_confirmed=last,
                            length=entry_length,
                            recovery=True,
                        )
                        for b in targets
                    ),
                    return_exceptions=True,
                )
                copies = md.write_quorum - len(lacking) + sum(r is None for r in results)
                if copies < md.ack_quorum:
                    raise BookieUnavailable(f"ledger {md.ledger_id}: cannot re-replicate entry")
            last += 1
            length = entry_length
        return last, length

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
        results = await asyncio.gather(
            *(b.delete_ledger(ledger_id) for b in self.bookies_for(md).values()),
            return_exceptions=True,
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
        """Close the bookie clients (and the bookies this client owns). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for bookie in self._bookies.values():
            await bookie.close()


def _conforms(client: BookKeeperClient, writer: LedgerWriter, reader: LedgerReader) -> None:
    # Never called: makes mypy prove the classes implement the contract in braid.storage.api.
    as_client: StorageClient = client
    as_writer: WriteHandle = writer
    as_reader: ReadHandle = reader
    del as_client, as_writer, as_reader
