"""Reads that outlive a metadata-store outage: the last answer each path was read with.

:class:`LastKnownReads` wraps a :class:`~braid.metadata.api.MetadataStore` for readers that may
serve slightly old data while the store is unreachable - the broker's tenants, namespaces and
their policies, which every new producer, consumer and admin read needs. A read goes to the store
as always and its answer is remembered; when the store raises
:class:`~braid.metadata.api.StoreUnavailable` (ZooKeeper down or cut off), the remembered answer
is returned instead and the read is marked stale in the current :class:`StaleReadTracker` (an
admin request opens one with :func:`track_stale_reads` and says so in a ``Braid-Metadata-Stale``
header). A path never read before still raises.

Writes, deletes, listeners and the session pass through untouched: a read-modify-write that read
a stale value fails at its write with ``StoreUnavailable`` like any write during the outage, so
nothing is *decided* on old data. At most ``capacity`` paths are remembered (the least recently
read go first), so the memory is bounded whatever the namespace count.
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from braid.metadata.api import MetadataStore, Stat, StoreUnavailable
from braid.metadata.wrapper import StoreWrapper

T = TypeVar("T")


class StaleReadTracker:
    """Whether any read of one request was answered from memory (shared by the tasks the
    request starts: they inherit the context, hence the same tracker)."""

    def __init__(self) -> None:
        self.stale = False


_TRACKER: contextvars.ContextVar[StaleReadTracker | None] = contextvars.ContextVar(
    "braid_stale_read_tracker", default=None
)

#: Paths remembered by default (each a few hundred bytes: tenants, namespaces, policies).
DEFAULT_CAPACITY = 10_000


def track_stale_reads() -> StaleReadTracker:
    """Start tracking the reads of the current context (one request); returns the tracker."""
    tracker = StaleReadTracker()
    _TRACKER.set(tracker)
    return tracker


class LastKnownReads(StoreWrapper):
    """A :class:`MetadataStore` whose reads fall back to their last answer during an outage."""

    def __init__(self, store: MetadataStore, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        super().__init__(store)
        self._capacity = capacity
        self._known: OrderedDict[tuple[str, str], object] = OrderedDict()
        #: Reads answered from memory so far (stats, tests).
        self.stale_answers = 0

    async def _read(self, kind: str, path: str, read: Callable[[], Awaitable[T]]) -> T:
        key = (kind, path)
        try:
            answer = await read()
        except StoreUnavailable:
            if key not in self._known:
                raise
            self._known.move_to_end(key)
            self.stale_answers += 1
            if (tracker := _TRACKER.get()) is not None:
                tracker.stale = True
            return cast(T, self._known[key])
        self._known[key] = answer
        self._known.move_to_end(key)
        while len(self._known) > self._capacity:
            self._known.popitem(last=False)
        return answer

    async def get(self, path: str) -> tuple[bytes, Stat] | None:
        return await self._read("get", path, lambda: self._inner.get(path))

    async def exists(self, path: str) -> Stat | None:
        return await self._read("exists", path, lambda: self._inner.exists(path))

    async def children(self, path: str) -> list[str]:
        return list(await self._read("children", path, lambda: self._inner.children(path)))

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        return await self._inner.put(path, value, expected_version, ephemeral=ephemeral)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        await self._inner.delete(path, expected_version)

    async def delete_recursive(self, path: str) -> None:
        await self._inner.delete_recursive(path)


__all__ = ["DEFAULT_CAPACITY", "LastKnownReads", "StaleReadTracker", "track_stale_reads"]
