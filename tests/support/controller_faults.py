"""A controller that dies at a step of a split or merge, for roll-forward tests (ADR 0021).

:func:`kill_at` is a controller step hook that raises :class:`ControllerKilled` right after the
named step (one of ``braid.scalable.controller.STEPS``), as the broker's process dying there
would end the controller's work; the test then releases the controller and lets another take over.
"""

from __future__ import annotations

from braid.scalable.controller import StepHook


class ControllerKilled(Exception):
    """Stands for the controller's process dying at a step."""


def kill_at(step: str) -> StepHook:
    """A step hook that raises :class:`ControllerKilled` right after ``step``."""

    async def hook(name: str) -> None:
        if name == step:
            raise ControllerKilled(step)

    return hook


__all__ = ["ControllerKilled", "kill_at"]
