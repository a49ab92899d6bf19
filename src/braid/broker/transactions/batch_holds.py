"""Which messages of batch entries transactions' pending acknowledgements hold (ADR 0071).

A batch-index acknowledgement inside a transaction (``MessageIdData.ack_set`` in an ACK with a
transaction id) holds single messages of a batch entry, not the entry: the entry's other messages
are still delivered, acknowledged, or held by other transactions. Pulsar's rules, per index:

* an index held by another transaction, or already acknowledged on the subscription, is a
  conflict (the whole acknowledgement is refused with ``TransactionConflict``);
* a commit acknowledges the held indexes on the cursor (PIP-54's batch-index ack); an abort
  releases them, to be delivered again.

:class:`BatchIndexHolds` is the bookkeeping: pure, no I/O. Sets are kept as the *acknowledged*
indexes (bits set = held), while the wire and the cursor speak PIP-54's *remaining* form (bits set
= not acknowledged); :func:`acked_indexes` and :func:`remaining_words` convert for a batch of
``count`` messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from braid.broker.transactions.ids import TxnId
from braid.core import ack_set
from braid.ledger.api import Position


def acked_indexes(remaining: Sequence[int], count: int) -> frozenset[int]:
    """The messages of a batch of ``count`` that a PIP-54 ``remaining`` set says are acked."""
    return frozenset(i for i in range(count) if not ack_set.is_set(remaining, i))


def remaining_words(acked: Iterable[int], count: int) -> ack_set.AckSet:
    """The PIP-54 words acknowledging exactly ``acked`` of a batch of ``count``."""
    done = set(acked)
    return ack_set.of_indexes(i for i in range(count) if i not in done)


class BatchIndexHolds:
    """Per batch entry, the indexes each transaction holds, and the entry's batch size."""

    def __init__(self) -> None:
        self._holds: dict[Position, dict[TxnId, frozenset[int]]] = {}
        self._counts: dict[Position, int] = {}

    def __contains__(self, position: object) -> bool:
        return position in self._holds

    def conflict(
        self,
        txn: TxnId,
        position: Position,
        acked: frozenset[int],
        cursor_remaining: Sequence[int] | None,
    ) -> str | None:
        """Why ``txn`` may not hold ``acked`` of ``position`` (``cursor_remaining``: the
        cursor's PIP-54 words for it, ``None`` when it acknowledged none of it), if it may not."""
        if cursor_remaining is not None:
            done = sorted(i for i in acked if not ack_set.is_set(cursor_remaining, i))
            if done:
                return f"messages {done} of batch {position} are acknowledged already"
        for other, held in self._holds.get(position, {}).items():
            overlap = sorted(acked & held)
            if other != txn and overlap:
                return (
                    f"messages {overlap} of batch {position} are acknowledged by transaction "
                    f"{other} already"
                )
        return None

    def positions(self) -> list[Position]:
        """The batch entries some of whose messages a transaction holds."""
        return list(self._holds)

    def held_by_others(self, txn: TxnId, position: Position) -> TxnId | None:
        """Another transaction holding any index of ``position``, if one does."""
        for other in self._holds.get(position, {}):
            if other != txn:
                return other
        return None

    def of(self, txn: TxnId) -> dict[Position, tuple[int, frozenset[int]]]:
        """What ``txn`` holds: ``position -> (batch size, indexes)``."""
        return {
            position: (self._counts[position], held[txn])
            for position, held in self._holds.items()
            if txn in held
        }

    def add(self, txn: TxnId, position: Position, count: int, acked: frozenset[int]) -> None:
        """``txn`` holds ``acked`` of ``position`` (a batch of ``count``) too."""
        held = self._holds.setdefault(position, {})
        held[txn] = held.get(txn, frozenset()) | acked
        self._counts[position] = count

    def release(self, txn: TxnId) -> dict[Position, tuple[int, frozenset[int]]]:
        """Forget what ``txn`` holds; returns it (``position -> (batch size, indexes)``)."""
        released = self.of(txn)
        for position in released:
            held = self._holds[position]
            del held[txn]
            if not held:
                del self._holds[position]
                del self._counts[position]
        return released

    def mask(self, position: Position, count: int) -> ack_set.AckSet | None:
        """PIP-54 words of the messages of ``position`` no transaction holds (``None``: none
        holds any)."""
        held = self._holds.get(position)
        if not held:
            return None
        taken = frozenset().union(*held.values())
        return remaining_words(taken, count)

    def covers(self, position: Position, cursor_remaining: Sequence[int] | None) -> bool:
        """Whether every message of ``position`` is held or already acknowledged."""
        held = self._holds.get(position)
        if not held:
            return False
        count = self._counts[position]
        taken = frozenset().union(*held.values())
        return all(
            i in taken or (cursor_remaining is not None and not ack_set.is_set(cursor_remaining, i))
            for i in range(count)
        )


__all__ = ["BatchIndexHolds", "acked_indexes", "remaining_words"]
