"""Outcomes of transactions on a sealed segment (ADR 0069), on a real in-memory metadata store:
written once, read back after a restart, never turned the other way."""

from __future__ import annotations

import pytest

from braid.broker.errors import InvalidTxnStatus
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.sealed import SEALED_OUTCOMES_ROOT, SealedOutcomes
from braid.metadata.memory import MemoryMetadataStore

TOPIC = "segment://public/default/orders/0000-7fff-0"


async def test_an_outcome_is_read_back_by_a_new_owner_of_the_topic() -> None:
    store = MemoryMetadataStore()
    committed, aborted, unknown = TxnId(0, 1), TxnId(0, 2), TxnId(1, 3)
    first = SealedOutcomes(store, TOPIC)
    await first.record(committed, aborted=False)
    await first.record(aborted, aborted=True)
    again = SealedOutcomes(store, TOPIC)  # the topic loaded again after a restart
    assert await again.outcomes([committed, aborted, unknown]) == {
        committed: False,
        aborted: True,
    }
    assert await SealedOutcomes(store, TOPIC + "x").outcomes([committed]) == {}


async def test_an_end_repeated_the_same_way_is_accepted_the_other_way_refused() -> None:
    outcomes = SealedOutcomes(MemoryMetadataStore(), TOPIC)
    txn = TxnId(0, 9)
    await outcomes.record(txn, aborted=False)
    await outcomes.record(txn, aborted=False)  # the coordinator retried its end
    with pytest.raises(InvalidTxnStatus):
        await outcomes.record(txn, aborted=True)
    assert await outcomes.outcomes([txn]) == {txn: False}


async def test_forgetting_the_topic_removes_its_outcomes() -> None:
    store = MemoryMetadataStore()
    outcomes = SealedOutcomes(store, TOPIC)
    await outcomes.record(TxnId(0, 1), aborted=True)
    await outcomes.forget()
    assert await outcomes.outcomes([TxnId(0, 1)]) == {}
    assert await store.children(SEALED_OUTCOMES_ROOT) == []
