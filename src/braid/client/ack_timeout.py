"""The ack timeout of a Queue consumer (the official clients' ``ackTimeout`` /
``unacked_messages_timeout_ms``): a message the application was given and has neither
acknowledged nor negatively acknowledged within ``timeout`` seconds is redelivered (its
``redelivery_count`` grows, and with a ``DeadLetterPolicy`` it may be dead-lettered instead).

:class:`UnackedTracker` keeps each delivered message with its deadline, keyed by its position
(ledger ids are unique in a storage cluster, so the key is unique across segments and topics); a
timer on the client's loop ticks every ``min(timeout, 1 s) / 2`` and hands the expired ones to the
consumer. Any thread may record and forget (the blocking facade delivers on the caller's thread):
a lock guards the table. Deadlines use the monotonic clock of the loop.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterable

from braid.client.errors import InvalidConfigurationError
from braid.client.message import Message

#: A message's key in the tracker: (ledger id, entry id, batch index).
Key = tuple[int, int, int]


def check_ack_timeout(timeout: object) -> float:
    """``timeout`` seconds (0 = off). Raises :class:`InvalidConfigurationError`."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise InvalidConfigurationError(f"ack_timeout must be seconds >= 0: {timeout!r}")
    return float(timeout)


class UnackedTracker:
    """Delivered, not yet (negatively) acknowledged messages and their deadlines."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        timeout: float,
        on_expired: Callable[[list[Message]], None],
    ) -> None:
        self._loop = loop
        self._timeout = timeout
        self._tick = min(timeout, 1.0) / 2
        self._on_expired = on_expired
        self._lock = threading.Lock()
        self._pending: dict[Key, tuple[float, Message]] = {}
        self._order: collections.deque[tuple[float, Key]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        """Start ticking (on the loop)."""
        if self._timer is None and not self._closed:
            self._timer = self._loop.call_later(self._tick, self._on_tick)

    def add(self, keyed: Iterable[tuple[Key, Message]]) -> None:
        """Record messages just given to the application (any thread)."""
        deadline = self._loop.time() + self._timeout
        with self._lock:
            for key, message in keyed:
                self._pending[key] = (deadline, message)
                self._order.append((deadline, key))

    def forget(self, key: Key) -> Message | None:
        """The message was acknowledged or negatively acknowledged (any thread)."""
        with self._lock:
            got = self._pending.pop(key, None)
        return None if got is None else got[1]

    def __len__(self) -> int:
        return len(self._pending)

    def _on_tick(self) -> None:
        self._timer = None
        if self._closed:
            return
        now = self._loop.time()
        expired: list[Message] = []
        with self._lock:
            order, pending = self._order, self._pending
            while order and order[0][0] <= now:
                deadline, key = order.popleft()
                got = pending.get(key)
                if got is not None and got[0] == deadline:
                    del pending[key]
                    expired.append(got[1])
        if expired:
            self._on_expired(expired)
        self.start()

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with self._lock:
            self._pending.clear()
            self._order.clear()


__all__ = ["UnackedTracker", "check_ack_timeout"]
