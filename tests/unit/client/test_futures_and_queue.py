"""Completion objects of the producer and the consumers' receive queue (threads and asyncio)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from braid.client.errors import AlreadyClosedError
from braid.client.message import (
    Message,
    count_by_owner,
    decode_entry,
    delivered_by,
    delivery_token,
    last_positions,
    position_of,
    stamp_delivery_tokens,
)
from braid.client.pending import PendingMessage, SendGroup, SharedConditionFuture, fail, succeed
from braid.client.receive_queue import ReceiveQueue
from braid.core.message_id import MessageId
from braid.protocol import batch, pb


def _pending(completion: object, index: int = -1) -> PendingMessage:
    return PendingMessage(b"v", None, None, None, None, completion, index, 0, 0.0)


def test_shared_condition_futures_behave_like_futures() -> None:
    condition = threading.Condition()
    a: SharedConditionFuture[int] = SharedConditionFuture(condition)
    b: SharedConditionFuture[int] = SharedConditionFuture(condition)
    assert isinstance(a, concurrent.futures.Future)
    seen: list[int] = []
    a.add_done_callback(lambda f: seen.append(f.result()))
    with pytest.raises(concurrent.futures.TimeoutError):
        a.result(timeout=0.01)

    def complete() -> None:
        b.set_result(2)  # wakes a's waiter too; it must keep waiting for its own result
        a.set_result(1)

    threading.Timer(0.05, complete).start()
    assert a.result(timeout=5) == 1 and b.result(timeout=5) == 2
    assert seen == [1]
    done, _ = concurrent.futures.wait([a, b], timeout=1)
    assert done == {a, b}
    c: SharedConditionFuture[int] = SharedConditionFuture(condition)
    c.set_exception(KeyError("k"))
    assert isinstance(c.exception(timeout=1), KeyError)


def test_completions_tolerate_cancelled_futures() -> None:
    future: concurrent.futures.Future[MessageId] = concurrent.futures.Future()
    future.cancel()
    succeed(_pending(future), MessageId.earliest())
    fail(_pending(future), RuntimeError("late"))


def test_a_send_group_resolves_once_with_every_id_in_order() -> None:
    future: concurrent.futures.Future[list[MessageId]] = concurrent.futures.Future()
    group = SendGroup(2, future)
    succeed(_pending(group, 1), MessageId.latest())
    assert not future.done()
    succeed(_pending(group, 1), MessageId.earliest())  # a duplicate completion is ignored
    succeed(_pending(group, 0), MessageId.earliest())
    assert future.result(timeout=1) == [MessageId.earliest(), MessageId.latest()]
    failing: concurrent.futures.Future[list[MessageId]] = concurrent.futures.Future()
    failed_group = SendGroup(2, failing)
    fail(_pending(failed_group, 0), RuntimeError("x"))
    succeed(_pending(failed_group, 1), MessageId.latest())
    assert isinstance(failing.exception(timeout=1), RuntimeError)
    empty: concurrent.futures.Future[list[MessageId]] = concurrent.futures.Future()
    SendGroup(0, empty)
    assert empty.result(timeout=1) == []


def _messages(count: int, owner: object = None) -> list:
    body = batch.build_entry(
        pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
        [(pb.SingleMessageMetadata(), b"%d" % i) for i in range(count)],
    )
    messages, count = decode_entry(
        body, topic="t", segment_id=0, ledger_id=1, entry_id=2, redelivery=0, owner=owner
    )
    assert count == len(messages)
    return messages


async def test_async_get_waits_times_out_and_wakes() -> None:
    queue = ReceiveQueue(asyncio.get_running_loop(), "q")
    assert await queue.get(0) is None
    assert await queue.get(0.01) is None
    waiter = asyncio.ensure_future(queue.get_many(10, None))
    await asyncio.sleep(0)
    queue.put_many(_messages(3))
    got = await asyncio.wait_for(waiter, 5)
    assert [m.value for m in got] == [b"0", b"1", b"2"]
    queue.close()
    with pytest.raises(AlreadyClosedError):
        await queue.get(None)


async def test_blocking_get_from_a_thread_and_purge() -> None:
    loop = asyncio.get_running_loop()
    queue = ReceiveQueue(loop, "q")
    owner_a, owner_b = object(), object()
    result: list = []
    thread = threading.Thread(target=lambda: result.append(queue.get_blocking(5)))
    thread.start()
    queue.put_many(_messages(1, owner_a))
    await asyncio.to_thread(thread.join, 5)
    assert result[0].value == b"0"
    queue.put_many(_messages(2, owner_b) + _messages(2, owner_a))
    first_a = queue.first(lambda m: delivered_by(m) is owner_a)
    assert first_a is not None and first_a.value == b"0" and len(queue) == 4  # left in place
    assert queue.first(lambda m: delivered_by(m) is None) is None
    removed = queue.purge(lambda m: delivered_by(m) is owner_a)
    assert len(removed) == 2 and len(queue) == 2
    rest = queue.get_many_blocking(10, 0)
    assert [delivered_by(m) for m in rest] == [owner_b, owner_b]
    assert queue.get_many_blocking(10, 0.01) == []


def test_decode_entry_reads_batches_compression_and_skips_compacted_messages() -> None:
    singles = [
        (pb.SingleMessageMetadata(partition_key="k0", event_time=5), b"zero"),
        (pb.SingleMessageMetadata(compacted_out=True), b"gone"),
        (pb.SingleMessageMetadata(sequence_id=42), b"two"),
    ]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=10, publish_time=99)
    body = batch.build_entry(meta, singles, compression=pb.ZSTD)
    got, count = decode_entry(
        body, topic="t", segment_id=3, ledger_id=7, entry_id=8, redelivery=2, owner=None
    )
    assert [m.value for m in got] == [b"zero", b"two"] and count == 3  # compacted one counts
    first, second = got
    assert first.key == "k0" and first.event_time == 5 and first.sequence_id == 10
    assert second.sequence_id == 42 and second.redelivery_count == 2 and second.publish_time == 99
    assert first.message_id < second.message_id
    single = batch.build_single_entry(
        pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1, partition_key="k"),
        b"alone",
    )
    [only], _ = decode_entry(
        single, topic="t", segment_id=0, ledger_id=1, entry_id=1, redelivery=0, owner=None
    )
    assert (only.value, only.key, only.sequence_id) == (b"alone", "k", 3)


@pytest.mark.parametrize("cut", [5, 30, -3])
def test_corrupt_entries_raise_a_typed_error(cut: int) -> None:
    from braid.core.errors import BraidError

    body = batch.build_entry(
        pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
        [(pb.SingleMessageMetadata(), b"payload-%d" % i) for i in range(3)],
    )
    with pytest.raises(BraidError):
        decode_entry(
            body[:cut], topic="t", segment_id=0, ledger_id=1, entry_id=1, redelivery=0, owner=None
        )


def _entry(owner: object, segment_id: int, entry_id: int, count: int) -> list[Message]:
    body = batch.build_entry(
        pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
        [(pb.SingleMessageMetadata(), b"%d" % i) for i in range(count)],
    )
    messages, _ = decode_entry(
        body,
        topic="t",
        segment_id=segment_id,
        ledger_id=7,
        entry_id=entry_id,
        redelivery=0,
        owner=owner,
    )
    return messages


def test_the_consumers_view_of_delivered_messages() -> None:
    a, b = object(), object()
    messages = _entry(b, 3, 5, 2) + _entry(a, 1, 9, 3) + _entry(b, 3, 6, 1)
    assert [delivered_by(m) for m in messages] == [b, b, a, a, a, b]
    assert list(count_by_owner(messages).items()) == [(b, 3), (a, 3)]
    assert [position_of(m) for m in messages[:3]] == [(7, 5, 0, 2), (7, 5, 1, 2), (7, 9, 0, 3)]
    assert last_positions(messages) == {3: (7, 6, 0), 1: (7, 9, 2)}
    assert delivery_token(messages[0]) == -1  # not delivered to the application yet
    seen: list[tuple[int, tuple[int, int, int, int]]] = []

    def token_for(segment_id: int, position: tuple[int, int, int, int]) -> int:
        seen.append((segment_id, position))
        return 100 + len(seen)

    stamp_delivery_tokens(messages, token_for)
    assert [delivery_token(m) for m in messages] == [101, 102, 103, 104, 105, 106]
    assert seen[0] == (3, (7, 5, 0, 2)) and seen[-1] == (3, (7, 6, 0, 1))
