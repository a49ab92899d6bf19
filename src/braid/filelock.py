"""Exclusive file locks (``flock``) that the kernel drops when their holder dies.

Braid uses one kind of lock for three owners: the standalone data directory (``braid.lock``), each
bookie's data directory (``LOCK``: two engines on one journal would corrupt each other) and each
SQLite metadata session (its lock file says the session is alive; others probe it with
:func:`is_locked` to reap dead sessions). ``flock`` is released by the kernel when the process
exits, however it exits, so a SIGKILLed process never leaves a directory stuck. Locks are
per open file: a second :class:`FileLock` on the same path in the *same* process is refused too.

Top level beside :mod:`braid.clock` (ADR 0003): an I/O helper every I/O layer may use; never
imported by the pure ``core`` and ``protocol`` packages.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from braid.core.errors import IllegalStateError

__all__ = ["DataDirInUse", "FileLock", "is_locked"]


class DataDirInUse(IllegalStateError):
    """Another owner (another process, or another open lock in this one) holds the lock."""


class FileLock:
    """An exclusive, non-blocking ``flock`` on ``path``, held from :meth:`acquire` to
    :meth:`release` (blocking calls: run them off the event loop)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, in_use_message: str, *, content: str | None = None) -> None:
        """Take the lock, creating the file and its directory if needed.

        Args:
            in_use_message: the :class:`DataDirInUse` message when someone else holds it.
            content: written into the file once locked (a pid, for a human looking at it).

        Raises:
            DataDirInUse: the lock is held elsewhere.
        """
        if self._fd is not None:
            raise IllegalStateError(f"{self.path} is already locked by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirInUse(in_use_message) from None
        if content is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, content.encode(), 0)
        self._fd = fd

    def release(self, *, unlink: bool = False) -> None:
        """Drop the lock (idempotent); ``unlink`` also removes the file, first, so nobody can
        lock a file that is about to disappear."""
        if self._fd is None:
            return
        if unlink:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        os.close(self._fd)  # closing the only descriptor drops the flock
        self._fd = None


def is_locked(path: Path) -> bool:
    """Whether someone holds ``path``'s lock right now (``False`` if the file does not exist).

    A probe: it takes the lock for an instant when it is free, so it must not be used on a file
    its caller may lock itself at the same time.
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock, if it got one
    return False
