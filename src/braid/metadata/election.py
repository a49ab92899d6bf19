"""Leader election over any :class:`~braid.metadata.api.MetadataStore` (Pulsar's scheme).

The leader is whoever created the ephemeral node at ``path`` (``put`` with ``expected_version=-1``);
its value names the leader and anyone can read it. Followers watch the node through the store's
notifications and race to create it when it is deleted - which happens when the leader resigns
(:meth:`LeaderElection.close`) or its session ends. Between the deletion and the next creation
every contender is ``NO_LEADER``. A contender whose own session is lost becomes ``NO_LEADER`` for
good: its store is dead and it must start over with a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable

from braid.metadata.api import (
    BadVersion,
    MetadataError,
    MetadataStore,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
)
from braid.metadata.paths import validate_writable_path

log = logging.getLogger(__name__)


class LeaderElectionState(enum.Enum):
    LEADING = "leading"
    FOLLOWING = "following"
    NO_LEADER = "no_leader"


StateListener = Callable[[LeaderElectionState], Awaitable[None] | None]


async def read_leader(store: MetadataStore, path: str) -> bytes | None:
    """The current leader's value at ``path``, or ``None`` if there is no leader."""
    found = await store.get(path)
    return None if found is None else found[0]


class LeaderElection:
    """One contender for leadership of ``path``, proposing ``value``."""

    def __init__(
        self,
        store: MetadataStore,
        path: str,
        value: bytes,
        *,
        on_state_change: StateListener | None = None,
    ) -> None:
        self._store = store
        self._path = validate_writable_path(path)
        self._value = value
        self._state = LeaderElectionState.NO_LEADER
        self._listeners: list[StateListener] = [on_state_change] if on_state_change else []
        self._owned_version: int | None = None  # version of the node we created, while leading
        self._leader_value: bytes | None = None
        self._lock = asyncio.Lock()
        self._unsubscribe: list[Callable[[], None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False
        self._session_lost = False
        self._suspended = False
        self._epoch = 0  # bumped on every SUSPENDED / SESSION_LOST

    @property
    def state(self) -> LeaderElectionState:
        return self._state

    @property
    def is_leader(self) -> bool:
        return self._state is LeaderElectionState.LEADING

    @property
    def path(self) -> str:
        return self._path

    async def start(self) -> LeaderElectionState:
        """Join the election; returns the state reached (LEADING or FOLLOWING)."""
        if self._started:
            return self._state
        self._started = True
        self._unsubscribe.append(self._store.register_listener(self._on_notification))
        self._unsubscribe.append(self._store.register_session_listener(self._on_session))
        await self._elect()
        return self._state

    async def leader_value(self) -> bytes | None:
        """The current leader's value, read from the store (``None`` during a gap)."""
        return await read_leader(self._store, self._path)

    @property
    def cached_leader_value(self) -> bytes | None:
        """The leader's value as of this contender's last look, without a store call."""
        return self._leader_value

    async def _elect(self) -> None:
        async with self._lock:
            if self._closed or self._session_lost or self._suspended:
                return
            epoch = self._epoch
            while True:
                try:
                    stat = await self._store.put(self._path, self._value, -1, ephemeral=True)
                except BadVersion:
                    found = await self._store.get(self._path)
                    if found is None:
                        continue  # the holder vanished between our two calls: race again
                    value, stat = found
                    if self._epoch != epoch:
                        return  # disconnected meanwhile: what we read may be stale
                    if stat.owner == self._store.session_id and value == self._value:
                        # Our own node (we led before a disconnection): still leading. Another
                        # contender sharing this store's session (several services of one
                        # process) proposes another value: it leads, not us.
                        self._owned_version = stat.version
                        self._leader_value = value
                        await self._set_state(LeaderElectionState.LEADING)
                        return
                    self._owned_version = None
                    self._leader_value = value
                    await self._set_state(LeaderElectionState.FOLLOWING)
                    return
                self._owned_version = stat.version
                if self._epoch != epoch:
                    return  # our node exists, but RECONNECTED must confirm the session first
                self._leader_value = self._value
                await self._set_state(LeaderElectionState.LEADING)
                return

    async def _set_state(self, state: LeaderElectionState) -> None:
        if state is self._state:
            return
        log.info("election %s: %s -> %s", self._path, self._state.name, state.name)
        self._state = state
        for listener in list(self._listeners):
            try:
                result = listener(state)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("leader election state listener failed; ignored")

    def _spawn(self, step: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            try:
                await step()
            except MetadataError as exc:
                log.warning("election %s: store call failed: %r", self._path, exc)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_notification(self, notification: Notification) -> None:
        if notification.path != self._path or self._closed or self._session_lost:
            return
        if notification.type is NotificationType.DELETED:
            self._spawn(self._after_delete)
        elif self._state is not LeaderElectionState.LEADING:
            # CREATED/MODIFIED: a new or changed leader; refresh what we know of it.
            self._spawn(self._elect)

    async def _after_delete(self) -> None:
        async with self._lock:
            self._owned_version = None
            self._leader_value = None
            await self._set_state(LeaderElectionState.NO_LEADER)
        await self._elect()

    async def _on_session(self, event: SessionEvent) -> None:
        if self._closed:
            return
        if event in (SessionEvent.SUSPENDED, SessionEvent.SESSION_LOST):
            self._epoch += 1
        if event is SessionEvent.SESSION_LOST:
            self._session_lost = True
            self._owned_version = None
            self._leader_value = None
            await self._set_state(LeaderElectionState.NO_LEADER)
        elif event is SessionEvent.SUSPENDED:
            self._suspended = True
            # Cut off from the store we cannot know whether our session survives; acting as
            # leader meanwhile could make two leaders. RECONNECTED re-checks the node.
            if self._state is LeaderElectionState.LEADING:
                await self._set_state(LeaderElectionState.NO_LEADER)
        elif event is SessionEvent.RECONNECTED:
            self._suspended = False
            # Changes made while disconnected were not seen: look again.
            self._spawn(self._elect)

    async def close(self) -> None:
        """Leave the election; a leader resigns by deleting its node (others take over)."""
        if self._closed:
            return
        self._closed = True
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        async with self._lock:
            if self._owned_version is not None and not self._session_lost:
                with contextlib.suppress(NodeNotFound, BadVersion, MetadataError):
                    await self._store.delete(self._path, self._owned_version)
            self._owned_version = None
            await self._set_state(LeaderElectionState.NO_LEADER)
