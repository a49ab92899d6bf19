"""Transaction outcomes on a sealed topic: the marker a terminated ledger cannot take (ADR 0069).

A scalable topic's segment is sealed (its managed ledger terminated) by a split or merge, which
does not wait for the transactions that wrote to it: a transaction open across a split goes on
writing to the successor segment, as one more partition. When such a transaction ends, its
COMMIT/ABORT marker cannot be appended to the sealed segment's ledger any more, so the outcome is
recorded here instead - one metadata-store node per (topic, transaction),
``/transactions/sealed-outcomes/<topic>/<most>-<least>`` holding ``commit`` or ``abort``, created
with a create-only CAS - before END_TXN_ON_PARTITION is answered. It stands for the marker:

* the topic's transaction buffer applies it at once (its messages become readable, or are
  skipped as aborted, and the max read position moves past them), and
* a buffer rebuilt after a restart, finding a transaction without a marker in a terminated
  ledger, reads its outcome back from here; a transaction with no outcome yet stays open, so a
  sealed segment holding an open transaction's messages is not drained (its subscriptions'
  backlogs stay above zero), and a Stream subscription's children are not handed out before the
  parent's transactional messages are resolved.

Invariants: an outcome is written once and never changes (a second end the same way is answered
again; the other way is ``InvalidTxnStatus``); it is durable before the end is acknowledged; the
nodes of a topic are removed with the topic (:meth:`SealedOutcomes.forget`).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from braid.broker.errors import InvalidTxnStatus
from braid.broker.transactions.ids import TxnId
from braid.metadata.api import BadVersion, MetadataStore

#: Where the outcomes are kept: ``<root>/<topic>/<most>-<least>``.
SEALED_OUTCOMES_ROOT = "/transactions/sealed-outcomes"
_COMMIT, _ABORT = b"commit", b"abort"


class SealedOutcomes:
    """The recorded outcomes of the transactions that ended on one sealed topic."""

    def __init__(self, store: MetadataStore, topic: str) -> None:
        self._store = store
        self.topic = topic
        self._path = f"{SEALED_OUTCOMES_ROOT}/{quote(topic, safe='')}"

    async def record(self, txn: TxnId, aborted: bool) -> None:
        """Record, durably and once, that ``txn`` ended here (``aborted`` or committed).

        Raises:
            InvalidTxnStatus: it was recorded the other way already.
        """
        value = _ABORT if aborted else _COMMIT
        path = f"{self._path}/{txn.key}"
        try:
            await self._store.put(path, value, expected_version=-1)
            return
        except BadVersion:
            pass
        found = await self._store.get(path)
        if found is not None and found[0] != value:
            raise InvalidTxnStatus(f"transaction {txn} already ended on {self.topic} the other way")

    async def outcomes(self, txns: Iterable[TxnId]) -> dict[TxnId, bool]:
        """The recorded outcome (``True``: aborted) of each of ``txns`` that has one."""
        found: dict[TxnId, bool] = {}
        for txn in txns:
            got = await self._store.get(f"{self._path}/{txn.key}")
            if got is not None:
                found[txn] = got[0] == _ABORT
        return found

    async def forget(self) -> None:
        """The topic was deleted: drop its outcomes."""
        await self._store.delete_recursive(self._path)


__all__ = ["SEALED_OUTCOMES_ROOT", "SealedOutcomes"]
