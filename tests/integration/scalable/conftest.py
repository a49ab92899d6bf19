"""Fixtures: a broker with scalable topics in the test's event loop (real storage, sqlite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from tests.support.scalable_stack import ScalableStack, open_scalable_stack


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ScalableStack]:
    s = await open_scalable_stack(tmp_path / "broker")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def manual_stack(tmp_path: Path, manual_clock: ManualClock) -> AsyncIterator[ScalableStack]:
    """Grace periods and GC ticks on a manual clock; storage on real time."""
    s = await open_scalable_stack(tmp_path / "broker", scalable_clock=manual_clock)
    try:
        yield s
    finally:
        await s.close()
