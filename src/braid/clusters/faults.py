"""A test-only fault point for crash tests of a storage-cluster switch (docs/storage-switching.md).

``BRAID_SWITCH_FAULT_PAUSE_AT=<STEP>[:<n>]`` (``<STEP>`` one of
:class:`braid.core.storage_switch.StepKind`, ``<n>`` >= 1, default 1) makes the switch
orchestrator of ``braid standalone`` log ``switch fault point <STEP>:<n> reached`` and stop just
before it executes the ``n``-th step of that kind, so a test can SIGKILL the process at exactly
that cut point. ``BUILD:3`` with ``bookieClusterSwitchConcurrency=2``, for instance, stops after
two BUILD batches copied four ledgers and their state was persisted. It exists for tests only;
unset (the normal case) there is no hook at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from braid.clusters.orchestrator import StepHook
from braid.core.storage_switch import Step, StepKind

log = logging.getLogger(__name__)

#: The environment variable naming the step to stop before.
SWITCH_FAULT_ENV = "BRAID_SWITCH_FAULT_PAUSE_AT"


def switch_pause_hook_from_env(environ: Mapping[str, str]) -> StepHook | None:
    """The step hook ``BRAID_SWITCH_FAULT_PAUSE_AT`` asks for, or ``None``.

    Raises:
        ValueError: the variable names no step kind, or its count is not a positive integer.
    """
    spec = environ.get(SWITCH_FAULT_ENV)
    if not spec:
        return None
    name, _, count_text = spec.partition(":")
    kinds = {k.value: k for k in StepKind}
    if name not in kinds:
        raise ValueError(f"{SWITCH_FAULT_ENV}={spec!r}: expected one of {', '.join(kinds)}")
    try:
        count = int(count_text) if count_text else 1
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{SWITCH_FAULT_ENV}={spec!r}: the count after ':' must be >= 1")
    kind = kinds[name]
    seen = 0

    async def hook(step: Step) -> None:
        nonlocal seen
        if step.kind is not kind:
            return
        seen += 1
        if seen == count:
            log.warning(
                "switch fault point %s:%d reached; pausing until the process is killed",
                name,
                count,
            )
            await asyncio.Event().wait()

    return hook


__all__ = ["SWITCH_FAULT_ENV", "switch_pause_hook_from_env"]
