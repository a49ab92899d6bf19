"""The broker's GC policy (thresholds, freeze after start-up) and its GC accounting."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from braid.broker.gc_policy import PYTHON_DEFAULT_THRESHOLDS, GcPolicy, GcStats


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_thresholds_are_applied(restore_gc: None) -> None:
    GcPolicy(thresholds=(12345, 7, 9)).apply_thresholds()
    assert gc.get_threshold() == (12345, 7, 9)
    GcPolicy(thresholds=PYTHON_DEFAULT_THRESHOLDS).apply_thresholds()
    assert gc.get_threshold() == PYTHON_DEFAULT_THRESHOLDS


def test_after_startup_freezes_the_live_heap_only_when_configured(restore_gc: None) -> None:
    GcPolicy(freeze_after_startup=False).after_startup()
    assert gc.get_freeze_count() == 0
    GcPolicy(freeze_after_startup=True).after_startup()
    assert gc.get_freeze_count() > 1000  # at least the modules pytest and braid loaded


def _collect_until_counted(stats: GcStats, generation: int) -> None:
    """``gc.collect`` does nothing while another thread (one a test before this left behind)
    is inside a collection; collect again until this collection was counted, with a deadline."""
    before = stats.collections[generation]
    deadline = time.monotonic() + 10.0
    while stats.collections[generation] == before:
        assert time.monotonic() < deadline, f"no generation-{generation} collection counted"
        gc.collect(generation)


def test_stats_count_and_time_every_collection_by_generation() -> None:
    stats = GcStats()
    stats.install()
    try:
        stats.install()  # idempotent: one callback
        assert [callback == stats._on_gc for callback in gc.callbacks].count(True) == 1
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        _collect_until_counted(stats, 2)
        _collect_until_counted(stats, 0)
    finally:
        stats.uninstall()
    assert stats.collections[2] >= 1
    assert stats.collections[0] >= 1
    assert stats.seconds[2] > 0.0
    assert stats.collected >= 1
    snap = stats.snapshot()
    assert snap["collections"] == stats.collections
    assert snap["thresholds"] == list(gc.get_threshold())
    counted = list(stats.collections)
    gc.collect()
    assert stats.collections == counted  # uninstalled: no longer counted
