"""Which asyncio event loop a Braid process runs.

Every Braid process runs one event loop (``docs/architecture.md``, binding decision 1): the server
roles (``standalone``, ``broker``, ``bookie``) in :func:`asyncio.Runner`, the blocking client on
its own loop thread. That loop is **uvloop** - a dependency of Braid on Linux and macOS (ADR 0078)
- or the standard library's loop where uvloop is not available (Windows) or where the operator
asks for it with ``BRAID_EVENT_LOOP=asyncio``.

``BRAID_EVENT_LOOP`` takes ``auto`` (the default: uvloop when it can be imported), ``uvloop``
(required: a process refuses to start without it) or ``asyncio``. Any other value is an
:class:`EventLoopConfigError` naming the accepted ones, raised before a loop is created.

Invariants: the choice is read once per call from the environment given (the process's own by
default), never cached, so a test can drive it; nothing here creates a loop until it is asked to.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from braid.core.errors import InvalidInputError

#: The environment variable that picks the loop.
EVENT_LOOP_ENV = "BRAID_EVENT_LOOP"
#: Its accepted values; ``auto`` is the default.
CHOICES = ("auto", "uvloop", "asyncio")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopConfigError(InvalidInputError):
    """``BRAID_EVENT_LOOP`` names an unknown loop, or ``uvloop`` is required but not installed."""


@dataclass(frozen=True)
class EventLoopChoice:
    """The loop a process will run: its name (``uvloop`` or ``asyncio``) and how to make one."""

    name: str
    factory: LoopFactory

    def new_loop(self) -> asyncio.AbstractEventLoop:
        """A new event loop of this kind (not set as the thread's current loop)."""
        return self.factory()


#: The standard library's loop.
_STANDARD = EventLoopChoice("asyncio", asyncio.new_event_loop)


def choose_event_loop(env: Mapping[str, str] | None = None) -> EventLoopChoice:
    """The loop ``BRAID_EVENT_LOOP`` in ``env`` (``os.environ`` by default) asks for.

    Raises:
        EventLoopConfigError: an unknown value, or ``uvloop`` asked for and not importable.
    """
    raw = (os.environ if env is None else env).get(EVENT_LOOP_ENV, "auto")
    wanted = raw.strip().lower() or "auto"
    if wanted not in CHOICES:
        raise EventLoopConfigError(
            f"{EVENT_LOOP_ENV}={raw!r} is not an event loop Braid knows; "
            f"use one of {', '.join(CHOICES)}"
        )
    if wanted == "asyncio":
        return _STANDARD
    try:
        import uvloop
    except ImportError as exc:
        if wanted == "uvloop":
            raise EventLoopConfigError(
                f"{EVENT_LOOP_ENV}=uvloop but uvloop cannot be imported ({exc}); install it "
                "(pip install uvloop - it is a dependency of Braid on Linux and macOS) or "
                f"unset {EVENT_LOOP_ENV}"
            ) from exc
        return _STANDARD
    return EventLoopChoice("uvloop", uvloop.new_event_loop)


__all__ = [
    "CHOICES",
    "EVENT_LOOP_ENV",
    "EventLoopChoice",
    "EventLoopConfigError",
    "LoopFactory",
    "choose_event_loop",
]
