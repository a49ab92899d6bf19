"""A slow disk under one cursor, deterministically: its store writes wait until released.

Used to open the window between an acknowledgement counted in a cursor's memory and its write
landing, where a crash would take the acknowledgement back (``state_written`` is false there).
"""

from __future__ import annotations

import asyncio
from typing import Any


class HeldWrites:
    """Holds a cursor's store writes until :meth:`release` (a slow disk, deterministically);
    ``writing``: a write is held, ``awaited``: somebody waits for the state to be written. The
    first ``failures`` writes released fail (a store that refused them)."""

    def __init__(self, cursor: Any, *, failures: int = 0) -> None:
        self._gate = asyncio.Event()
        self.writing = False
        self.awaited = False
        self.failures = failures
        store = cursor._store
        write, write_state = store.write, cursor.write_state

        async def held(info: Any) -> None:
            self.writing = True
            await self._gate.wait()
            if self.failures:
                self.failures -= 1
                raise OSError("the store refused the write")
            await write(info)

        async def awaited() -> None:
            self.awaited = True
            await write_state()

        store.write = held
        cursor.write_state = awaited

    def release(self) -> None:
        self._gate.set()
