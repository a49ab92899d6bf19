"""The publish pipeline (SEND -> managed ledger -> ledger handle -> bookie journal -> receipt):
in-order receipts for thousands of pipelined sends, with no asyncio task per message and no
cyclic garbage left for the collector (ADR 0014)."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.raw_client import RawClient, message_body, request

TOPIC = "persistent://public/default/pipeline"


async def _pipelined_sends(raw: RawClient, count: int) -> list[pb.BaseCommand]:
    """Write ``count`` SENDs in one go; return the answers, sampling the broker's task count."""
    for seq in range(count):
        raw.proto.send(commands.send(1, seq), message_body("p", seq, b"m%d" % seq))
    await raw.send(commands.ping())
    answers = []
    while len(answers) < count:
        cmd = await raw.next_command(
            lambda c: c.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
        )
        answers.append(cmd)
    return answers


async def test_pipelined_sends_get_in_order_receipts_without_a_task_per_message(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    answer = await request(raw, commands.producer(TOPIC, 1, 7, producer_name="p"), 7)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS
    tasks_before = len(asyncio.all_tasks())
    most_tasks = tasks_before

    async def watch_tasks() -> None:
        nonlocal most_tasks
        while True:
            most_tasks = max(most_tasks, len(asyncio.all_tasks()))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch_tasks())
    try:
        answers = await _pipelined_sends(raw, 2000)
    finally:
        watcher.cancel()
    assert [a.type for a in answers] == [pb.BaseCommand.SEND_RECEIPT] * 2000
    assert [a.send_receipt.sequence_id for a in answers] == list(range(2000))
    entries = [a.send_receipt.message_id.entryId for a in answers]
    assert entries == sorted(entries) and len(set(entries)) == 2000
    # A few tasks come and go (the watcher itself, a trim, a metadata write), never one per
    # message in flight.
    assert most_tasks - tasks_before < 20, (tasks_before, most_tasks)


async def test_publishing_leaves_no_cyclic_garbage(holder: StackHolder) -> None:
    raw = await holder.raw()
    answer = await request(raw, commands.producer(TOPIC, 1, 7, producer_name="p"), 7)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS
    await _pipelined_sends(raw, 200)  # warm up: ledger created, caches filled
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answers = await _pipelined_sends(raw, 1000)
        assert all(a.type == pb.BaseCommand.SEND_RECEIPT for a in answers)
        gc.collect()
        garbage = Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # Everything the pipeline allocates per message is freed by reference counting: a cycle per
    # message would leave thousands of objects here (the margin is for the test's own asyncio
    # plumbing; the pipeline itself leaves none).
    assert sum(garbage.values()) < 100, garbage.most_common(10)
