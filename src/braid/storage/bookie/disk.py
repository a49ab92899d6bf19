"""A bookie's disk-full state: read-only while the disk is (nearly) full, read-write again when
space comes back - BookKeeper's model and its configuration names.

A bookie turns *read-only* when its data directory's file system is used above
``diskUsageThreshold`` (checked every ``diskCheckInterval``), or at once when a journal or entry
file write fails with ``ENOSPC``/``EDQUOT``. A read-only bookie refuses new entries up front, with
:class:`~braid.storage.api.StorageReadOnly` naming the reason - nothing is half-written, no ledger
is broken by the refusal - and keeps serving reads of everything it acknowledged; small control
records (fences, deletes) still go through, since a new owner must be able to fence a ledger to
read it, and deletes give space back. It turns read-write again by itself once a check finds usage
below ``diskUsageLwmThreshold`` (the low-water mark keeps it from flapping at the threshold).

:class:`DiskState` is the decision, pure (usages and failures in, state out); the bookie owns one,
feeds it, and reports its :meth:`~DiskState.status` to health checks. Usage counts the space this
process may use (``statvfs``'s ``f_bavail``: blocks reserved for root are not counted as free).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from braid.core.errors import InvalidInputError

#: The ``errno`` values that mean "no space" (a full file system, or a quota).
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for want of space."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


class InvalidDiskThresholds(InvalidInputError):
    """Disk thresholds out of range or inconsistent."""


@dataclass(frozen=True, slots=True)
class DiskThresholds:
    """BookKeeper's disk settings.

    Attributes:
        usage_threshold: ``diskUsageThreshold``: read-only at or above this used fraction.
        lwm_threshold: ``diskUsageLwmThreshold``: read-write again below this used fraction.
        check_interval_s: ``diskCheckInterval`` (in seconds here; milliseconds in the file).
    """

    usage_threshold: float = 0.95
    lwm_threshold: float = 0.90
    check_interval_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0.0 < self.usage_threshold <= 1.0:
            raise InvalidDiskThresholds(
                f"diskUsageThreshold must be in (0, 1], got {self.usage_threshold}"
            )
        if not 0.0 < self.lwm_threshold <= self.usage_threshold:
            raise InvalidDiskThresholds(
                f"diskUsageLwmThreshold must be in (0, diskUsageThreshold], got "
                f"{self.lwm_threshold} with diskUsageThreshold {self.usage_threshold}"
            )
        if self.check_interval_s <= 0:
            raise InvalidDiskThresholds(
                f"diskCheckInterval must be positive, got {self.check_interval_s}"
            )


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """Space of a file system as this process sees it."""

    total_bytes: int
    free_bytes: int

    @property
    def used_fraction(self) -> float:
        if self.total_bytes <= 0:
            return 1.0
        return 1.0 - self.free_bytes / self.total_bytes


def read_disk_usage(path: Path) -> DiskUsage:
    """The usage of the file system holding ``path`` (blocking, but a single ``statvfs``).

    Raises:
        OSError: the path cannot be examined.
    """
    st = os.statvfs(path)
    return DiskUsage(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


class DiskState:
    """Read-write or read-only, and why."""

    def __init__(self, thresholds: DiskThresholds) -> None:
        self.thresholds = thresholds
        self.read_only = False
        self.reason: str | None = None
        self.last_usage: DiskUsage | None = None

    def observe(self, usage: DiskUsage) -> bool:
        """A periodic check's reading; returns whether the state changed."""
        self.last_usage = usage
        used = usage.used_fraction
        if not self.read_only and used >= self.thresholds.usage_threshold:
            self.read_only = True
            self.reason = (
                f"disk usage {used:.1%} is at or above diskUsageThreshold "
                f"{self.thresholds.usage_threshold:.0%} ({usage.free_bytes} bytes free)"
            )
            return True
        if self.read_only and used < self.thresholds.lwm_threshold:
            self.read_only = False
            self.reason = None
            return True
        return False

    def write_failed(self, exc: OSError) -> bool:
        """A write failed for want of space; returns whether the state changed."""
        changed = not self.read_only
        self.read_only = True
        self.reason = f"no space left on device ({exc.strerror or exc})"
        return changed

    def status(self) -> dict[str, object]:
        """For health checks and stats."""
        usage = self.last_usage
        return {
            "state": "read-only" if self.read_only else "read-write",
            "reason": self.reason,
            "diskUsage": None if usage is None else round(usage.used_fraction, 4),
            "freeBytes": None if usage is None else usage.free_bytes,
            "totalBytes": None if usage is None else usage.total_bytes,
            "diskUsageThreshold": self.thresholds.usage_threshold,
            "diskUsageLwmThreshold": self.thresholds.lwm_threshold,
        }


__all__ = [
    "NO_SPACE_ERRNOS",
    "DiskState",
    "DiskThresholds",
    "DiskUsage",
    "InvalidDiskThresholds",
    "is_no_space",
    "read_disk_usage",
]
