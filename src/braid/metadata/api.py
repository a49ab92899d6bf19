"""The metadata store contract every backend implements (memory, sqlite, zookeeper).

All shared state in Braid lives behind this protocol: segment layouts, consumer sessions, controller
leader locks, load records, the storage-cluster registry, ledger lists and cursors. Its semantics
follow ZooKeeper's (and Pulsar's ``MetadataStore``):

* paths are absolute, ``/``-separated, with no empty segment and no trailing slash (``/`` itself is
  the root);
* ``put`` creates missing parent nodes (as empty, persistent nodes) the way Pulsar's store does;
* every node has a :class:`Stat` whose ``version`` starts at 0 on creation and grows by one on every
  write; ``expected_version`` gives compare-and-swap: ``None`` = unconditional, ``-1`` = the node
  must not exist, ``n >= 0`` = the node must be at version ``n``; a mismatch raises
  :class:`BadVersion`;
* ephemeral nodes belong to the store instance's session and disappear when it closes or expires;
* listeners receive a :class:`Notification` for every change to any path (``CREATED``, ``MODIFIED``,
  ``DELETED`` on the node, ``CHILDREN_CHANGED`` on its parent), in the order the changes happened;
  a listener that raises is logged and does not break the store or other listeners;
* session listeners learn when the store's session is suspended, reconnected or lost. After
  ``SESSION_LOST`` every ephemeral node this store created is gone and any leadership is void.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from braid.core.errors import (
    AlreadyClosedError,
    BraidError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
)

#: Largest value a node may hold. ZooKeeper's default jute.maxbuffer is 1 MiB including overhead;
#: Braid keeps a margin so the same documents fit every backend.
MAX_VALUE_SIZE = 1024 * 1000


@dataclass(frozen=True, slots=True)
class Stat:
    """What the store knows about a node besides its value."""

    version: int
    created_ms: int
    modified_ms: int
    ephemeral: bool
    #: Session id (:attr:`MetadataStore.session_id`) owning an ephemeral node; ``None`` otherwise.
    #: Lets a recipe tell its own ephemeral node from an equal one another session created.
    owner: str | None = None


class NotificationType(enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True)
class Notification:
    type: NotificationType
    path: str


class SessionEvent(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost; session may still be alive on the server
    RECONNECTED = "reconnected"  # connection back, same session, ephemeral nodes intact
    SESSION_LOST = "session_lost"  # session expired/closed: ephemeral nodes and leadership gone


Listener = Callable[[Notification], Awaitable[None] | None]
SessionListener = Callable[[SessionEvent], Awaitable[None] | None]


class MetadataError(BraidError):
    """Root of metadata-store errors."""


class BadVersion(MetadataError, ConflictError):
    """A compare-and-swap failed: the node's version was not the expected one (or it exists/does
    not exist contrary to ``expected_version``)."""


class NodeNotFound(MetadataError, NotFoundError):
    """The path does not exist."""


class NodeNotEmpty(MetadataError):
    """Deleting a node that still has children (use ``delete_recursive``)."""


class InvalidPath(MetadataError, InvalidInputError):
    """The path is not absolute, has an empty segment, a trailing slash or bad characters."""


class ValueTooLarge(MetadataError, InvalidInputError):
    """The value exceeds :data:`MAX_VALUE_SIZE`."""


class InvalidStoreUrl(MetadataError, InvalidInputError):
    """The metadata-store URL has an unknown scheme or is malformed."""


class StoreUnavailable(MetadataError, ServiceUnavailableError):
    """The backend cannot be reached right now (connection suspended, server down)."""


class SessionLost(MetadataError):
    """The store's session expired: ephemeral nodes are gone. Create a new store."""


class StoreClosed(MetadataError, AlreadyClosedError):
    """The store was closed."""


@runtime_checkable
class MetadataStore(Protocol):
    """An asyncio key-value tree with versions, ephemeral nodes and change notifications."""

    async def get(self, path: str) -> tuple[bytes, Stat] | None:
        """Return the value and stat of ``path``, or ``None`` if it does not exist."""
        ...

    async def exists(self, path: str) -> Stat | None:
        """Return the stat of ``path``, or ``None``."""
        ...

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        """Create or overwrite ``path``; returns the new stat. Raises :class:`BadVersion`."""
        ...

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete ``path``.

        Raises :class:`NodeNotFound`, :class:`BadVersion`, :class:`NodeNotEmpty`.
        """
        ...

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it; a missing path is not an error."""
        ...

    async def children(self, path: str) -> list[str]:
        """Names (not paths) of the children of ``path``, sorted; ``[]`` if none or absent."""
        ...

    def register_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every notification; returns a function that unregisters it."""
        ...

    def register_session_listener(self, listener: SessionListener) -> Callable[[], None]:
        """Call ``listener`` on session state changes; returns a function that unregisters it."""
        ...

    @property
    def session_id(self) -> str:
        """Identity of this store's session (owner of its ephemeral nodes)."""
        ...

    async def close(self) -> None:
        """Close the session (its ephemeral nodes are deleted) and release resources. Idempotent."""
        ...
