"""Embedded durable metadata store on one SQLite file (the default of ``braid standalone``).

Durability: WAL journal with ``synchronous=FULL``, so every acknowledged write survives ``kill -9``
and power loss; every compare-and-swap runs inside one ``BEGIN IMMEDIATE`` transaction. All sqlite
calls run on the store's own worker thread, never on the event loop.

Group commit (ADR 0077): writes that queue while the worker thread is busy (or not yet awake) are
committed together - one transaction, one sync of the journal - each inside its own savepoint, so
each is still atomic and checked on its own (a ``BadVersion`` fails that write alone), and they
apply in the order they were called. None is answered before the group's commit. If the group
fails as a whole (an I/O error, a full disk), it is rolled back and its writes are run again one by
one, so each gets the answer it would have had alone.

Sessions and ephemeral nodes: each store is a session with a row in ``sessions`` and a lock file
(``<db>.sessions/<id>.lock``, a :class:`~braid.filelock.FileLock`) it holds while it lives. Its
ephemeral nodes carry its id. On close they are deleted; a session whose lock file can be locked by
someone else is dead (its process exited or was killed, which releases the lock), and its ephemeral
nodes are reaped when any store opens the file and then every ``reap_interval`` seconds. A second
live process sharing the file keeps its nodes because its lock is held.

Notifications: every write appends its notifications to a ``changes`` table in the same
transaction. Each store reads that log in sequence order - immediately after any write made in
this process, and by polling every ``poll_interval`` seconds for writes from other processes - so
every listener sees every change to the file in commit order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from braid.clock import Clock, SystemClock
from braid.filelock import FileLock, is_locked
from braid.metadata.api import (
    BadVersion,
    InvalidPath,
    NodeNotEmpty,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
    SessionLost,
    Stat,
    StoreClosed,
    StoreUnavailable,
)
from braid.metadata.base import MetadataStoreBase
from braid.metadata.dispatch import ListenerDispatcher
from braid.metadata.paths import (
    ROOT,
    ancestors,
    name_of,
    parent_of,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    path TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    value BLOB NOT NULL,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL,
    owner TEXT
);
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent);
CREATE INDEX IF NOT EXISTS nodes_by_owner ON nodes(owner) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    started_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    path TEXT NOT NULL
);
"""

#: The change log keeps at least this many entries; a reader further behind misses the rest.
CHANGE_LOG_KEEP = 10_000
_ROOT_STAT = Stat(version=0, created_ms=0, modified_ms=0, ephemeral=False)


class _FileHub:
    """The live stores of this process on one database file (to wake them after a write)."""

    _hubs: dict[str, _FileHub] = {}
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._stores: weakref.WeakSet[SqliteMetadataStore] = weakref.WeakSet()
        self._lock = threading.Lock()  # worker threads of several stores wake each other

    def add(self, store: SqliteMetadataStore) -> None:
        with self._lock:
            self._stores.add(store)

    def discard(self, store: SqliteMetadataStore) -> None:
        with self._lock:
            self._stores.discard(store)

    @classmethod
    def for_file(cls, path: str) -> _FileHub:
        with cls._guard:
            hub = cls._hubs.get(path)
            if hub is None:
                hub = cls._hubs[path] = _FileHub()
            return hub

    def wake_all(self) -> None:
        with self._lock:
            stores = list(self._stores)
        for store in stores:
            store._schedule_pump()


class SqliteMetadataStore(MetadataStoreBase):
    """A :class:`~braid.metadata.api.MetadataStore` session on a SQLite file."""

    def __init__(
        self,
        db_path: str,
        *,
        clock: Clock | None = None,
        reap_interval: float = 2.0,
        poll_interval: float = 0.1,
    ) -> None:
        self._db_path = os.path.realpath(db_path)
        self._clock: Clock = clock or SystemClock()
        self._reap_interval = reap_interval
        self._poll_interval = poll_interval
        self._session_id = f"sqlite-{uuid.uuid4().hex[:16]}"
        self._lock_dir = Path(self._db_path + ".sessions")
        self._session_lock = FileLock(self._lock_file(self._session_id))
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"braid-{self._session_id}"
        )
        self._dispatcher = ListenerDispatcher(self._session_id)
        self._hub = _FileHub.for_file(self._db_path)
        self._last_seq = 0
        self._pump_pending = threading.Event()
        # Group commit: writes queued for the worker thread (appended on the loop, taken by the
        # worker under the lock); ``_grouping`` is set on the worker while a group runs.
        self._queued_writes: list[tuple[Callable[[], object], asyncio.Future[object]]] = []
        self._queue_lock = threading.Lock()
        self._grouping = False
        #: Write transactions committed (a group counts once): what tests and benchmarks read.
        self.commits = 0
        self._closed = False
        self._lost = False
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    async def open(
        cls,
        db_path: str,
        *,
        clock: Clock | None = None,
        reap_interval: float = 2.0,
        poll_interval: float = 0.1,
    ) -> SqliteMetadataStore:
        """Open (creating if needed) the store at ``db_path`` and start a new session.

        Raises:
            StoreUnavailable: the file cannot be opened or is not a Braid metadata database.
        """
        store = cls(db_path, clock=clock, reap_interval=reap_interval, poll_interval=poll_interval)
        store._loop = asyncio.get_running_loop()
        store._dispatcher.bind(store._loop)
        try:
            await store._call(store._open_sync)
        except BaseException:
            await store._abandon()
            raise
        store._hub.add(store)
        store._tasks.append(asyncio.create_task(store._reap_loop(), name="sqlite-reaper"))
        store._tasks.append(asyncio.create_task(store._poll_loop(), name="sqlite-poller"))
        return store

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def db_path(self) -> str:
        return self._db_path

    # -- worker-thread plumbing -----------------------------------------------------------------

    async def _call(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn)
        except (sqlite3.Error, OSError) as exc:
            raise self._unavailable(exc) from exc

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed(f"metadata store {self._session_id} is closed")
        if self._lost:
            raise SessionLost(f"session {self._session_id} expired")

    @property
    def _db(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    def _unavailable(self, exc: BaseException) -> BaseException:
        """What a caller sees of ``exc``: sqlite and OS errors become :class:`StoreUnavailable`."""
        if isinstance(exc, sqlite3.Error | OSError):
            failure = StoreUnavailable(f"sqlite metadata store {self._db_path}: {exc}")
            failure.__cause__ = exc
            return failure
        return exc

    async def _write(self, fn: Callable[[], T]) -> T:
        """Run the write ``fn`` on the worker thread, committed with every other write queued
        meanwhile (group commit; see the module doc)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        with self._queue_lock:
            self._queued_writes.append((fn, future))
            first = len(self._queued_writes) == 1
        if first:
            try:
                self._executor.submit(self._commit_group_sync, loop)
            except RuntimeError as exc:  # executor shut down: the store is closing
                with self._queue_lock:
                    self._queued_writes.clear()
                raise StoreClosed(f"metadata store {self._session_id} is closed") from exc
        return await future  # type: ignore[return-value]

    def _commit_group_sync(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._queue_lock:
            queued, self._queued_writes = self._queued_writes, []
        group = [(fn, future) for fn, future in queued if not future.cancelled()]
        outcomes: list[tuple[asyncio.Future[object], bool, object]] = []
        try:
            grouped = len(group) > 1 and self._try_group_sync(group, outcomes)
        except BaseException as exc:  # e.g. the connection is gone: each write says so below
            log.debug("group commit of %d writes not run (%r); one by one", len(group), exc)
            grouped = False
        if grouped:
            self._hub.wake_all()
        else:
            outcomes.clear()
            for fn, future in group:  # one by one: alone, or after the group failed as a whole
                try:
                    outcomes.append((future, True, fn()))
                except BaseException as exc:
                    outcomes.append((future, False, self._unavailable(exc)))

        def settle() -> None:
            for future, ok, value in outcomes:
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    assert isinstance(value, BaseException)
                    future.set_exception(value)

        with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle)

    def _try_group_sync(
        self,
        group: list[tuple[Callable[[], object], asyncio.Future[object]]],
        outcomes: list[tuple[asyncio.Future[object], bool, object]],
    ) -> bool:
        """Run ``group`` in one transaction, each write in a savepoint; ``False`` (all rolled
        back) when the group failed as a whole."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            return False
        self._grouping = True
        try:
            for fn, future in group:
                try:
                    outcomes.append((future, True, fn()))
                except (sqlite3.Error, OSError):
                    raise
                except BaseException as exc:  # this write's own failure, rolled back alone
                    outcomes.append((future, False, exc))
            db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            log.debug("group commit of %d writes failed (%s); one by one", len(group), exc)
            self._rollback_sync()
            return False
        finally:
            self._grouping = False
        self.commits += 1
        return True

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[list[Notification]]:
        """One write transaction (a savepoint inside a group commit); the yielded list collects
        its notifications for the log."""
        if self._grouping:
            with self._savepoint() as group_events:
                yield group_events
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        events: list[Notification] = []
        try:
            yield events
            self._log_changes(events)
            db.execute("COMMIT")
        except BaseException:
            self._rollback_sync()
            raise
        self.commits += 1
        if events:
            self._hub.wake_all()

    def _log_changes(self, events: list[Notification]) -> None:
        if events:
            self._db.executemany(
                "INSERT INTO changes(type, path) VALUES (?, ?)",
                [(e.type.value, e.path) for e in events],
            )

    def _rollback_sync(self) -> None:
        # A COMMIT that fails ("database or disk is full") may already have rolled the
        # transaction back: a second ROLLBACK would raise "no transaction is active" and every
        # caller would see that instead of the cause.
        db = self._db
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error as rollback_failure:
                log.debug("rollback after a failed write also failed: %s", rollback_failure)

    @contextlib.contextmanager
    def _savepoint(self) -> Iterator[list[Notification]]:
        """One write of a group: its statements and its change-log rows stand or fall together."""
        db = self._db
        db.execute("SAVEPOINT braid_write")
        events: list[Notification] = []
        try:
            yield events
            self._log_changes(events)
        except BaseException:
            db.execute("ROLLBACK TO braid_write")
            db.execute("RELEASE braid_write")
            raise
        db.execute("RELEASE braid_write")

    def _open_sync(self) -> None:
        Path(self._db_path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._db_path, isolation_level=None, timeout=30.0)
        self._conn = conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        try:
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"{self._db_path} is not a metadata database: {exc}") from exc
        self._session_lock.acquire(f"metadata session {self._session_id} is already open")
        with self._write_txn():
            conn.execute(
                "INSERT INTO sessions(id, pid, started_ms) VALUES (?, ?, ?)",
                (self._session_id, os.getpid(), self._clock.now_ms()),
            )
        self._reap_sync()
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
        self._last_seq = int(row[0])

    def _lock_file(self, session_id: str) -> Path:
        return self._lock_dir / f"{session_id}.lock"

    def _session_is_dead(self, session_id: str) -> bool:
        """A session is dead when nobody holds its lock file (flock dies with its process)."""
        return not is_locked(self._lock_file(session_id))

    def _reap_sync(self) -> int:
        """Remove the sessions (and ephemeral nodes) of dead owners; returns nodes removed."""
        db = self._db
        others = [
            r[0] for r in db.execute("SELECT id FROM sessions WHERE id != ?", (self._session_id,))
        ]
        removed = 0
        for session_id in others:
            if not self._session_is_dead(session_id):
                continue
            with self._write_txn() as events:
                removed += self._drop_session_sync(session_id, events)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_file(session_id))
            log.info("reaped dead metadata session %s (%d ephemeral nodes)", session_id, removed)
        self._trim_change_log_sync()
        return removed

    def _drop_session_sync(self, session_id: str, events: list[Notification]) -> int:
        db = self._db
        paths = [
            r[0]
            for r in db.execute(
                "SELECT path FROM nodes WHERE owner = ? ORDER BY path", (session_id,)
            )
        ]
        for path in paths:
            self._remove_sync(path, events)
        db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return len(paths)

    def _trim_change_log_sync(self) -> None:
        with self._write_txn():
            self._db.execute(
                "DELETE FROM changes WHERE seq <= (SELECT MAX(seq) FROM changes) - ?",
                (CHANGE_LOG_KEEP,),
            )

    # -- notification pump ----------------------------------------------------------------------

    def _schedule_pump(self) -> None:
        """Read new change-log entries on this store's thread (called from any thread)."""
        if self._closed or self._pump_pending.is_set():
            return
        self._pump_pending.set()
        try:
            self._executor.submit(self._pump_sync)
        except RuntimeError:
            pass  # executor shut down: the store is closing

    def _pump_sync(self) -> None:
        self._pump_pending.clear()
        if self._conn is None or self._closed:
            return
        rows = self._db.execute(
            "SELECT seq, type, path FROM changes WHERE seq > ? ORDER BY seq", (self._last_seq,)
        ).fetchall()
        for seq, kind, path in rows:
            self._last_seq = seq
            self._dispatcher.post(Notification(NotificationType(kind), path))

    async def _poll_loop(self) -> None:
        # Real time on purpose: this polls the file for other processes' writes; it is I/O
        # plumbing, not a business timer a test would want to drive.
        while not self._closed:
            await asyncio.sleep(self._poll_interval)
            if self._dispatcher.has_listeners:
                self._schedule_pump()

    async def _reap_loop(self) -> None:
        while not self._closed:
            await self._clock.sleep(self._reap_interval)
            if self._closed or self._lost:
                return
            try:
                await self._call(self._reap_sync)
            except StoreUnavailable:
                log.warning("reaping dead metadata sessions failed; will retry", exc_info=True)

    # -- reads ----------------------------------------------------------------------------------

    def _get_sync(self, path: str) -> tuple[bytes, Stat] | None:
        if path == ROOT:
            return b"", _ROOT_STAT
        row = self._db.execute(
            "SELECT value, version, created_ms, modified_ms, owner FROM nodes WHERE path = ?",
            (path,),
        ).fetchone()
        if row is None:
            return None
        return bytes(row[0]), Stat(row[1], row[2], row[3], row[4] is not None, row[4])

    async def _get(self, path: str) -> tuple[bytes, Stat] | None:
        return await self._call(lambda: self._get_sync(path))

    async def _children(self, path: str) -> list[str]:
        rows = await self._call(
            lambda: self._db.execute("SELECT path FROM nodes WHERE parent = ?", (path,)).fetchall()
        )
        return sorted(name_of(r[0]) for r in rows)

    # -- writes ---------------------------------------------------------------------------------

    def _put_sync(
        self, path: str, value: bytes, expected_version: int | None, ephemeral: bool
    ) -> Stat:
        db = self._db
        with self._write_txn() as events:
            now = self._clock.now_ms()
            row = db.execute(
                "SELECT version, created_ms, owner FROM nodes WHERE path = ?", (path,)
            ).fetchone()
            if row is not None:
                version, created_ms, owner = row
                if expected_version == -1:
                    raise BadVersion(f"{path} already exists (version {version})")
                if expected_version is not None and expected_version != version:
                    raise BadVersion(f"{path} is at version {version}, expected {expected_version}")
                db.execute(
                    "UPDATE nodes SET value = ?, version = ?, modified_ms = ? WHERE path = ?",
                    (value, version + 1, now, path),
                )
                events.append(Notification(NotificationType.MODIFIED, path))
                return Stat(version + 1, created_ms, now, owner is not None, owner)
            if expected_version is not None and expected_version >= 0:
                raise BadVersion(f"{path} does not exist, expected version {expected_version}")
            for ancestor in ancestors(path):
                existing = db.execute(
                    "SELECT owner FROM nodes WHERE path = ?", (ancestor,)
                ).fetchone()
                if existing is None:
                    self._insert_sync(ancestor, b"", now, None, events)
                elif existing[0] is not None:
                    raise InvalidPath(
                        f"{ancestor} is ephemeral; ephemeral nodes cannot have children"
                    )
            owner = self._session_id if ephemeral else None
            self._insert_sync(path, value, now, owner, events)
            return Stat(0, now, now, ephemeral, owner)

    def _insert_sync(
        self, path: str, value: bytes, now: int, owner: str | None, events: list[Notification]
    ) -> None:
        parent = parent_of(path)
        self._db.execute(
            "INSERT INTO nodes(path, parent, value, version, created_ms, modified_ms, owner)"
            " VALUES (?, ?, ?, 0, ?, ?, ?)",
            (path, parent, value, now, now, owner),
        )
        events.append(Notification(NotificationType.CREATED, path))
        events.append(Notification(NotificationType.CHILDREN_CHANGED, parent))

    def _remove_sync(self, path: str, events: list[Notification]) -> None:
        self._db.execute("DELETE FROM nodes WHERE path = ?", (path,))
        events.append(Notification(NotificationType.DELETED, path))
        events.append(Notification(NotificationType.CHILDREN_CHANGED, parent_of(path)))

    def _delete_sync(self, path: str, expected_version: int | None) -> None:
        db = self._db
        with self._write_txn() as events:
            row = db.execute("SELECT version FROM nodes WHERE path = ?", (path,)).fetchone()
            if row is None:
                raise NodeNotFound(path)
            version = row[0]
            if expected_version == -1:
                raise BadVersion(f"{path} exists (version {version}), expected it absent")
            if expected_version is not None and expected_version != version:
                raise BadVersion(f"{path} is at version {version}, expected {expected_version}")
            if db.execute("SELECT 1 FROM nodes WHERE parent = ? LIMIT 1", (path,)).fetchone():
                raise NodeNotEmpty(f"{path} has children")
            self._remove_sync(path, events)

    def _delete_recursive_sync(self, path: str) -> None:
        db = self._db
        with self._write_txn() as events:
            if path == ROOT:
                rows = db.execute("SELECT path FROM nodes").fetchall()
            else:
                # Everything strictly below ``path`` sorts in [path + "/", path + "0"): "0"
                # is the character right after "/".
                rows = db.execute(
                    "SELECT path FROM nodes WHERE path = ? OR (path >= ? AND path < ?)",
                    (path, path + "/", path + "0"),
                ).fetchall()
            victims = sorted((r[0] for r in rows), key=lambda p: (-p.count("/"), p))
            for victim in victims:
                self._remove_sync(victim, events)

    async def _put(
        self, path: str, value: bytes, expected_version: int | None, ephemeral: bool
    ) -> Stat:
        return await self._write(lambda: self._put_sync(path, value, expected_version, ephemeral))

    async def _delete(self, path: str, expected_version: int | None) -> None:
        await self._write(lambda: self._delete_sync(path, expected_version))

    async def _delete_recursive(self, path: str) -> None:
        await self._write(lambda: self._delete_recursive_sync(path))

    # -- lifecycle ------------------------------------------------------------------------------

    def _end_session_sync(self) -> None:
        """Delete this session's ephemeral nodes and row, then release its lock file."""
        if self._conn is not None:
            with self._write_txn() as events:
                self._drop_session_sync(self._session_id, events)
        self._release_lock_sync()

    def _release_lock_sync(self) -> None:
        self._session_lock.release(unlink=True)

    async def expire(self) -> None:
        """End the session as if its owner had died: its ephemeral nodes are removed (others are
        notified), ``SESSION_LOST`` is delivered, and later calls raise :class:`SessionLost`."""
        if self._closed or self._lost:
            return
        self._lost = True
        await self._call(self._end_session_sync)
        self._dispatcher.post(SessionEvent.SESSION_LOST)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            if not self._lost:
                await self._call(self._end_session_sync)
            # Deliver what this session already committed before listeners go away.
            await self._call(self._pump_sync)
        finally:
            self._closed = True
            await self._abandon()
            await self._dispatcher.close()

    async def _abandon(self) -> None:
        """Stop tasks, close the connection on its thread and stop the thread."""
        self._closed = True
        self._hub.discard(self)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

        def shutdown() -> None:
            self._release_lock_sync()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await loop.run_in_executor(self._executor, shutdown)
        self._executor.shutdown(wait=False)
