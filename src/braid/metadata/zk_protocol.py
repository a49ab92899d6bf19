"""The ZooKeeper wire pieces kazoo (2.11) lacks: ``addWatch`` and a hook for its events.

ZooKeeper 3.6 added persistent (recursive) watches: one ``addWatch`` request (op code 106) makes
the server send an event for every create, data change and delete below a path, for as long as the
session lives. kazoo can send any request object with ``serialize()``, but drops events that no
one-shot watcher asked for, so :func:`install_event_hook` wraps its event reader to see them first.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from kazoo.protocol.serialization import Watch, write_string

#: ZooKeeper's watcher event types (org.apache.zookeeper.Watcher.Event.EventType).
EVENT_CREATED = 1
EVENT_DELETED = 2
EVENT_CHANGED = 3
EVENT_CHILD = 4

_INT = struct.Struct("!i")


@dataclass(frozen=True, slots=True)
class AddWatch:
    """The ``addWatch`` request: a path and a mode (0 persistent, 1 persistent recursive)."""

    path: str
    mode: int

    type: ClassVar[int] = 106
    PERSISTENT: ClassVar[int] = 0
    PERSISTENT_RECURSIVE: ClassVar[int] = 1

    def serialize(self) -> bytes:
        return bytes(write_string(self.path)) + _INT.pack(self.mode)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> None:
        """The reply has no body beyond the header."""
        return None


def install_event_hook(client: Any, on_event: Callable[[int, str], None]) -> None:
    """Call ``on_event(type, server_path)`` for every watch event ``client`` receives.

    Runs on kazoo's connection thread, before kazoo's own dispatch, which still happens.
    """
    connection = client._connection
    original = connection._read_watch_event

    def read_watch_event(buffer: bytes, offset: int) -> Any:
        event, _ = Watch.deserialize(buffer, offset)
        if event.path is not None:
            on_event(event.type, event.path)
        return original(buffer, offset)

    connection._read_watch_event = read_watch_event
