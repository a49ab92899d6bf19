"""Fault points for crash tests of split and merge (ADR 0021, ADR 0040).

``BRAID_FAULT_PAUSE_AT=<step>`` (one of :data:`braid.scalable.controller.STEPS`) makes every
controller of the process log ``fault point <step> reached`` and stop right after that step, so a
test can SIGKILL ``braid standalone`` at exactly that cut point.

``BRAID_FAULT_FAIL_AT=<step>`` makes the first pass through that step fail (a retriable
:class:`InjectedFault`, as a store or a broker that does not answer would), so a test can watch
the leader recover the failed operation by itself. With both set to the same step, the first pass
fails and the next one - the recovery's - pauses there.

``BRAID_MIGRATION_FAULT_PAUSE_AT=<point>`` does the same for a migration to a scalable topic
(ADR 0063): the executor logs ``migration fault point <point> reached`` and stops there. A point
is a :class:`braid.core.migration.MigrationPhase` (right after recording it), ``TERMINATING+<k>``
(right after recording the ``k``-th partition's termination: some partitions terminated, the
others not) or ``UNRECORDED+<k>`` (right after the ``k``-th partition was terminated, before the
record says so).

Unset (the normal case) there is no hook at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from braid.core.errors import ServiceUnavailableError
from braid.core.migration import MigrationPhase
from braid.scalable.controller import STEPS, StepHook

log = logging.getLogger(__name__)

#: The environment variable naming the step to stop after.
FAULT_ENV = "BRAID_FAULT_PAUSE_AT"
#: The environment variable naming the step whose first pass fails.
FAIL_ENV = "BRAID_FAULT_FAIL_AT"
#: The environment variable naming the migration phase to stop after.
MIGRATION_FAULT_ENV = "BRAID_MIGRATION_FAULT_PAUSE_AT"

#: What the migration executor calls at every fault point (a phase recorded, ``TERMINATING+k``,
#: ``UNRECORDED+k``).
PhaseHook = Callable[[str], Awaitable[None]]

#: The fault points inside ``TERMINATING``, each followed by ``+<k>`` (k >= 1).
_COUNTED_POINTS = ("TERMINATING", "UNRECORDED")


class InjectedFault(ServiceUnavailableError):
    """The failure :data:`FAIL_ENV` injects."""


def _step(environ: Mapping[str, str], variable: str) -> str | None:
    step = environ.get(variable)
    if not step:
        return None
    if step not in STEPS:
        raise ValueError(f"{variable}={step!r}: expected one of {', '.join(STEPS)}")
    return step


def pause_hook_from_env(environ: Mapping[str, str]) -> StepHook | None:
    """The step hook ``BRAID_FAULT_PAUSE_AT`` and ``BRAID_FAULT_FAIL_AT`` ask for, or ``None``.

    Raises:
        ValueError: a variable names no known step.
    """
    pause_at = _step(environ, FAULT_ENV)
    fail_at = _step(environ, FAIL_ENV)
    if pause_at is None and fail_at is None:
        return None
    failed = False

    async def hook(name: str) -> None:
        nonlocal failed
        if name == fail_at and not failed:
            failed = True
            log.warning("fault point %s reached; failing this step once", name)
            raise InjectedFault(f"fault injected at step {name}")
        if name == pause_at:
            log.warning("fault point %s reached; pausing until the process is killed", name)
            await asyncio.Event().wait()

    return hook


def migration_pause_hook_from_env(environ: Mapping[str, str]) -> PhaseHook | None:
    """The hook ``BRAID_MIGRATION_FAULT_PAUSE_AT`` asks for, or ``None``.

    Raises:
        ValueError: the variable names no fault point.
    """
    value = environ.get(MIGRATION_FAULT_ENV)
    if not value:
        return None
    if not _is_migration_point(value):
        phases = ", ".join(p.value for p in MigrationPhase)
        raise ValueError(
            f"{MIGRATION_FAULT_ENV}={value!r}: expected one of {phases}, TERMINATING+<k> or "
            "UNRECORDED+<k>"
        )

    async def hook(point: str) -> None:
        if point == value:
            log.warning("migration fault point %s reached; pausing until killed", point)
            await asyncio.Event().wait()

    return hook


def _is_migration_point(value: str) -> bool:
    if value in {p.value for p in MigrationPhase}:
        return True
    name, plus, count = value.partition("+")
    return name in _COUNTED_POINTS and plus == "+" and count.isdigit() and int(count) >= 1


__all__ = [
    "FAIL_ENV",
    "FAULT_ENV",
    "MIGRATION_FAULT_ENV",
    "InjectedFault",
    "PhaseHook",
    "migration_pause_hook_from_env",
    "pause_hook_from_env",
]
