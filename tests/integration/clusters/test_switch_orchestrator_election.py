"""Issue 14, gap (b): a switch directive without an ``origin=`` line is orchestrated by the broker
elected at ``/admin/bookie-clusters/orchestrator-leader``; when it resigns, another broker takes
over and resumes the switch from the persisted state.

Two storage-cluster services share one SQLite metadata store (two sessions, as two brokers) and
one data plane (:func:`tests.support.switch_stack.second_switch_service`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from braid.clock import SystemClock
from braid.core.storage_switch import (
    ORCHESTRATOR_LEADER_PATH,
    ItemStatus,
    Step,
    StepKind,
    SwitchState,
    SwitchTarget,
    new_switch_state,
)
from braid.metadata import read_leader
from tests.support.polling import eventually
from tests.support.switch_stack import (
    ORIGIN,
    SwitchStack,
    open_switch_stack,
    second_switch_service,
)

OTHER = "http://127.0.0.1:2"


def pause_at_second_build() -> tuple[Callable[[Step], Awaitable[None]], asyncio.Event]:
    """A step hook that blocks the orchestrator at its second BUILD (until it is stopped), and
    the event set when it got there."""
    builds = {"count": 0}
    paused = asyncio.Event()

    async def hook(step: Step) -> None:
        if step.kind is StepKind.BUILD:
            builds["count"] += 1
            if builds["count"] == 2:
                paused.set()
                await asyncio.Event().wait()  # until the orchestrator is stopped

    return hook, paused


async def assert_three_copied_and_promoted(stack: SwitchStack, done: SwitchState) -> None:
    """The three schema ledgers are promoted, each copy identical to its source (I10)."""
    assert {i.status for i in done.items} == {ItemStatus.PROMOTED}
    assert len(done.items) == 3
    for item in done.items:
        new = await stack.entries("new", item.ledger_id)
        assert new and new == await stack.entries("old", item.ledger_id)


async def three_schemas_and_a_standby(stack: SwitchStack) -> None:
    """Three schema ledgers to copy and a ``new`` cluster ready to switch to."""
    for name in ("a", "b", "c"):
        await stack.add_schema(f"public/default/{name}", name.encode())
    await stack.service.register("new", stack.new_uri, "STANDBY")
    await stack.service.advance_idgen("new", 1000)


async def test_an_origin_less_directive_is_run_by_the_elected_leader_then_its_successor(
    tmp_path: Path,
) -> None:
    first_hook, paused = pause_at_second_build()
    second_steps: list[StepKind] = []

    def second_hook(step: Step) -> None:
        second_steps.append(step.kind)

    stack = await open_switch_stack(tmp_path / "b", step_hook=first_hook, concurrency=1)
    other = None
    try:
        await three_schemas_and_a_standby(stack)
        other = await second_switch_service(stack, OTHER, step_hook=second_hook, concurrency=1)
        assert stack.service.orchestrator_leader and not other.service.orchestrator_leader
        assert await read_leader(stack.metadata, ORCHESTRATOR_LEADER_PATH) == ORIGIN.encode()

        # A directive without an origin line (written as an operator's tool would).
        registry = stack.service.registry
        state = new_switch_state(
            "old",
            "new",
            None,
            SystemClock().now_ms(),
            await stack.client("new").next_ledger_id(),
            "old",
        )
        await registry.write_state(state, -1)
        await registry.write_switch_target(SwitchTarget("new", None), -1)
        await asyncio.wait_for(paused.wait(), 30)
        assert stack.router.active_name == "new"
        assert stack.service.orchestrator.running
        assert not other.service.orchestrator.running and second_steps == []

        # The leader goes away (resigns): the other broker is elected and resumes.
        await stack.service.stop()

        async def took_over() -> bool:
            return other.service.orchestrator_leader

        await eventually(took_over, within=30, message="the second broker elected")
        assert await read_leader(other.store, ORCHESTRATOR_LEADER_PATH) == OTHER.encode()
        done = await stack.wait_phase("CLEANUP")
        assert StepKind.DISCOVER not in second_steps, second_steps
        assert StepKind.BUILD in second_steps and StepKind.PROMOTE in second_steps
        await assert_three_copied_and_promoted(stack, done)
    finally:
        if other is not None:
            await other.close()
        await stack.close()


GONE = "http://127.0.0.1:3"


async def test_a_directive_whose_origin_broker_is_gone_is_adopted_by_the_leader(
    tmp_path: Path,
) -> None:
    """The origin broker stops for good mid-BUILD: the elected leader (told by the removal of the
    origin's announcement) CASes the directive's origin to itself and finishes the switch; the
    old origin coming back later does not orchestrate any more."""
    leader_steps: list[StepKind] = []
    hold_leader = asyncio.Event()
    leader_holding = asyncio.Event()

    async def leader_hook(step: Step) -> None:
        leader_steps.append(step.kind)
        if not hold_leader.is_set():
            leader_holding.set()
            await hold_leader.wait()

    origin_hook, origin_paused = pause_at_second_build()
    returned_steps: list[StepKind] = []

    stack = await open_switch_stack(tmp_path / "b", step_hook=leader_hook, concurrency=1)
    origin = returned = None
    try:
        await three_schemas_and_a_standby(stack)
        origin = await second_switch_service(stack, GONE, step_hook=origin_hook, concurrency=1)
        assert stack.service.orchestrator_leader and not origin.service.orchestrator_leader

        await origin.service.switch("new")  # the directive names GONE as its origin
        await asyncio.wait_for(origin_paused.wait(), 30)
        target = await stack.service.registry.switch_target()
        assert target is not None and target[0].origin == GONE
        assert not stack.service.orchestrator.running and leader_steps == []

        # The origin broker goes away for good; the leader adopts the directive.
        await origin.close()
        origin = None
        await asyncio.wait_for(leader_holding.wait(), 30)
        target = await stack.service.registry.switch_target()
        assert target is not None and target[0] == SwitchTarget("new", ORIGIN)
        assert (await stack.service.status())["switch"]["origin"] == ORIGIN

        # The old origin is back (same URL): the directive is not its any more.
        returned = await second_switch_service(
            stack, GONE, step_hook=returned_steps.append, concurrency=1
        )
        assert not returned.service.orchestrator.running
        hold_leader.set()
        done = await stack.wait_phase("CLEANUP")
        assert returned_steps == []
        assert StepKind.DISCOVER not in leader_steps, leader_steps
        await assert_three_copied_and_promoted(stack, done)
    finally:
        hold_leader.set()
        for other in (origin, returned):
            if other is not None:
                await other.close()
        await stack.close()
