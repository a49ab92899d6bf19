"""The test-only fault points: parsing ``BRAID_FAULT_PAUSE_AT`` / ``BRAID_FAULT_FAIL_AT``,
failing a split/merge step once, pausing the pass after it; ``BRAID_MIGRATION_FAULT_PAUSE_AT``
pausing a migration after it recorded a phase."""

from __future__ import annotations

import asyncio

import pytest

from braid.core.migration import MigrationPhase
from braid.scalable.faults import (
    FAIL_ENV,
    FAULT_ENV,
    MIGRATION_FAULT_ENV,
    InjectedFault,
    migration_pause_hook_from_env,
    pause_hook_from_env,
)


def test_unset_means_no_hook() -> None:
    assert pause_hook_from_env({}) is None
    assert pause_hook_from_env({FAULT_ENV: "", FAIL_ENV: ""}) is None


@pytest.mark.parametrize("variable", [FAULT_ENV, FAIL_ENV])
def test_an_unknown_step_is_refused_naming_the_variable(variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        pause_hook_from_env({variable: "sealed"})


async def test_the_first_pass_through_the_step_fails_and_the_next_goes_on() -> None:
    hook = pause_hook_from_env({FAIL_ENV: "children-created"})
    assert hook is not None
    await hook("recorded")
    with pytest.raises(InjectedFault, match="children-created"):
        await hook("children-created")
    await hook("children-created")


async def test_with_both_on_one_step_the_first_pass_fails_and_the_second_pauses() -> None:
    hook = pause_hook_from_env({FAIL_ENV: "parents-terminated", FAULT_ENV: "parents-terminated"})
    assert hook is not None
    with pytest.raises(InjectedFault):
        await hook("parents-terminated")
    paused = asyncio.ensure_future(hook("parents-terminated"))
    for _ in range(20):  # loop turns, not time: a hook that did not pause would be done
        await asyncio.sleep(0)
    assert not paused.done()
    paused.cancel()


def test_the_migration_fault_point_is_unset_or_names_a_phase() -> None:
    assert migration_pause_hook_from_env({}) is None
    with pytest.raises(ValueError, match=f"{MIGRATION_FAULT_ENV}='HALFWAY'"):
        migration_pause_hook_from_env({MIGRATION_FAULT_ENV: "HALFWAY"})
    for bad in ("TERMINATING+0", "TERMINATING+", "UNRECORDED+x", "DONE+1"):
        with pytest.raises(ValueError, match="TERMINATING\\+<k>"):
            migration_pause_hook_from_env({MIGRATION_FAULT_ENV: bad})


async def test_the_migration_pauses_only_after_recording_the_named_phase() -> None:
    hook = migration_pause_hook_from_env({MIGRATION_FAULT_ENV: "TERMINATING"})
    assert hook is not None
    await hook(MigrationPhase.SEGMENTS_CREATED.value)
    paused = asyncio.ensure_future(hook(MigrationPhase.TERMINATING.value))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not paused.done()
    paused.cancel()


async def test_the_migration_pauses_inside_terminating_at_the_named_partition() -> None:
    hook = migration_pause_hook_from_env({MIGRATION_FAULT_ENV: "UNRECORDED+2"})
    assert hook is not None
    await hook("TERMINATING")
    await hook("UNRECORDED+1")
    await hook("TERMINATING+1")
    paused = asyncio.ensure_future(hook("UNRECORDED+2"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not paused.done()
    paused.cancel()
