"""In-process metadata store: a versioned tree in memory, shared by any number of sessions.

A :class:`MemoryBackend` is the tree (the "server"); each :class:`MemoryMetadataStore` is one client
session on it, owning its ephemeral nodes. Several stores on one backend model several brokers in
one test: :meth:`MemoryMetadataStore.expire` ends a session the way a ZooKeeper expiry does (its
ephemeral nodes vanish, ``SESSION_LOST`` is delivered) and :meth:`MemoryMetadataStore.disconnect` /
:meth:`MemoryMetadataStore.reconnect` model a connection loss that the session survives.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from dataclasses import dataclass

from braid.clock import Clock, SystemClock
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
    join,
    name_of,
    parent_of,
)

_session_ids = itertools.count(1)
_named_backends: weakref.WeakValueDictionary[str, MemoryBackend] = weakref.WeakValueDictionary()
_named_guard = threading.Lock()


@dataclass(slots=True)
class _Node:
    value: bytes
    version: int
    created_ms: int
    modified_ms: int
    owner: str | None  # session id owning an ephemeral node, None when persistent

    def stat(self) -> Stat:
        ephemeral = self.owner is not None
        return Stat(self.version, self.created_ms, self.modified_ms, ephemeral, self.owner)


_ROOT_STAT = Stat(version=0, created_ms=0, modified_ms=0, ephemeral=False)


class MemoryBackend:
    """The shared tree behind one or more :class:`MemoryMetadataStore` sessions.

    All mutations happen under one lock and publish their notifications, in order, to every live
    session's dispatcher before the lock is released (delivery itself is asynchronous).
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._nodes: dict[str, _Node] = {}
        self._children: dict[str, set[str]] = {ROOT: set()}
        self._sessions: dict[str, MemoryMetadataStore] = {}
        self._lock = threading.RLock()

    @classmethod
    def named(cls, name: str, clock: Clock | None = None) -> MemoryBackend:
        """The process-wide backend called ``name`` (created on first use, dropped when unused)."""
        with _named_guard:
            backend = _named_backends.get(name)
            if backend is None:
                backend = cls(clock)
                _named_backends[name] = backend
            return backend

    # -- sessions -------------------------------------------------------------------------------

    def _attach(self, store: MemoryMetadataStore) -> None:
        with self._lock:
            self._sessions[store.session_id] = store

    def _detach(self, session_id: str) -> None:
        """End ``session_id``: drop it and delete its ephemeral nodes (others are notified)."""
        with self._lock:
            self._sessions.pop(session_id, None)
            owned = [p for p, n in self._nodes.items() if n.owner == session_id]
            # Deepest first is irrelevant (ephemerals have no children) but keeps order stable.
            for path in sorted(owned):
                self._remove(path)

    def expire_session(self, session_id: str) -> None:
        """Expire a session as a ZooKeeper server would: its ephemeral nodes go, it learns
        ``SESSION_LOST`` and every later call on it raises :class:`SessionLost`."""
        with self._lock:
            store = self._sessions.get(session_id)
        if store is not None:
            store.expire()

    @property
    def session_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._sessions)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        with self._lock:
            if path == ROOT:
                return b"", _ROOT_STAT
            node = self._nodes.get(path)
            return None if node is None else (node.value, node.stat())

    def children(self, path: str) -> list[str]:
        with self._lock:
            return sorted(self._children.get(path, ()))

    # -- writes ---------------------------------------------------------------------------------

    def put(
        self,
        session_id: str,
        path: str,
        value: bytes,
        expected_version: int | None,
        ephemeral: bool,
    ) -> Stat:
        with self._lock:
            now = self.clock.now_ms()
            node = self._nodes.get(path)
            if node is not None:
                if expected_version == -1:
                    raise BadVersion(f"{path} already exists (version {node.version})")
                if expected_version is not None and expected_version != node.version:
                    raise BadVersion(
                        f"{path} is at version {node.version}, expected {expected_version}"
                    )
                node.value = value
                node.version += 1
                node.modified_ms = now
                self._publish([Notification(NotificationType.MODIFIED, path)])
                return node.stat()
            if expected_version is not None and expected_version >= 0:
                raise BadVersion(f"{path} does not exist, expected version {expected_version}")
            parent = parent_of(path)
            self._check_parent_allows_children(parent)
            events: list[Notification] = []
            for ancestor in ancestors(path):
                if ancestor not in self._nodes:
                    self._insert(ancestor, _Node(b"", 0, now, now, None), events)
            node = _Node(value, 0, now, now, session_id if ephemeral else None)
            self._insert(path, node, events)
            self._publish(events)
            return node.stat()

    def _check_parent_allows_children(self, parent: str) -> None:
        for candidate in [*ancestors(parent), parent] if parent != ROOT else []:
            existing = self._nodes.get(candidate)
            if existing is not None and existing.owner is not None:
                raise InvalidPath(f"{candidate} is ephemeral; ephemeral nodes cannot have children")

    def _insert(self, path: str, node: _Node, events: list[Notification]) -> None:
        parent = parent_of(path)
        self._nodes[path] = node
        self._children.setdefault(path, set())
        self._children.setdefault(parent, set()).add(name_of(path))
        events.append(Notification(NotificationType.CREATED, path))
        events.append(Notification(NotificationType.CHILDREN_CHANGED, parent))

    def delete(self, path: str, expected_version: int | None) -> None:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NodeNotFound(path)
            if expected_version == -1:
                raise BadVersion(f"{path} exists (version {node.version}), expected it absent")
            if expected_version is not None and expected_version != node.version:
                raise BadVersion(
                    f"{path} is at version {node.version}, expected {expected_version}"
                )
            if self._children.get(path):
                raise NodeNotEmpty(f"{path} has children")
            self._remove(path)

    def delete_recursive(self, path: str) -> None:
        with self._lock:
            for child in self.children(path):
                self.delete_recursive(join(path, child))
            if path != ROOT and path in self._nodes:
                self._remove(path)

    def _remove(self, path: str) -> None:
        parent = parent_of(path)
        del self._nodes[path]
        self._children.pop(path, None)
        self._children.get(parent, set()).discard(name_of(path))
        self._publish(
            [
                Notification(NotificationType.DELETED, path),
                Notification(NotificationType.CHILDREN_CHANGED, parent),
            ]
        )

    def _publish(self, events: list[Notification]) -> None:
        for store in list(self._sessions.values()):
            for event in events:
                store._dispatcher.post(event)


class MemoryMetadataStore(MetadataStoreBase):
    """One session on a :class:`MemoryBackend` (a private one unless ``backend`` is given)."""

    def __init__(
        self,
        backend: MemoryBackend | None = None,
        *,
        clock: Clock | None = None,
        session_id: str | None = None,
    ) -> None:
        self._backend = backend if backend is not None else MemoryBackend(clock)
        self._session_id = session_id or f"memory-{next(_session_ids)}"
        self._dispatcher = ListenerDispatcher(self._session_id)
        self._closed = False
        self._lost = False
        self._suspended = False
        try:
            self._dispatcher.bind(asyncio.get_running_loop())
        except RuntimeError:
            pass  # bound on first use inside a loop
        self._backend._attach(self)

    @classmethod
    def shared(
        cls, backend: MemoryBackend, *, session_id: str | None = None
    ) -> MemoryMetadataStore:
        """A new session on an existing tree (another "broker" in the same test)."""
        return cls(backend, session_id=session_id)

    @property
    def backend(self) -> MemoryBackend:
        return self._backend

    @property
    def session_id(self) -> str:
        return self._session_id

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed(f"metadata store {self._session_id} is closed")
        if self._lost:
            raise SessionLost(f"session {self._session_id} expired")
        if self._suspended:
            raise StoreUnavailable(f"session {self._session_id} is disconnected")
        try:
            self._dispatcher.bind(asyncio.get_running_loop())
        except RuntimeError:
            pass

    async def _get(self, path: str) -> tuple[bytes, Stat] | None:
        return self._backend.get(path)

    async def _put(
        self, path: str, value: bytes, expected_version: int | None, ephemeral: bool
    ) -> Stat:
        return self._backend.put(self._session_id, path, value, expected_version, ephemeral)

    async def _delete(self, path: str, expected_version: int | None) -> None:
        self._backend.delete(path, expected_version)

    async def _delete_recursive(self, path: str) -> None:
        self._backend.delete_recursive(path)

    async def _children(self, path: str) -> list[str]:
        return self._backend.children(path)

    # -- fault hooks for tests ------------------------------------------------------------------

    def expire(self) -> None:
        """End this session as a server-side expiry would (ephemeral nodes go, SESSION_LOST)."""
        if self._closed or self._lost:
            return
        self._lost = True
        self._backend._detach(self._session_id)
        self._dispatcher.post(SessionEvent.SESSION_LOST)

    def disconnect(self) -> None:
        """Model a lost connection: calls raise StoreUnavailable, SUSPENDED is delivered."""
        if self._closed or self._lost or self._suspended:
            return
        self._suspended = True
        self._dispatcher.post(SessionEvent.SUSPENDED)

    def reconnect(self) -> None:
        """End a :meth:`disconnect`: the same session resumes, RECONNECTED is delivered."""
        if not self._suspended or self._closed or self._lost:
            return
        self._suspended = False
        self._dispatcher.post(SessionEvent.RECONNECTED)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._lost:
            self._backend._detach(self._session_id)
        await self._dispatcher.close()


def open_named_or_private(name: str, clock: Clock | None) -> MemoryMetadataStore:
    """The store ``memory://`` (private tree) or ``memory://name`` (process-wide tree) opens."""
    backend = MemoryBackend.named(name, clock) if name else MemoryBackend(clock)
    return MemoryMetadataStore(backend)
