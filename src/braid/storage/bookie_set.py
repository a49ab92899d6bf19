"""The bookies of one storage cluster, as the ledger client sees them.

A :class:`BookieSet` is the ledger client's (:class:`~braid.storage.client.BookKeeperClient`) only
view of which bookies exist: which are *writable* (candidates for a new ensemble or an ensemble
change), which are *read-only* (their disks are full: readable, never chosen for writes), where
each one sits (a rack or region, for placement), and how to reach one
(:class:`~braid.storage.bookie_client.BookieClient`). A bookie that is in neither list is gone
(crashed, cut off, decommissioned); the ledgers it held are read from the other replicas, and
auto-recovery copies its fragments elsewhere.

Two implementations, behind the same protocol:

* :class:`StaticBookieSet` - a fixed set of in-process bookies (``braid standalone``): membership
  never changes, a bookie is read-only while its disk is full;
* a registration-watching set for bookie processes reached over the network: membership follows
  the bookies' ephemeral registrations in the metadata store (BookKeeper's
  ``/ledgers/available`` and ``/ledgers/available/readonly``).

Invariants: every id returned by :meth:`BookieSet.writable` or :meth:`BookieSet.readonly` can be
passed to :meth:`BookieSet.client`; the two lists are disjoint and sorted; listeners are called on
the event loop after the lists changed, never during a call of this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from braid.storage.api import BookieUnavailable
from braid.storage.bookie_client import BookieClient

#: Called (no arguments) on the event loop after the set's membership or states changed.
MembershipListener = Callable[[], None]


class BookieSet(Protocol):
    """Which bookies of a storage cluster exist, their state and placement, and their clients."""

    def writable(self) -> Sequence[str]:
        """Ids of the bookies that take new entries now, sorted."""
        ...

    def readonly(self) -> Sequence[str]:
        """Ids of the bookies that are up but refuse new entries (full disk), sorted."""
        ...

    def client(self, bookie_id: str) -> BookieClient:
        """The client of a bookie, by id; connects lazily for network bookies.

        A bookie that left the set may still be asked for (its ledgers name it): the set returns
        a client whose calls fail with :class:`~braid.storage.api.BookieUnavailable`, or raises
        that error at once when it cannot even name an address for it.
        """
        ...

    def rack_of(self, bookie_id: str) -> str | None:
        """The bookie's network location (``/region/rack``) for placement, or ``None``."""
        ...

    def add_listener(self, listener: MembershipListener) -> None:
        """Call ``listener`` after every change of membership or state."""
        ...

    async def close(self) -> None:
        """Close every client this set opened. Idempotent."""
        ...


class StaticBookieSet:
    """A fixed set of bookie clients (the in-process bookies of ``braid standalone``).

    A bookie counts as read-only while its client reports a ``read_only_reason`` (its disk is
    full); membership never changes, so listeners are never called.
    """

    def __init__(self, clients: Iterable[BookieClient], *, owns_clients: bool = True) -> None:
        self._clients = {c.bookie_id: c for c in clients}
        self._order = sorted(self._clients)
        self._owns = owns_clients
        self._closed = False

    def writable(self) -> Sequence[str]:
        return [b for b in self._order if self._clients[b].read_only_reason is None]

    def readonly(self) -> Sequence[str]:
        return [b for b in self._order if self._clients[b].read_only_reason is not None]

    def client(self, bookie_id: str) -> BookieClient:
        try:
            return self._clients[bookie_id]
        except KeyError:
            raise BookieUnavailable(f"bookie {bookie_id} is not part of this cluster") from None

    def rack_of(self, bookie_id: str) -> str | None:
        return None

    def add_listener(self, listener: MembershipListener) -> None:
        del listener  # membership never changes

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns:
            for client in self._clients.values():
                await client.close()
