"""The client's transaction state machine (sans-I/O, time passed in) and the wire forms a
transaction adds: the transaction id in an entry's metadata and Pulsar's ``ack_set``.

References are independent: protobuf's own serialization of ``MessageMetadata``, and Java's
``BitSet.toLongArray()`` rule (bit ``i`` is bit ``i % 64`` of word ``i // 64``, words signed).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import braid
from braid.client.batch_encoder import entry_metadata, producer_name_field
from braid.client.errors import (
    NotConnectedError,
    TransactionConflictError,
    TransactionEndedError,
    TransactionErroredError,
    TransactionTimedOutError,
)
from braid.client.transaction import TransactionLifecycle, TransactionState, check_timeout
from braid.client.transaction_acks import ack_set, transactional_ack_id
from braid.protocol import pb

u64 = st.integers(0, 2**64 - 1)


def opened(timeout: float = 10.0) -> TransactionLifecycle:
    return TransactionLifecycle("(0,7)", opened_at=100.0, timeout=timeout)


def test_an_open_transaction_commits_once_its_operations_are_answered() -> None:
    txn = opened()
    txn.op_started()
    txn.op_started()
    txn.begin_commit(101.0)
    assert txn.state(101.0) is TransactionState.COMMITTING
    txn.op_finished(None)
    txn.op_finished(None)
    assert txn.in_flight == 0
    txn.committable(102.0)
    txn.ended(True)
    assert txn.state(500.0) is TransactionState.COMMITTED  # terminal: the deadline no longer


def test_an_open_transaction_turns_timed_out_at_its_deadline() -> None:
    txn = opened(timeout=5.0)
    assert txn.state(104.999) is TransactionState.OPEN
    assert txn.state(105.0) is TransactionState.TIMED_OUT
    with pytest.raises(TransactionTimedOutError):
        txn.check_open(105.0, "send in")
    with pytest.raises(TransactionTimedOutError):
        txn.begin_commit(105.0)
    with pytest.raises(TransactionTimedOutError):
        txn.begin_abort(105.0)


def test_a_failed_operation_puts_it_in_error_only_abort_is_allowed() -> None:
    txn = opened()
    txn.op_started()
    cause = TransactionConflictError("held by another transaction")
    txn.op_finished(cause)
    assert txn.state(101.0) is TransactionState.ERROR
    with pytest.raises(TransactionErroredError) as refused:
        txn.begin_commit(101.0)
    assert refused.value.__cause__ is cause
    with pytest.raises(TransactionErroredError):
        txn.check_open(101.0, "acknowledge in")
    txn.begin_abort(101.0)
    assert txn.state(101.0) is TransactionState.ABORTING
    txn.ended(False)
    assert txn.state(101.0) is TransactionState.ABORTED


def test_a_failure_while_committing_refuses_the_commit_after_the_wait() -> None:
    txn = opened()
    txn.op_started()
    txn.begin_commit(101.0)
    txn.op_finished(NotConnectedError("gone"))
    with pytest.raises(TransactionErroredError):
        txn.committable(101.0)
    assert txn.state(101.0) is TransactionState.ERROR
    txn.begin_abort(101.0)  # still abortable


def test_a_commit_whose_operations_outlast_the_deadline_is_refused_as_timed_out() -> None:
    txn = opened(timeout=5.0)
    txn.begin_commit(101.0)
    with pytest.raises(TransactionTimedOutError):
        txn.committable(106.0)


@pytest.mark.parametrize("committed", [True, False])
def test_an_ended_transaction_refuses_everything_with_ended(committed: bool) -> None:
    txn = opened()
    txn.begin_commit(101.0) if committed else txn.begin_abort(101.0)
    for begin in (txn.begin_commit, txn.begin_abort):
        with pytest.raises(TransactionEndedError):
            begin(101.0)  # while ending
    txn.ended(committed)
    for begin in (txn.begin_commit, txn.begin_abort):
        with pytest.raises(TransactionEndedError):
            begin(101.0)
    with pytest.raises(TransactionEndedError):
        txn.check_open(101.0, "send in")


def test_an_end_refused_by_the_coordinator_past_the_deadline_is_the_timeout() -> None:
    txn = opened(timeout=5.0)
    txn.begin_commit(104.0)
    error = txn.end_failed(TransactionConflictError("TransactionNotFound"), 106.0)
    assert isinstance(error, TransactionTimedOutError)
    assert txn.state(106.0) is TransactionState.TIMED_OUT


def test_an_end_that_failed_otherwise_leaves_it_in_error() -> None:
    txn = opened()
    txn.begin_commit(101.0)
    cause = NotConnectedError("lost")
    assert txn.end_failed(cause, 101.0) is cause
    assert txn.state(101.0) is TransactionState.ERROR
    txn.begin_abort(101.0)


def test_the_state_errors_are_transaction_conflicts_of_the_public_api() -> None:
    for error in (TransactionEndedError, TransactionTimedOutError, TransactionErroredError):
        assert issubclass(error, braid.TransactionStateError)
        assert issubclass(error, braid.TransactionConflictError)
        assert getattr(braid, error.__name__) is error


@pytest.mark.parametrize("bad", [0, -1, True, "5", float("inf") * 0])
def test_a_timeout_must_be_positive_seconds(bad: object) -> None:
    with pytest.raises(braid.InvalidConfigurationError):
        check_timeout(bad)


@given(u64, u64, st.integers(0, 2**63 - 1))
def test_entry_metadata_with_a_transaction_matches_protobuf(
    most: int, least: int, seq: int
) -> None:
    name = "p-1"
    ours = entry_metadata(producer_name_field(name), seq, 1_700_000_000_000, txn=(most, least))
    (size,) = struct.unpack(">I", ours[:4])
    parsed = pb.MessageMetadata.FromString(ours[4 : 4 + size])
    assert (parsed.txnid_most_bits, parsed.txnid_least_bits) == (most, least)
    reference = pb.MessageMetadata(
        producer_name=name,
        sequence_id=seq,
        publish_time=1_700_000_000_000,
        txnid_least_bits=least,
        txnid_most_bits=most,
    )
    assert ours[4:] == reference.SerializeToString()


def java_long_array(bits: set[int], size: int) -> list[int]:
    words = []
    for start in range(0, size, 64):
        word = sum(1 << (i - start) for i in bits if start <= i < start + 64)
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
    return words


@given(st.integers(2, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_an_individual_ack_in_a_batch_leaves_the_other_bits_set(case: tuple[int, int]) -> None:
    size, index = case
    mid = transactional_ack_id(3, 4, index, size, cumulative=False)
    assert list(mid.ack_set) == java_long_array(set(range(size)) - {index}, size)
    assert mid.batch_size == size


@given(st.integers(2, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_a_cumulative_ack_in_a_batch_leaves_the_later_bits_set(case: tuple[int, int]) -> None:
    size, index = case
    mid = transactional_ack_id(3, 4, index, size, cumulative=True)
    later = set(range(index + 1, size))
    assert list(mid.ack_set) == (java_long_array(later, size) if later else [])


def test_a_whole_entry_ack_carries_no_ack_set() -> None:
    for batch_index, batch_size in ((-1, 1), (0, 1), (-1, 0)):
        assert (
            list(transactional_ack_id(1, 2, batch_index, batch_size, cumulative=False).ack_set)
            == []
        )
    assert ack_set([63], 64) == [-(1 << 63)]
