"""A split or merge that *fails* on a living leader is recovered by that leader (issue 22,
ADR 0040): rolled back while no parent is sealed, rolled forward once one may be. Before, the
record stayed, ``stats`` showed the operation in flight with nothing running it, and every later
split was refused until the broker restarted.

The failures are raised by the controller's step hook, once, at a cut point - the way the
reported one arrived: a split forwarded from another broker to the leader, failing there with
"ledger 0 does not exist in cluster standalone" (404) when the leader terminated the parent. The
scalable layer runs on a manual clock, so the recovery's back-off is stepped, not slept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from braid.admin import AdminServer, create_app
from braid.cli.process import free_port
from braid.clock import ManualClock
from braid.core.errors import BraidError, NotFoundError, ServiceUnavailableError
from braid.core.names import SegmentTopicName, TopicName
from braid.core.ranges import HashRange
from braid.scalable.errors import OperationInProgress
from braid.scalable.operation_recovery import FIRST_DELAY_S, ROLL_BACK, ROLL_FORWARD
from tests.support.polling import eventually
from tests.support.scalable_stack import ScalableStack, second_service

TOPIC = TopicName.parse("topic://public/default/orders")


def fail_at(step: str, error: BraidError, times: int = 1) -> Callable[[str], Awaitable[None]]:
    """A step hook failing the first ``times`` passes through ``step`` with ``error``."""
    remaining = times

    async def hook(name: str) -> None:
        nonlocal remaining
        if name == step and remaining > 0:
            remaining -= 1
            raise error

    return hook


@pytest.fixture
def clock(manual_clock: ManualClock) -> ManualClock:
    return manual_clock


@pytest.fixture
def stack(manual_stack: ScalableStack) -> ScalableStack:
    """The broker with the scalable layer on the manual clock (conftest)."""
    return manual_stack


async def recorded(stack: ScalableStack) -> Any:
    return await stack.scalable.resources.get_operation(TOPIC)


async def segment_exists(stack: ScalableStack, segment_id: int, start: int, end: int) -> bool:
    name = SegmentTopicName.of(TOPIC, HashRange(start, end), segment_id)
    return await stack.broker.service.topic_exists(str(name))


async def test_a_split_failing_before_a_parent_is_sealed_is_rolled_back(
    stack: ScalableStack, clock: ManualClock
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    controller = await stack.scalable.controller(TOPIC)
    controller._step_hook = fail_at("children-created", ServiceUnavailableError("store hiccup"))
    with pytest.raises(ServiceUnavailableError):
        await stack.scalable.split(TOPIC, 0)

    # Something runs it, and says so; a new split is refused meanwhile, naming why.
    stats = (await stack.scalable.stats(TOPIC))["controller"]
    assert stats["operationInFlight"]["type"] == "split"
    assert stats["operationRecovery"]["action"] == ROLL_BACK
    assert "store hiccup" in stats["operationRecovery"]["lastError"]
    assert controller.operation_running
    with pytest.raises(OperationInProgress, match="being recovered"):
        await stack.scalable.split(TOPIC, 0)

    clock.advance(FIRST_DELAY_S)
    await eventually(lambda: not controller.operation_running, message="the roll-back")
    assert await recorded(stack) is None
    assert (await stack.scalable.get_layout(TOPIC)).epoch == 0
    assert not await segment_exists(stack, 1, 0, 0x7FFF)  # the children are gone
    assert not await segment_exists(stack, 2, 0x8000, 0xFFFF)
    stats = (await stack.scalable.stats(TOPIC))["controller"]
    assert stats["operationInFlight"] is None and stats["operationRecovery"] is None
    assert (await stack.scalable.split(TOPIC, 0)).epoch == 1  # nothing stuck


async def test_a_merge_failing_after_a_parent_is_sealed_is_retried_with_back_off(
    stack: ScalableStack, clock: ManualClock
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    controller = await stack.scalable.controller(TOPIC)
    missing = NotFoundError("ledger 0 does not exist in cluster standalone")
    controller._step_hook = fail_at("parents-terminated", missing, times=3)
    with pytest.raises(NotFoundError):
        await stack.scalable.merge(TOPIC, [0, 1])

    stats = (await stack.scalable.stats(TOPIC))["controller"]
    assert stats["operationRecovery"]["action"] == ROLL_FORWARD
    # Two more failures: the attempts back off (1 s, then 2 s, then 4 s).
    for attempt, delay in ((1, 1.0), (2, 2.0)):
        clock.advance(delay)
        await eventually(
            lambda attempt=attempt: (
                (controller._recovery.stats() or {}).get("failedAttempts") == attempt
            ),
            message=f"failed attempt {attempt}",
        )
    clock.advance(2.0)  # not yet: the next attempt is 4 s after the last
    assert (await stack.scalable.get_layout(TOPIC)).epoch == 0
    clock.advance(2.0)
    await eventually(lambda: not controller.operation_running, message="the roll-forward")
    layout = await stack.scalable.get_layout(TOPIC)
    assert layout.epoch == 1 and [s.segment_id for s in layout.active_segments] == [2]
    stats = (await stack.scalable.stats(TOPIC))["controller"]
    assert stats["operationInFlight"] is None and stats["operationRecovery"] is None


async def test_a_new_leader_takes_over_a_recovery_the_old_one_did_not_finish(
    stack: ScalableStack, clock: ManualClock
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    controller = await stack.scalable.controller(TOPIC)
    controller._step_hook = fail_at("parents-terminated", ServiceUnavailableError("flaky"))
    with pytest.raises(ServiceUnavailableError):
        await stack.scalable.split(TOPIC, 0)
    assert controller.operation_running
    await stack.scalable.release_controller(TOPIC)  # the leader goes before its retry

    other = await second_service(stack, broker_url="pulsar://127.0.0.1:2", clock=clock)
    try:
        successor = await other.scalable.controller(TOPIC)
        await eventually(lambda: successor.is_leader, message="the successor to lead")
        await successor.wait_ready()
        assert await recorded(stack) is None
        assert (await other.scalable.get_layout(TOPIC)).epoch == 1
    finally:
        await other.close()


async def test_a_forwarded_split_failing_on_the_leader_is_recovered_there(
    stack: ScalableStack, clock: ManualClock
) -> None:
    """The reported case: a split sent to one broker, forwarded to the leader's admin API, which
    fails with 404 while sealing the parent."""
    port = free_port()
    failing = fail_at(
        "parents-terminated", NotFoundError("ledger 0 does not exist in cluster standalone")
    )
    leader_broker = await second_service(
        stack,
        broker_url="pulsar://127.0.0.1:2",
        clock=clock,
        step_hook=failing,
        web_service_url=f"http://127.0.0.1:{port}",
    )
    broker = stack.broker
    app = create_app(broker.config, broker.resources, broker.service, leader_broker.scalable)
    admin = AdminServer(app, "127.0.0.1", port)
    await admin.start()
    try:
        leader = leader_broker.scalable
        await leader.create_topic(TOPIC, 1)
        controller = await leader.controller(TOPIC)
        assert controller.is_leader
        follower = stack.scalable
        assert not (await follower.controller(TOPIC)).is_leader

        with pytest.raises(NotFoundError, match="ledger 0 does not exist"):
            await follower.split(TOPIC, 0)
        stats = await follower.stats(TOPIC)  # answered by the leader
        assert stats["controller"]["operationRecovery"]["action"] == ROLL_FORWARD

        clock.advance(FIRST_DELAY_S)
        await eventually(lambda: not controller.operation_running, message="the roll-forward")
        stats = await follower.stats(TOPIC)
        assert stats["controller"]["operationInFlight"] is None
        assert stats["controller"]["operationRecovery"] is None
        assert stats["epoch"] == 1
        assert (await follower.split(TOPIC, 2)).epoch == 2  # nothing stuck
    finally:
        await admin.stop()
        await leader_broker.close()
