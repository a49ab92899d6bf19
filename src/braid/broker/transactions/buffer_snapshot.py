"""A transaction buffer's snapshot (Pulsar's ``transactionBufferSnapshot*``; ADR 0071).

The snapshot records what a replay of a topic's ledger would rebuild up to a point, so a topic
load replays only the tail:

* ``aborted`` - every aborted transaction of the topic with the position of its abort marker;
* ``max_read_position`` - the buffer's max read position when it was taken: every entry of a
  transaction still open then lies after it, so a replay from the entry after it finds them (and
  the markers of any transaction that ended after it);
* ``position`` - the last confirmed entry when it was taken (every abort marker up to it is in
  ``aborted``);
* ``timestamp_ms`` - when it was taken (Pulsar's ``lastSnapshotTimestamps``).

It is one metadata-store node per topic, ``/transactions/buffer-snapshots/<topic>``, JSON, every
write a CAS on the version the owner last wrote or read (a deposed owner's write fails). An aborted
transaction whose marker lies in a ledger that retention has trimmed is left out of the next
snapshot (:meth:`BufferSnapshot.pruned`): its entries, before its marker, are gone too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from braid.broker.transactions.ids import TxnId
from braid.ledger.api import Position
from braid.metadata.api import MetadataStore, NodeNotFound

log = logging.getLogger(__name__)

#: Where transaction buffer snapshots are kept: ``<root>/<url-quoted topic>``.
BUFFER_SNAPSHOTS_ROOT = "/transactions/buffer-snapshots"


class CorruptSnapshot(ValueError):
    """A snapshot node that does not decode (the buffer then replays the whole ledger)."""


@dataclass(frozen=True)
class BufferSnapshot:
    """One topic's transaction buffer state up to ``position`` (see the module docstring)."""

    aborted: Mapping[TxnId, Position]
    max_read_position: Position
    position: Position
    timestamp_ms: int
    #: The node's version (-1 before it is stored).
    version: int = field(default=-1, compare=False)

    def __post_init__(self) -> None:
        if self.max_read_position > self.position:
            raise ValueError(
                f"snapshot max read position {self.max_read_position} is past its position "
                f"{self.position}"
            )

    def pruned(self, retained_ledgers: Iterable[int]) -> dict[TxnId, Position]:
        """The aborted transactions whose marker is still in a retained ledger (or after the
        first one: a ledger id above every listed one is being written)."""
        ledgers = sorted(retained_ledgers)
        if not ledgers:
            return dict(self.aborted)
        first = ledgers[0]
        return {txn: at for txn, at in self.aborted.items() if at.ledger_id >= first}

    def encode(self) -> bytes:
        return json.dumps(
            {
                "aborted": [
                    [t.most_bits, t.least_bits, p.ledger_id, p.entry_id]
                    for t, p in sorted(self.aborted.items())
                ],
                "maxReadPosition": [
                    self.max_read_position.ledger_id,
                    self.max_read_position.entry_id,
                ],
                "position": [self.position.ledger_id, self.position.entry_id],
                "timestamp": self.timestamp_ms,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes, version: int) -> BufferSnapshot:
        try:
            raw = json.loads(data)
            aborted = {
                TxnId(int(most), int(least)): Position(int(ledger), int(entry))
                for most, least, ledger, entry in raw["aborted"]
            }
            limit = Position(int(raw["maxReadPosition"][0]), int(raw["maxReadPosition"][1]))
            position = Position(int(raw["position"][0]), int(raw["position"][1]))
            return cls(aborted, limit, position, int(raw["timestamp"]), version)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptSnapshot(f"undecodable transaction buffer snapshot: {exc}") from exc


def snapshot_path(topic: str) -> str:
    return f"{BUFFER_SNAPSHOTS_ROOT}/{quote(topic, safe='')}"


class BufferSnapshots:
    """Reads and CAS-writes one topic's snapshot node."""

    def __init__(self, store: MetadataStore, topic: str) -> None:
        self._store = store
        self._path = snapshot_path(topic)
        self._version = -1

    async def load(self) -> BufferSnapshot | None:
        """The stored snapshot (``None``: none, or one that does not decode - logged)."""
        found = await self._store.get(self._path)
        if found is None:
            self._version = -1
            return None
        self._version = found[1].version
        try:
            return BufferSnapshot.decode(found[0], found[1].version)
        except CorruptSnapshot as exc:
            log.warning("%s: %s; replaying the whole ledger", self._path, exc)
            return None

    async def save(self, snapshot: BufferSnapshot) -> BufferSnapshot:
        """Store ``snapshot`` over the version last seen; the stored snapshot with its version.

        Raises:
            BadVersion: another owner wrote it meanwhile (this one is deposed).
        """
        stat = await self._store.put(self._path, snapshot.encode(), self._version)
        self._version = stat.version
        return BufferSnapshot(
            snapshot.aborted,
            snapshot.max_read_position,
            snapshot.position,
            snapshot.timestamp_ms,
            stat.version,
        )

    async def delete(self) -> None:
        try:
            await self._store.delete(self._path)
        except NodeNotFound:
            pass
        self._version = -1


__all__ = [
    "BUFFER_SNAPSHOTS_ROOT",
    "BufferSnapshot",
    "BufferSnapshots",
    "CorruptSnapshot",
    "snapshot_path",
]
