"""The broker's GC policy (thresholds, freeze after start-up) and its GC accounting."""

from __future__ import annotations

import gc
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


def test_stats_count_and_time_every_collection_by_generation() -> None:
    stats = GcStats()
    stats.install()
    try:
        stats.install()  # idempotent: one callback
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        gc.collect()
        gc.collect(0)
    finally:
        stats.uninstall()
    assert stats.collections[2] == 1
    assert stats.collections[0] >= 1
    assert stats.seconds[2] > 0.0
    assert stats.collected >= 1
    snap = stats.snapshot()
    assert snap["collections"] == stats.collections
    assert snap["thresholds"] == list(gc.get_threshold())
    gc.collect()
    assert stats.collections[2] == 1  # uninstalled: no longer counted
