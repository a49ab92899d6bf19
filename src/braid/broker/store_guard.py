"""The start-up guard: one broker per metadata store (issue 22, ADR 0040).

A ``braid standalone`` keeps its ledgers' *metadata* (ledger documents, the ledger-id generator,
managed-ledger lists, cursors) in the metadata store, and, unless it runs on external bookies, their
*entries* in bookies inside its own process, on its own data directory. Two such processes on one
store see each other's topics but not each other's entries: the second one to open a topic
"recovers" the first one's ledger by fencing its *own* bookie, which never held it, closes it as
empty in the shared metadata, and every message the first one acknowledged becomes unreadable.
Shared bookies do not make two brokers on one store safe either, as long as brokers do not own
topics: both serve any topic, each takes the other's ledger over, and a ledger the new owner
deletes (an empty one at once, the others when trimmed) loses its fence on the bookies, so the
old owner's next sends are acknowledged into a ledger nobody lists. So:

* ``/admin/metadata-store/broker`` - an **ephemeral** node, created with compare-and-swap
  (``expected_version=-1``) through the :class:`~braid.metadata.lock.Lock` recipe, holding the
  live broker's address, admin URL, data directory, host and pid. A second broker finds it taken
  and is refused with :class:`MetadataStoreInUse`, which names the first one. The node lives as
  long as the broker's metadata session: a SIGKILLed broker's node goes when its SQLite session is
  reaped (at once, when the next process opens the file) or its ZooKeeper session expires. A
  broker restarting on the same data directory finds its previous incarnation's node (the same
  storage id; nobody else can hold that directory: its lock file is ours) and waits for that
  session to end, up to twice the session timeout, instead of refusing.
* ``/admin/metadata-store/storage`` - with process-local storage only
  (:attr:`braid.broker.config.BrokerConfig.storage_is_process_local`), a **persistent** node naming
  the storage the store's ledgers live on: the data directory and its *storage id* (a random id
  kept in ``<dataDir>/storage.id``, made once). Written with CAS the first time such a broker
  starts on the store; afterwards a broker whose data directory holds another storage id is
  refused with :class:`StorageMismatch` even when nobody else is running, so a second data
  directory never "recovers" (fences) ledgers its bookies never held. Brokers on external bookies
  can read every ledger from any data directory, and do not bind the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from braid.clock import Clock
from braid.core.errors import IllegalStateError
from braid.metadata.api import BadVersion, MetadataStore
from braid.metadata.lock import Lock

log = logging.getLogger(__name__)

#: Root of the guard's nodes.
GUARD_ROOT = "/admin/metadata-store"
#: The live broker's claim (ephemeral).
BROKER_CLAIM_PATH = f"{GUARD_ROOT}/broker"
#: The storage the store's ledgers live on (persistent).
STORAGE_BINDING_PATH = f"{GUARD_ROOT}/storage"
#: The file in the data directory naming its storage.
STORAGE_ID_FILE = "storage.id"


class MetadataStoreInUse(IllegalStateError):
    """Another live broker uses this metadata store."""


class StorageMismatch(IllegalStateError):
    """The metadata store's ledgers live in another data directory's bookies."""


@dataclass(frozen=True)
class BrokerClaim:
    """Who holds the store: the JSON value of :data:`BROKER_CLAIM_PATH`."""

    data_dir: str
    host: str
    pid: int
    storage_id: str
    service_url: str
    web_service_url: str

    def encode(self) -> bytes:
        doc = {
            "dataDir": self.data_dir,
            "host": self.host,
            "pid": self.pid,
            "storageId": self.storage_id,
            "brokerServiceUrl": self.service_url,
            "webServiceUrl": self.web_service_url,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> BrokerClaim | None:
        """The claim in ``raw``; ``None`` when it cannot be read (the caller names the node)."""
        try:
            doc = json.loads(raw)
            return cls(
                data_dir=str(doc["dataDir"]),
                host=str(doc["host"]),
                pid=int(doc["pid"]),
                storage_id=str(doc["storageId"]),
                service_url=str(doc["brokerServiceUrl"]),
                web_service_url=str(doc["webServiceUrl"]),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """The holder, as an operator looks for it."""
        return (
            f"broker {self.service_url} (admin {self.web_service_url}, data directory "
            f"{self.data_dir}, host {self.host}, pid {self.pid})"
        )


@dataclass(frozen=True)
class StorageBinding:
    """The storage holding the store's ledgers: the JSON value of :data:`STORAGE_BINDING_PATH`."""

    storage_id: str
    data_dir: str
    host: str

    def encode(self) -> bytes:
        doc = {"storageId": self.storage_id, "dataDir": self.data_dir, "host": self.host}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StorageBinding | None:
        try:
            doc = json.loads(raw)
            return cls(str(doc["storageId"]), str(doc["dataDir"]), str(doc["host"]))
        except (ValueError, KeyError, TypeError):
            return None


def storage_id_of(data_dir: Path) -> str:
    """The data directory's storage id, made (and fsynced) the first time it is asked for.

    Raises:
        OSError: the file cannot be read or written.
    """
    path = data_dir / STORAGE_ID_FILE
    with contextlib.suppress(FileNotFoundError):
        existing = path.read_text(encoding="ascii").strip()
        if existing:
            return existing
    made = uuid.uuid4().hex
    tmp = path.with_name(STORAGE_ID_FILE + ".tmp")
    with tmp.open("w", encoding="ascii") as handle:
        handle.write(made + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself is durable
    finally:
        os.close(fd)
    return made


class StoreGuard:
    """This broker's claim on its metadata store (see the module docstring).

    :meth:`acquire` before anything reads or writes ledger metadata; :meth:`announce` once the
    broker's real URLs are known; :meth:`release` (or closing the store) at shutdown.
    """

    def __init__(
        self,
        store: MetadataStore,
        store_url: str,
        data_dir: Path,
        *,
        service_url: str,
        web_service_url: str,
        clock: Clock,
        session_timeout_s: float,
        storage_is_process_local: bool = True,
    ) -> None:
        """``storage_is_process_local``: the broker's bookies live in its process (on
        ``data_dir``), so the store is also bound to that storage."""
        self._store = store
        self._bind_storage = storage_is_process_local
        self._store_url = store_url
        self._data_dir = Path(data_dir)
        self._clock = clock
        self._predecessor_wait_s = 2 * session_timeout_s
        self._claim = BrokerClaim(
            data_dir=str(self._data_dir),
            host=socket.gethostname(),
            pid=os.getpid(),
            storage_id="",
            service_url=service_url,
            web_service_url=web_service_url,
        )
        self._lock: Lock | None = None

    @property
    def claim(self) -> BrokerClaim:
        """What this broker wrote (or will write) into the store."""
        return self._claim

    async def acquire(self) -> None:
        """Claim the store and, with process-local storage, check that its ledgers live in this
        data directory.

        Raises:
            MetadataStoreInUse: another live broker holds the claim.
            StorageMismatch: the store's ledgers live in another data directory's bookies.
        """
        storage_id = await asyncio.to_thread(storage_id_of, self._data_dir)
        self._claim = BrokerClaim(**{**asdict(self._claim), "storage_id": storage_id})
        lock = Lock(self._store, BROKER_CLAIM_PATH, self._claim.encode())
        self._lock = lock
        try:
            await self._take(lock)
            if self._bind_storage:
                await self._check_binding(storage_id)
        except BaseException:
            await self.release()
            raise
        log.info(
            "claimed the metadata store for this broker",
            extra={
                "fields": {
                    "store": self._store_url,
                    "storageId": storage_id,
                    "processLocalStorage": self._bind_storage,
                }
            },
        )

    async def _take(self, lock: Lock) -> None:
        if await lock.try_acquire():
            return
        holder = await self._holder()
        if holder is None or not self._is_predecessor(holder):
            raise self._in_use(holder)
        # Our own previous incarnation: it died without closing its session; wait for the
        # session to end (bounded: a live copy of this directory elsewhere never ends it).
        log.warning(
            "the metadata store still holds the claim of this data directory's previous broker "
            "(pid %d); waiting up to %.0fs for its session to end",
            holder.pid,
            self._predecessor_wait_s,
        )
        acquired = asyncio.ensure_future(lock.acquire())
        deadline = asyncio.ensure_future(self._clock.sleep(self._predecessor_wait_s))
        try:
            await asyncio.wait([acquired, deadline], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (acquired, deadline):
                waiter.cancel()
            await asyncio.gather(acquired, deadline, return_exceptions=True)
        if not lock.held:
            raise self._in_use(await self._holder())

    async def _holder(self) -> BrokerClaim | None:
        found = await self._store.get(BROKER_CLAIM_PATH)
        return None if found is None else BrokerClaim.decode(found[0])

    def _is_predecessor(self, holder: BrokerClaim) -> bool:
        # The same storage: this data directory's previous broker (nobody else holds the
        # directory now: its lock file is ours), maybe under another host name or path.
        return holder.storage_id == self._claim.storage_id

    def _in_use(self, holder: BrokerClaim | None) -> MetadataStoreInUse:
        who = holder.describe() if holder is not None else "another broker"
        if self._bind_storage:
            why = (
                f"this broker keeps its ledgers in bookies inside its own process (data "
                f"directory {self._data_dir}), so it cannot share a metadata store with another "
                "broker: the two would fence and close each other's ledgers and lose "
                "acknowledged messages. Give each broker a metadata store of its own (the "
                "default is <dataDir>/metadata/metadata.db)"
            )
        else:
            why = (
                "standalone brokers do not own topics, so two on one metadata store would take "
                "each other's ledgers over, even on shared bookies. Give each standalone a "
                "metadata store of its own (they may still share bookies through "
                "bookkeeperMetadataServiceUri), or run `braid broker` processes, which share a "
                "store and own topics by namespace bundle (docs/deploy.md)"
            )
        return MetadataStoreInUse(f"metadata store {self._store_url} is in use by {who}; {why}")

    async def _check_binding(self, storage_id: str) -> None:
        mine = StorageBinding(storage_id, self._claim.data_dir, self._claim.host)
        while True:
            found = await self._store.get(STORAGE_BINDING_PATH)
            if found is None:
                try:
                    await self._store.put(STORAGE_BINDING_PATH, mine.encode(), -1)
                except BadVersion:
                    continue  # another broker bound it first: compare with theirs
                return
            bound = StorageBinding.decode(found[0])
            if bound is not None and bound.storage_id == storage_id:
                if bound != mine:
                    # The same storage, moved (a renamed directory or another host name).
                    with contextlib.suppress(BadVersion):
                        await self._store.put(STORAGE_BINDING_PATH, mine.encode(), found[1].version)
                return
            where = (
                f"data directory {bound.data_dir} on host {bound.host} (storage id "
                f"{bound.storage_id})"
                if bound is not None
                else f"another data directory (unreadable node {STORAGE_BINDING_PATH})"
            )
            raise StorageMismatch(
                f"metadata store {self._store_url} holds the ledgers of the bookies in {where}, "
                f"not of this data directory {self._data_dir} (storage id {storage_id}): this "
                "broker's bookies never held those ledgers and opening them here would close "
                "them as empty. Start the broker on that data directory, or give this one a "
                "metadata store of its own"
            )

    async def announce(self, service_url: str, web_service_url: str) -> None:
        """Put the broker's real URLs (known once its ports are bound) into the claim."""
        if self._lock is None or not self._lock.held:
            return
        self._claim = BrokerClaim(
            **{
                **asdict(self._claim),
                "service_url": service_url,
                "web_service_url": web_service_url,
            }
        )
        await self._lock.update(self._claim.encode())

    async def release(self) -> None:
        """Give the claim up (a binding stays: the ledgers still live here). Idempotent."""
        lock, self._lock = self._lock, None
        if lock is not None:
            await lock.close()


__all__ = [
    "BROKER_CLAIM_PATH",
    "GUARD_ROOT",
    "STORAGE_BINDING_PATH",
    "STORAGE_ID_FILE",
    "BrokerClaim",
    "MetadataStoreInUse",
    "StorageBinding",
    "StorageMismatch",
    "StoreGuard",
    "storage_id_of",
]
