"""ZooKeeper metadata store via kazoo: versions, ephemeral nodes and sessions are ZooKeeper's.

Calls use kazoo's asynchronous API (kazoo runs its own connection thread) and results are bridged
back to the event loop with ``call_soon_threadsafe``, so nothing blocks the loop.

Notifications for *any* path come from one persistent recursive watch (ZooKeeper >= 3.6
``addWatch``) on the chroot root. kazoo (2.11) has no public API for it, so this module sends the
``addWatch`` request itself (:mod:`braid.metadata.zk_protocol`) and reads the resulting events
through a hook on kazoo's event reader; the watch is re-added after every reconnection.
Recursive watches report created/changed/deleted nodes but never "children changed", so the
store derives ``CHILDREN_CHANGED`` on the parent from each create and delete, keeping the same
order as the other backends. Changes made while the connection is down are not replayed:
listeners get ``SUSPENDED`` then ``RECONNECTED`` and must re-read what they care about.

``SESSION_LOST`` (kazoo's LOST) ends the store: ZooKeeper deleted every ephemeral node of the
session; later calls raise :class:`SessionLost` and the caller opens a new store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, ZnodeStat

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
    join,
    parent_of,
)
from braid.metadata.zk_protocol import (
    EVENT_CHANGED,
    EVENT_CREATED,
    EVENT_DELETED,
    AddWatch,
    install_event_hook,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


def _stat(zstat: ZnodeStat) -> Stat:
    return Stat(
        version=zstat.version,
        created_ms=zstat.ctime,
        modified_ms=zstat.mtime,
        ephemeral=zstat.ephemeralOwner != 0,
        owner=f"{zstat.ephemeralOwner:#x}" if zstat.ephemeralOwner else None,
    )


class ZkMetadataStore(MetadataStoreBase):
    """A :class:`~braid.metadata.api.MetadataStore` session on a ZooKeeper ensemble."""

    def __init__(
        self,
        hosts: str,
        chroot: str = ROOT,
        *,
        session_timeout: float = 10.0,
        operation_timeout: float = 10.0,
    ) -> None:
        self._hosts = hosts
        self._chroot = "" if chroot == ROOT else chroot
        self._session_timeout = session_timeout
        self._operation_timeout = operation_timeout
        self._client = KazooClient(
            hosts=hosts,
            timeout=session_timeout,
            # Reconnect forever, at most 2 s apart: the session may still be alive on the server,
            # and kazoo's default backoff grows to an hour between attempts.
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2.0},
        )
        self._dispatcher = ListenerDispatcher(f"zk-{hosts}{chroot}")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._lost = False
        self._suspended = False
        self._session_id = ""

    @classmethod
    async def open(
        cls,
        hosts: str,
        chroot: str = ROOT,
        *,
        session_timeout: float = 10.0,
        connect_timeout: float = 15.0,
        operation_timeout: float = 10.0,
    ) -> ZkMetadataStore:
        """Connect to ``hosts``, create ``chroot`` if missing and arm the global watch.

        Raises:
            StoreUnavailable: no server answered within ``connect_timeout``.
        """
        store = cls(
            hosts, chroot, session_timeout=session_timeout, operation_timeout=operation_timeout
        )
        loop = asyncio.get_running_loop()
        store._loop = loop
        store._dispatcher.bind(loop)
        install_event_hook(store._client, store._on_raw_event)
        try:
            await loop.run_in_executor(None, lambda: store._client.start(timeout=connect_timeout))
        except (KazooTimeoutError, KazooException, OSError) as exc:
            await loop.run_in_executor(None, store._client.close)
            raise StoreUnavailable(f"cannot reach ZooKeeper at {hosts}: {exc}") from exc
        store._session_id = f"{store._client.client_id[0]:#x}"
        store._client.add_listener(store._on_state)
        try:
            if store._chroot:
                await store._await(store._client.ensure_path_async(store._chroot))
            await store._arm_watch()
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes]:
        """ZooKeeper's (session id, password): lets a test harness expire this session."""
        return self._client.client_id  # type: ignore[no-any-return]

    # -- plumbing -------------------------------------------------------------------------------

    def _full(self, path: str) -> str:
        if path == ROOT:
            return self._chroot or ROOT
        return self._chroot + path

    def _relative(self, full: str) -> str | None:
        """The store path of a server path, or None when it lies outside the chroot."""
        if not self._chroot:
            return full
        if full == self._chroot:
            return ROOT
        if full.startswith(self._chroot + "/"):
            return full[len(self._chroot) :]
        return None

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed(f"metadata store {self._session_id} is closed")
        if self._lost:
            raise SessionLost(f"ZooKeeper session {self._session_id} expired")
        if self._suspended:
            raise StoreUnavailable(f"ZooKeeper connection of session {self._session_id} is down")

    async def _await(self, async_result: Any) -> Any:
        """Wait for a kazoo IAsyncResult on the loop, mapping kazoo errors to ours."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(result: Any) -> None:
            def settle() -> None:
                if future.done():
                    return
                try:
                    future.set_result(result.get_nowait())
                except BaseException as exc:  # delivered to the awaiting coroutine
                    future.set_exception(exc)

            with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
                loop.call_soon_threadsafe(settle)

        async_result.rawlink(done)
        try:
            # Not asyncio.wait_for: on 3.11 it returns the result instead of raising when the
            # caller is cancelled just as the answer lands, and the cancellation is lost.
            async with asyncio.timeout(self._operation_timeout):
                return await future
        except TimeoutError as exc:
            timeout = self._operation_timeout
            raise StoreUnavailable(f"ZooKeeper call timed out after {timeout}s") from exc
        except SessionExpiredError as exc:
            raise SessionLost(f"ZooKeeper session {self._session_id} expired") from exc
        except (ConnectionLoss, ConnectionClosedError, OperationTimeoutError) as exc:
            if self._closed:
                raise StoreClosed(f"metadata store {self._session_id} is closed") from exc
            raise StoreUnavailable(f"ZooKeeper connection lost: {exc!r}") from exc

    async def _arm_watch(self) -> None:
        await self._await(self._raw_call(AddWatch(self._full(ROOT), AddWatch.PERSISTENT_RECURSIVE)))

    def _raw_call(self, request: Any) -> Any:
        async_result = self._client.handler.async_result()
        self._client._call(request, async_result)
        return async_result

    # -- events from kazoo's threads ------------------------------------------------------------

    def _on_raw_event(self, event_type: int, server_path: str) -> None:
        path = self._relative(server_path)
        if path is None or self._closed:
            return
        if event_type == EVENT_CREATED:
            self._dispatcher.post(Notification(NotificationType.CREATED, path))
            if path != ROOT:
                self._dispatcher.post(
                    Notification(NotificationType.CHILDREN_CHANGED, parent_of(path))
                )
        elif event_type == EVENT_DELETED:
            self._dispatcher.post(Notification(NotificationType.DELETED, path))
            if path != ROOT:
                self._dispatcher.post(
                    Notification(NotificationType.CHILDREN_CHANGED, parent_of(path))
                )
        elif event_type == EVENT_CHANGED:
            self._dispatcher.post(Notification(NotificationType.MODIFIED, path))

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only record and hand over, never block.
        if self._closed:
            return
        if state == KazooState.SUSPENDED:
            self._suspended = True
            self._dispatcher.post(SessionEvent.SUSPENDED)
        elif state == KazooState.CONNECTED:
            if self._lost:
                return
            was_suspended = self._suspended
            self._suspended = False
            if was_suspended and self._loop is not None:
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._after_reconnect)
        elif state == KazooState.LOST and not self._lost:
            self._lost = True
            self._suspended = False
            self._dispatcher.post(SessionEvent.SESSION_LOST)
            if self._loop is not None:
                # kazoo would open a fresh session; this store's session is over for good.
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._stop_client_soon)

    def _after_reconnect(self) -> None:
        async def rearm() -> None:
            try:
                await self._arm_watch()
            except Exception:
                log.warning("re-arming the ZooKeeper watch failed", exc_info=True)
            self._dispatcher.post(SessionEvent.RECONNECTED)

        asyncio.get_running_loop().create_task(rearm())

    def _stop_client_soon(self) -> None:
        asyncio.get_running_loop().run_in_executor(None, self._client.stop)

    # -- operations -----------------------------------------------------------------------------

    async def _get(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            data, zstat = await self._await(self._client.get_async(self._full(path)))
        except NoNodeError:
            return None
        return bytes(data or b""), _stat(zstat)

    async def _exists(self, path: str) -> Stat | None:
        zstat = await self._await(self._client.exists_async(self._full(path)))
        return None if zstat is None else _stat(zstat)

    async def _children(self, path: str) -> list[str]:
        try:
            names = await self._await(self._client.get_children_async(self._full(path)))
        except NoNodeError:
            return []
        return sorted(names)

    async def _put(
        self, path: str, value: bytes, expected_version: int | None, ephemeral: bool
    ) -> Stat:
        full = self._full(path)
        if expected_version == -1:
            try:
                return await self._create(full, value, ephemeral)
            except NodeExistsError:
                raise BadVersion(f"{path} already exists") from None
        if expected_version is not None:
            try:
                zstat = await self._await(self._client.set_async(full, value, expected_version))
            except BadVersionError:
                raise BadVersion(f"{path} is not at version {expected_version}") from None
            except NoNodeError:
                raise BadVersion(f"{path} does not exist, expected {expected_version}") from None
            return _stat(zstat)
        while True:  # unconditional: overwrite, or create; retry if a racer got in between
            try:
                return _stat(await self._await(self._client.set_async(full, value, -1)))
            except NoNodeError:
                pass
            try:
                return await self._create(full, value, ephemeral)
            except NodeExistsError:
                continue

    async def _create(self, full: str, value: bytes, ephemeral: bool) -> Stat:
        try:
            _, zstat = await self._await(
                self._client.create_async(
                    full, value, ephemeral=ephemeral, makepath=True, include_data=True
                )
            )
        except NoChildrenForEphemeralsError:
            raise InvalidPath(
                f"a parent of {self._relative(full)} is ephemeral; ephemeral nodes cannot have"
                " children"
            ) from None
        return _stat(zstat)

    async def _delete(self, path: str, expected_version: int | None) -> None:
        full = self._full(path)
        if expected_version == -1:
            zstat = await self._await(self._client.exists_async(full))
            if zstat is None:
                raise NodeNotFound(path)
            raise BadVersion(f"{path} exists (version {zstat.version}), expected it absent")
        version = -1 if expected_version is None else expected_version
        try:
            await self._await(self._client.delete_async(full, version))
        except NoNodeError:
            raise NodeNotFound(path) from None
        except BadVersionError:
            raise BadVersion(f"{path} is not at version {expected_version}") from None
        except NotEmptyError:
            raise NodeNotEmpty(f"{path} has children") from None

    async def _delete_recursive(self, path: str) -> None:
        for name in await self.children(path):
            await self.delete_recursive(join(path, name))
        if path == ROOT:
            return
        try:
            await self._await(self._client.delete_async(self._full(path), -1))
        except NoNodeError:
            pass
        except NotEmptyError:
            # Someone added a child meanwhile; go round again.
            await self.delete_recursive(path)

    # -- lifecycle ------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            self._client.remove_listener(self._on_state)

        def shutdown() -> None:
            # stop() closes the session: the server deletes this session's ephemeral nodes.
            with contextlib.suppress(Exception):
                self._client.stop()
            with contextlib.suppress(Exception):
                self._client.close()

        await loop.run_in_executor(None, shutdown)
        await self._dispatcher.close(drain=False)
