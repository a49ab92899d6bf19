"""A fault point for crash tests of split and merge (ADR 0021).

``BRAID_FAULT_PAUSE_AT=<step>`` (one of :data:`braid.scalable.controller.STEPS`) makes every
controller of the process log ``fault point <step> reached`` and stop right after that step, so a
test can SIGKILL ``braid standalone`` at exactly that cut point. Unset (the normal case) there is
no hook at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from braid.scalable.controller import STEPS, StepHook

log = logging.getLogger(__name__)

#: The environment variable naming the step to stop after.
FAULT_ENV = "BRAID_FAULT_PAUSE_AT"


def pause_hook_from_env(environ: Mapping[str, str]) -> StepHook | None:
    """The step hook ``BRAID_FAULT_PAUSE_AT`` asks for, or ``None``.

    Raises:
        ValueError: the variable names no known step.
    """
    step = environ.get(FAULT_ENV)
    if not step:
        return None
    if step not in STEPS:
        raise ValueError(f"{FAULT_ENV}={step!r}: expected one of {', '.join(STEPS)}")

    async def hook(name: str) -> None:
        if name == step:
            log.warning("fault point %s reached; pausing until the process is killed", name)
            await asyncio.Event().wait()

    return hook


__all__ = ["FAULT_ENV", "pause_hook_from_env"]
