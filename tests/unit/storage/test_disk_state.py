"""A bookie's disk state: read-only at the threshold or on ENOSPC, back below the low-water mark."""

from __future__ import annotations

import errno

import pytest

from braid.storage.bookie.disk import (
    DiskState,
    DiskThresholds,
    DiskUsage,
    InvalidDiskThresholds,
    is_no_space,
)

GB = 1024**3


def _used(fraction: float) -> DiskUsage:
    return DiskUsage(total_bytes=100 * GB, free_bytes=round((1 - fraction) * 100 * GB))


def test_read_only_at_the_threshold_and_writable_only_below_the_low_water_mark() -> None:
    state = DiskState(DiskThresholds(usage_threshold=0.95, lwm_threshold=0.90))
    assert not state.observe(_used(0.94)) and not state.read_only
    assert state.observe(_used(0.95)) and state.read_only
    assert state.reason == (
        "disk usage 95.0% is at or above diskUsageThreshold 95% (5368709120 bytes free)"
    )
    # Between the two marks nothing changes, whichever way usage moves.
    assert not state.observe(_used(0.92)) and state.read_only
    assert not state.observe(_used(0.90)) and state.read_only
    assert state.observe(_used(0.899)) and not state.read_only
    assert state.reason is None
    assert not state.observe(_used(0.93)) and not state.read_only


def test_a_write_without_space_makes_it_read_only_at_once_until_a_check_finds_room() -> None:
    state = DiskState(DiskThresholds())
    full = OSError(errno.ENOSPC, "No space left on device")
    assert state.write_failed(full)
    assert not state.write_failed(full)  # already read-only: no change to report
    assert state.reason == "no space left on device (No space left on device)"
    assert not state.observe(_used(0.93))
    assert state.observe(_used(0.5)) and not state.read_only


def test_status_reports_state_reason_and_usage() -> None:
    state = DiskState(DiskThresholds(0.8, 0.7, 5.0))
    assert state.status()["state"] == "read-write"
    assert state.status()["diskUsage"] is None
    state.observe(_used(0.85))
    status = state.status()
    assert status["state"] == "read-only"
    assert status["diskUsage"] == 0.85
    assert status["freeBytes"] == 15 * GB
    assert (status["diskUsageThreshold"], status["diskUsageLwmThreshold"]) == (0.8, 0.7)


def test_an_empty_file_system_counts_as_full() -> None:
    assert DiskUsage(0, 0).used_fraction == 1.0


@pytest.mark.parametrize(
    ("usage", "lwm", "interval"),
    [(0.0, 0.0, 1.0), (1.1, 0.9, 1.0), (0.9, 0.95, 1.0), (0.95, 0.0, 1.0), (0.95, 0.9, 0.0)],
)
def test_thresholds_out_of_range_or_inverted_are_refused(
    usage: float, lwm: float, interval: float
) -> None:
    with pytest.raises(InvalidDiskThresholds):
        DiskThresholds(usage, lwm, interval)


def test_only_space_errors_count_as_no_space() -> None:
    assert is_no_space(OSError(errno.ENOSPC, "full"))
    assert is_no_space(OSError(errno.EDQUOT, "quota"))
    assert not is_no_space(OSError(errno.EIO, "io"))
    assert not is_no_space(ValueError("x"))
