"""The test-only switch fault point: parsing ``BRAID_SWITCH_FAULT_PAUSE_AT`` and when it stops."""

from __future__ import annotations

import asyncio

import pytest

from braid.clusters.faults import SWITCH_FAULT_ENV, switch_pause_hook_from_env
from braid.clusters.orchestrator import StepHook
from braid.core.storage_switch import Step, StepKind


def test_unset_means_no_hook() -> None:
    assert switch_pause_hook_from_env({}) is None
    assert switch_pause_hook_from_env({SWITCH_FAULT_ENV: ""}) is None


@pytest.mark.parametrize("spec", ["COPY", "BUILD:0", "BUILD:x", "build"])
def test_a_bad_value_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match=SWITCH_FAULT_ENV):
        switch_pause_hook_from_env({SWITCH_FAULT_ENV: spec})


async def _run(hook: StepHook, step: Step) -> None:
    result = hook(step)
    assert asyncio.iscoroutine(result)
    await result


async def test_it_pauses_before_the_nth_step_of_its_kind_only() -> None:
    hook = switch_pause_hook_from_env({SWITCH_FAULT_ENV: "BUILD:2"})
    assert hook is not None
    await _run(hook, Step(StepKind.DISCOVER))
    await _run(hook, Step(StepKind.BUILD))
    paused = asyncio.ensure_future(_run(hook, Step(StepKind.BUILD)))
    for _ in range(20):  # loop turns, not time: the hook would finish within a few
        await asyncio.sleep(0)
    assert not paused.done()
    paused.cancel()
    await asyncio.gather(paused, return_exceptions=True)
