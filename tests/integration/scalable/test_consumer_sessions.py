"""Consumer sessions and assignments (SubscriptionCoordinator) on a real broker.

Upstream's coordinator scenarios — round-robin deals, reconnect within grace, eviction after grace,
restored sessions on a new leader — plus Braid's all-ancestor drain gating, driven by real cursors:
a child segment is handed out only after the subscription acknowledged everything of every
ancestor, and a seek that rewinds the subscription takes the children back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from braid.clock import ManualClock
from braid.core.names import SegmentTopicName, TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.coordinator import REGISTRATION_SAVE_DELAY_S, ConsumerAssignmentView
from braid.scalable.errors import NotLeader
from braid.scalable.resources import SubscriptionType
from braid.scalable.service import ScalableTopicSettings
from tests.support.held_writes import HeldWrites
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, request
from tests.support.scalable_stack import ScalableStack, open_scalable_stack, second_service
from tests.support.segment_io import drain, produce

TOPIC = TopicName.parse("topic://public/default/orders")
GRACE = 60.0


class Connection:
    """What the coordinator pushes to one client connection (a registered consumer's)."""

    def __init__(self) -> None:
        self.closed = False
        self.pushed: list[tuple[int, ConsumerAssignmentView]] = []

    def send_assignment_update(self, consumer_id: int, assignment: ConsumerAssignmentView) -> None:
        self.pushed.append((consumer_id, assignment))

    def latest(self) -> list[int]:
        return [s.segment_id for s in self.pushed[-1][1].segments] if self.pushed else []


def ids(view: ConsumerAssignmentView) -> list[int]:
    return [s.segment_id for s in view.segments]


def segment(layout_stack: ScalableStack, segment_id: int) -> str:
    layout = layout_stack.scalable.local_controller(TOPIC)
    assert layout is not None
    info = layout.layout.segment(segment_id)
    return str(SegmentTopicName.of(TOPIC, info.hash_range, segment_id))


@pytest.fixture
async def clock_stack(tmp_path: Path) -> AsyncIterator[tuple[ScalableStack, ManualClock]]:
    clock = ManualClock()
    stack = await open_scalable_stack(
        tmp_path / "b",
        scalable_clock=clock,
        settings=ScalableTopicSettings(consumer_session_grace_s=GRACE, gc_interval_s=0),
    )
    try:
        yield stack, clock
    finally:
        await stack.close()


async def register(
    stack: ScalableStack,
    name: str,
    conn: Connection,
    *,
    consumer_id: int = 1,
    sub: str = "s",
    sub_type: SubscriptionType = SubscriptionType.STREAM,
    earliest: bool = True,
) -> ConsumerAssignmentView:
    return await stack.scalable.register_consumer(
        str(TOPIC), sub, name, consumer_id, sub_type, conn, earliest=earliest
    )


async def test_one_consumer_gets_every_segment(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 4)
    view = await register(stack, "c1", Connection())
    assert ids(view) == [0, 1, 2, 3] and view.layout_epoch == 0
    registrations = await stack.scalable.resources.list_registrations(TOPIC, "s")
    assert [(r.consumer_name, r.segment_ids) for r in registrations] == [("c1", (0, 1, 2, 3))]


async def test_consumers_share_segments_round_robin_and_only_changed_ones_are_told(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 4)
    c1, c2, c3 = Connection(), Connection(), Connection()
    await register(stack, "c1", c1)
    assert ids(await register(stack, "c2", c2)) == [1, 3]
    assert c1.latest() == [0, 2] and c2.pushed == []
    assert ids(await register(stack, "c3", c3)) == [2]
    assert c1.latest() == [0, 3] and c2.latest() == [1]
    assert await stack.scalable.unregister_consumer(c2, 1) is None
    assert c1.latest() == [0, 2] and c3.latest() == [1, 3]


async def test_the_assignment_does_not_depend_on_join_order(tmp_path: Path) -> None:
    deals = []
    for order in (["a", "b", "c"], ["c", "a", "b"]):
        stack = await open_scalable_stack(tmp_path / "-".join(order))
        try:
            await stack.scalable.create_topic(TOPIC, 5)
            conns = {name: Connection() for name in order}
            views = {name: await register(stack, name, conns[name]) for name in order}
            deals.append(
                {n: conns[n].latest() if conns[n].pushed else ids(views[n]) for n in order}
            )
        finally:
            await stack.close()
    assert deals[0] == deals[1] == {"a": [0, 3], "b": [1, 4], "c": [2]}


async def test_registering_twice_with_the_same_name_keeps_one_session(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    first, second = Connection(), Connection()
    await register(stack, "c1", first)
    again = await register(stack, "c1", second, consumer_id=9)
    assert ids(again) == [0, 1]
    controller = stack.scalable.local_controller(TOPIC)
    assert controller is not None
    coordinator = controller.coordinator("s")
    assert coordinator is not None and coordinator.consumer_names == ["c1"]


async def test_reconnect_within_grace_keeps_the_assignment_without_a_rebalance(
    clock_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = clock_stack
    await stack.scalable.create_topic(TOPIC, 4)
    c1, c2 = Connection(), Connection()
    await register(stack, "c1", c1)
    await register(stack, "c2", c2)
    pushes = len(c2.pushed)
    c1.closed = True
    stack.scalable.on_connection_closed(c1)
    clock.advance(GRACE - 1)
    back = Connection()
    assert ids(await register(stack, "c1", back, consumer_id=5)) == [0, 2]
    clock.advance(10)
    await asyncio.sleep(0)
    assert len(c2.pushed) == pushes and back.pushed == []


async def test_a_consumer_not_back_within_grace_is_evicted_and_the_rest_rebalance(
    clock_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = clock_stack
    await stack.scalable.create_topic(TOPIC, 4)
    c1, c2 = Connection(), Connection()
    await register(stack, "c1", c1)
    await register(stack, "c2", c2)
    c1.closed = True
    stack.scalable.on_connection_closed(c1)
    clock.advance(GRACE)
    await eventually(lambda: c2.latest() == [0, 1, 2, 3], message="c2 to get every segment")
    registrations = await stack.scalable.resources.list_registrations(TOPIC, "s")
    assert [r.consumer_name for r in registrations] == ["c2"]


async def test_a_stale_consumer_id_does_not_unregister_the_session(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    conn = Connection()
    await register(stack, "c1", conn, consumer_id=1)
    await register(stack, "c1", conn, consumer_id=2)  # reconnected with a new id
    await stack.scalable.unregister_consumer(conn, 1)
    registrations = await stack.scalable.resources.list_registrations(TOPIC, "s")
    assert [r.consumer_name for r in registrations] == ["c1"]


async def test_a_new_leader_restores_every_consumer_with_a_fresh_grace_period(
    clock_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = clock_stack
    await stack.scalable.create_topic(TOPIC, 4)
    c1, c2 = Connection(), Connection()
    await register(stack, "c1", c1)
    await register(stack, "c2", c2)
    other = await second_service(
        stack, clock=clock, settings=ScalableTopicSettings(consumer_session_grace_s=GRACE)
    )
    try:
        follower = await other.scalable.controller(TOPIC)
        clock.advance(GRACE - 5)  # the old leader's clocks do not carry over
        await stack.scalable.release_controller(TOPIC)
        await eventually(lambda: follower.is_leader, message="the follower to lead")
        await follower.wait_ready()
        coordinator = follower.coordinator("s")
        assert coordinator is not None
        assert coordinator.consumer_names == ["c1", "c2"]
        assert all(not coordinator.session(n).connected for n in ("c1", "c2"))  # type: ignore[union-attr]
        clock.advance(GRACE - 1)
        back = Connection()
        view = await other.scalable.register_consumer(
            str(TOPIC), "s", "c1", 7, SubscriptionType.STREAM, back
        )
        assert ids(view) == [0, 2]
        clock.advance(2)  # c2 never came back
        await eventually(lambda: back.latest() == [0, 1, 2, 3], message="c2 evicted")
    finally:
        await other.close()


async def test_registration_on_a_follower_is_refused_with_the_leader_named(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.controller(TOPIC)
    other = await second_service(stack)
    try:
        with pytest.raises(NotLeader, match=stack.broker.service.service_url):
            await other.scalable.register_consumer(
                str(TOPIC), "s", "c1", 1, SubscriptionType.STREAM, Connection()
            )
    finally:
        await other.close()


async def test_children_wait_until_the_parent_is_drained_by_this_subscription(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        assert ids(await register(stack, "c1", conn)) == [0]
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a", b"b", b"c"])
        await stack.scalable.split(TOPIC, 0)
        # The split pushed nothing new: segment 0 still holds data for "s".
        assert conn.latest() in ([], [0])
        assert await drain(raw, parent, "s", 3) == [b"a", b"b", b"c"]
        await eventually(lambda: conn.latest() == [1, 2], message="children after the drain")
    finally:
        await raw.close()


async def test_a_new_leader_hands_out_the_children_of_a_parent_drained_before_it_took_over(
    stack: ScalableStack,
) -> None:
    # The parent is drained while no leader listens (no drain event reaches anyone, as when
    # the broker crashes right after the last ack): the next leader must see it from the
    # cursors, or the children stay unassigned until something else rebalances.
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await register(stack, "c1", Connection())
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a", b"b"])
        await stack.scalable.split(TOPIC, 0)
        await stack.scalable.release_controller(TOPIC)
        assert await drain(raw, parent, "s", 2) == [b"a", b"b"]
        await stack.scalable.controller(TOPIC)  # leads again, restores c1's session
        back = Connection()
        assert ids(await register(stack, "c1", back, consumer_id=2)) == [1, 2]
    finally:
        await raw.close()


async def test_each_subscription_moves_through_the_dag_on_its_own(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        fast, slow = Connection(), Connection()
        await register(stack, "f", fast, sub="fast")
        await register(stack, "s", slow, sub="slow")
        parent = segment(stack, 0)
        await produce(raw, parent, [b"1", b"2"])
        await stack.scalable.split(TOPIC, 0)
        await drain(raw, parent, "fast", 2)
        await eventually(lambda: fast.latest() == [1, 2], message="fast moves on")
        assert slow.latest() in ([], [0])
    finally:
        await raw.close()


async def test_children_wait_for_every_ancestor_not_only_their_parent(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        await register(stack, "c1", conn)
        root = segment(stack, 0)
        await produce(raw, root, [b"old"])
        await stack.scalable.split(TOPIC, 0)  # 1, 2
        await stack.scalable.split(TOPIC, 1)  # 3, 4; segment 1 is sealed and empty
        controller = stack.scalable.local_controller(TOPIC)
        assert controller is not None
        coordinator = controller.coordinator("s")
        assert coordinator is not None
        await coordinator.refresh()
        assert 1 in coordinator.drained  # empty intermediate segment: drained at once
        assert coordinator.assignment_of("c1").segments[0].segment_id == 0
        assert [s.segment_id for s in coordinator.assignment_of("c1").segments] == [0]
        await drain(raw, root, "s", 1)
        await eventually(lambda: conn.latest() == [3, 4, 2], message="grandchildren last")
    finally:
        await raw.close()


@dataclass
class ParentRead:
    """Segment 0 of a one-segment topic holds two messages; consumer "c1" of subscription "s"
    is registered (``conn`` hears its pushes) and ``raw`` has read both messages on the segment
    without acknowledging them (``last``: the second's id)."""

    raw: RawClient
    conn: Connection
    cursor: Any
    last: pb.MessageIdData

    async def ack(self) -> None:
        ack = pb.CommandAck(consumer_id=77, ack_type=pb.CommandAck.Cumulative)
        ack.message_id.add().CopyFrom(self.last)
        await self.raw.send(commands.wrap(ack))


@pytest.fixture
async def parent_read(stack: ScalableStack) -> AsyncIterator[ParentRead]:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        await register(stack, "c1", conn)
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a", b"b"])
        subscribe = commands.subscribe(
            parent,
            "s",
            pb.CommandSubscribe.Exclusive,
            77,
            78,
            initial_position=pb.CommandSubscribe.Earliest,
        )
        answer = await request(raw, subscribe, 78)
        assert answer.type == pb.BaseCommand.SUCCESS, answer
        await raw.send(commands.flow(77, 2))
        for _ in range(2):
            event = await raw.next_event(lambda c: c.type == pb.BaseCommand.MESSAGE)
        cursor = stack.broker.service.topics[parent].subscriptions["s"].cursor
        yield ParentRead(raw, conn, cursor, event.command.message.message_id)
    finally:
        await raw.close()


async def test_a_parent_acknowledged_but_not_yet_written_keeps_its_children_back(
    stack: ScalableStack, parent_read: ParentRead
) -> None:
    # The last ack lands in the cursor's memory at once and reaches its store a moment later.
    # A split that seals the parent in between must not count it drained: a broker crash then
    # would come back to the older position and redeliver the parent's tail after the
    # children's messages were out (a per-key order violation across the restart).
    conn, cursor = parent_read.conn, parent_read.cursor
    held = HeldWrites(cursor)
    await parent_read.ack()
    try:
        await eventually(lambda: held.writing, message="the ack's cursor write under way")
        assert cursor.backlog() == 0  # acknowledged in memory
        split = asyncio.ensure_future(stack.scalable.split(TOPIC, 0))
        await eventually(lambda: split.done() or held.awaited, message="the split's drain check")
        assert conn.latest() in ([], [0])  # not written yet: the children wait
    finally:
        held.release()
    await split
    await eventually(lambda: conn.latest() == [1, 2], message="children once it is written")


async def test_a_parent_whose_last_ack_failed_to_be_written_is_handed_over_once_rewritten(
    stack: ScalableStack, parent_read: ParentRead
) -> None:
    # The store refuses the last ack's write and the split's drain check's write again: the
    # children wait (safe), and the broker's periodic cursor write, which succeeds, hands them
    # over - a failed write holds a hand-over back, never for good.
    conn, cursor = parent_read.conn, parent_read.cursor
    held = HeldWrites(cursor, failures=2)
    held.release()
    await parent_read.ack()
    await eventually(
        lambda: held.failures == 1 and not cursor.write_in_flight, message="a failed write"
    )
    assert cursor.backlog() == 0 and not cursor.state_written
    await stack.scalable.split(TOPIC, 0)
    assert held.failures == 0 and not cursor.state_written
    assert conn.latest() in ([], [0])
    monitor = stack.broker.service.limits_monitor
    assert await monitor.write_unwritten_cursors() == 1
    assert cursor.state_written
    await eventually(lambda: conn.latest() == [1, 2], message="children once it is written")
    assert await monitor.write_unwritten_cursors() == 0


async def test_hand_overs_share_one_delayed_registration_write_and_a_new_member_flushes_it(
    clock_stack: tuple[ScalableStack, ManualClock],
) -> None:
    """ADR 0068: the push goes out at once; the registration (what a new leader starts from)
    is written REGISTRATION_SAVE_DELAY_S later with the newest segments, unless a registration
    waits for it."""
    stack, clock = clock_stack
    await stack.scalable.create_topic(TOPIC, 1)
    conn = Connection()
    await register(stack, "c1", conn)
    await stack.scalable.split(TOPIC, 0)  # 0 sealed and empty: drained, 1 and 2 readable
    await eventually(lambda: conn.latest() == [1, 2], message="children pushed")
    await stack.scalable.split(TOPIC, 1)  # 3, 4
    await eventually(lambda: conn.latest() == [3, 4, 2], message="grandchildren pushed")

    async def saved() -> dict[str, tuple[int, ...]]:
        found = await stack.scalable.resources.list_registrations(TOPIC, "s")
        return {r.consumer_name: r.segment_ids for r in found}

    assert await saved() == {"c1": (0,)}  # not rewritten per hand-over
    clock.advance(REGISTRATION_SAVE_DELAY_S)

    async def written() -> bool:
        return await saved() == {"c1": (3, 4, 2)}

    await eventually(written, message="one write, of the newest segments")
    await stack.scalable.split(TOPIC, 2)  # 5, 6
    await eventually(lambda: conn.latest() == [3, 4, 5, 6], message="pushed")
    await register(stack, "c2", Connection(), consumer_id=2)
    regs = await saved()  # the registration waited for the pending writes
    assert regs["c1"] == tuple(s.segment_id for s in conn.pushed[-1][1].segments)
    assert set(regs) == {"c1", "c2"} and set(regs["c1"]) | set(regs["c2"]) == {3, 4, 5, 6}


async def test_a_seek_back_makes_the_parent_readable_again(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        await register(stack, "c1", conn)
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a"], publish_time_ms=1_000)
        await stack.scalable.split(TOPIC, 0)
        await drain(raw, parent, "s", 1)
        await eventually(lambda: conn.latest() == [1, 2], message="children")
        await stack.scalable.seek_subscription(TOPIC, "s", 0)
        await eventually(lambda: conn.latest() == [0], message="back to the parent")
    finally:
        await raw.close()


async def test_pip460_checkpoint_group_children_wait_for_their_parents_reported_drained(
    stack: ScalableStack,
) -> None:
    """PIP-460: a CheckpointConsumer "requires a group identifier to coordinate parallel
    instances"; the group's controller gates a split's children on the members' drain reports
    (ADR 0057), so per-key order holds across the group."""
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.split(TOPIC, 0)  # 0 sealed; 1, 2 active
    a, b = Connection(), Connection()
    checkpoint = SubscriptionType.CHECKPOINT
    view = await register(stack, "a", a, sub="g", sub_type=checkpoint)
    assert ids(view) == [0]  # the children wait for the parent
    view_b = await register(stack, "b", b, sub="g", sub_type=checkpoint, consumer_id=2)
    assert ids(view_b) == []
    holder, other = "a", "b"
    # A report of a segment another member holds, or of an active one, unblocks nothing.
    await stack.scalable.register_consumer(str(TOPIC), "g", other, 2, checkpoint, b, drained=(0, 1))
    coordinator = stack.scalable.local_controller(TOPIC).coordinator("g")  # type: ignore[union-attr]
    assert coordinator.drained == frozenset()
    # The holder delivered the parent whole: both children are dealt at once.
    answer = await stack.scalable.register_consumer(
        str(TOPIC), "g", holder, 1, checkpoint, a, drained=(0,)
    )
    assert coordinator.drained == frozenset({0})
    dealt = set(ids(answer)) | set(ids(coordinator.assignment_of(other)))
    assert dealt == {1, 2}
    assert len(ids(answer)) == 1  # one child each, counts within one
    assert coordinator.stats()["drainedSegments"] == [0]


async def test_pip460_checkpoint_group_merge_child_waits_for_both_parents(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.merge(TOPIC, [0, 1])  # 0, 1 sealed; 2 active
    checkpoint = SubscriptionType.CHECKPOINT
    a, b = Connection(), Connection()
    await register(stack, "a", a, sub="g", sub_type=checkpoint)
    await register(stack, "b", b, sub="g", sub_type=checkpoint, consumer_id=2)
    coordinator = stack.scalable.local_controller(TOPIC).coordinator("g")  # type: ignore[union-attr]
    held = {name: ids(coordinator.assignment_of(name)) for name in ("a", "b")}
    assert sorted(held["a"] + held["b"]) == [0, 1]  # one parent each, the child waits
    first = "a" if held["a"] else "b"
    second = "b" if first == "a" else "a"
    conns = {"a": (a, 1), "b": (b, 2)}
    view = await stack.scalable.register_consumer(
        str(TOPIC), "g", first, conns[first][1], checkpoint, conns[first][0], drained=held[first]
    )
    assert 2 not in ids(view) and 2 not in ids(coordinator.assignment_of(second))
    await stack.scalable.register_consumer(
        str(TOPIC),
        "g",
        second,
        conns[second][1],
        checkpoint,
        conns[second][0],
        drained=held[second],
    )
    dealt = ids(coordinator.assignment_of("a")) + ids(coordinator.assignment_of("b"))
    assert dealt == [2] and coordinator.drained == frozenset({0, 1})


async def test_queue_consumers_do_not_register(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    with pytest.raises(ValueError, match="do not register"):
        await register(stack, "q", Connection(), sub_type=SubscriptionType.QUEUE)


async def test_empty_descendants_are_skipped_and_the_frontier_is_pushed_at_once(
    stack: ScalableStack,
) -> None:
    # 0 holds data; 1 and 3 are sealed while empty. When 0 drains, the consumer is told the
    # whole frontier [5, 6, 4, 2] in one push: no push ever names the empty segments, so it
    # never attaches them one by one (ADR 0043).
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        await register(stack, "c1", conn)
        root = segment(stack, 0)
        await produce(raw, root, [b"old"])
        await stack.scalable.split(TOPIC, 0)  # 1, 2
        await stack.scalable.split(TOPIC, 1)  # 3, 4
        await stack.scalable.split(TOPIC, 3)  # 5, 6
        before = len(conn.pushed)
        await drain(raw, root, "s", 1)
        await eventually(lambda: conn.latest() == [5, 6, 4, 2], message="the whole frontier")
        assert len(conn.pushed) == before + 1
        assert all(not {1, 3} & set(ids(view)) for _, view in conn.pushed)
    finally:
        await raw.close()


async def test_drains_reported_while_the_coordinator_works_are_handed_over_in_one_push(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        await register(stack, "c1", conn)
        left, right = segment(stack, 0), segment(stack, 1)
        await produce(raw, left, [b"l"])
        await produce(raw, right, [b"r"])
        await stack.scalable.merge(TOPIC, [0, 1])  # 2
        controller = stack.scalable.local_controller(TOPIC)
        assert controller is not None
        coordinator = controller.coordinator("s")
        assert coordinator is not None
        before = len(conn.pushed)
        # Both parents drain while the coordinator is busy (its lock held, as during another
        # rebalance): the two drain events are absorbed together.
        async with coordinator._lock:
            await drain(raw, left, "s", 1)
            await drain(raw, right, "s", 1)
            await eventually(
                lambda: coordinator.pending_drains == {0, 1}, message="both drain events"
            )
        await eventually(lambda: conn.latest() == [2], message="the merged child")
        assert [ids(v) for _, v in conn.pushed[before:]] == [[2]]
        assert coordinator.drained == frozenset({0, 1})
    finally:
        await raw.close()


async def test_a_drained_segment_cursor_was_written_to_its_node_without_a_cursor_ledger(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await register(stack, "c1", Connection())
        root = segment(stack, 0)
        await produce(raw, root, [b"a", b"b"])
        ledgers_before = set(await stack.broker.storage.list_ledgers())
        await drain(raw, root, "s", 2)
        topic = await stack.broker.service.get_or_create_topic(root, create=False)
        # The acknowledgment that drains a segment costs one CAS of the cursor node: no cursor
        # ledger is created for it (ADR 0043).
        assert topic.subscriptions["s"].cursor.mark_delete_position.entry_id == 1
        assert set(await stack.broker.storage.list_ledgers()) == ledgers_before
    finally:
        await raw.close()


async def test_a_consumer_attaching_ahead_is_told_its_next_segments_paused(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        ahead, plain = Connection(), Connection()
        await stack.scalable.register_consumer(
            str(TOPIC), "s", "c1", 1, SubscriptionType.STREAM, ahead, attach_ahead=True
        )
        await stack.scalable.register_consumer(
            str(TOPIC), "p", "c1", 1, SubscriptionType.STREAM, plain, earliest=True
        )
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a"])
        await stack.scalable.split(TOPIC, 0)  # 1, 2 wait for 0
        # The consumer that understands paused segments may open 1 and 2 now, without
        # permits; one that does not is never told about segments it may not read.
        assert [(s.segment_id, s.paused) for s in ahead.pushed[-1][1].segments] == [
            (0, False),
            (1, True),
            (2, True),
        ]
        assert all(not s.paused for _, view in plain.pushed for s in view.segments)
        await drain(raw, parent, "s", 1)
        await eventually(
            lambda: (
                [(s.segment_id, s.paused) for s in ahead.pushed[-1][1].segments]
                == [(1, False), (2, False)]
            ),
            message="the children unpaused",
        )
    finally:
        await raw.close()


async def test_every_assigned_segment_names_the_broker_a_lookup_of_it_answers(
    stack: ScalableStack,
) -> None:
    # ADR 0073: a Stream consumer attaches without a lookup - also to sealed segments, which the
    # DAG names no broker for - because its assignment names the broker a lookup would.
    await stack.scalable.create_topic(TOPIC, 1)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        conn = Connection()
        first = await stack.scalable.register_consumer(
            str(TOPIC), "s", "c1", 1, SubscriptionType.STREAM, conn, attach_ahead=True
        )
        parent = segment(stack, 0)
        await produce(raw, parent, [b"a"])
        await stack.scalable.split(TOPIC, 0)
        await produce(raw, segment(stack, 1), [b"b"])
        await stack.scalable.split(TOPIC, 1)  # 1 is sealed holding a message for "s"
        await drain(raw, parent, "s", 1)
        await eventually(
            lambda: (
                [(s.segment_id, s.paused) for s in conn.pushed[-1][1].segments]
                == [(1, False), (2, False), (3, True), (4, True)]
            ),
            message="sealed 1 readable after its parent drained, its children ahead",
        )
        for view in (first, conn.pushed[-1][1]):
            for assigned in view.segments:
                answer = await request(raw, commands.lookup(assigned.segment_topic, 99), 99)
                url = answer.lookupTopicResponse.brokerServiceUrl
                assert assigned.broker is not None and assigned.broker.url == url, assigned
                assert assigned.broker.url_tls is None  # this broker has no TLS listener
    finally:
        await raw.close()
