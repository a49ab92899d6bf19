"""A small, real file system for disk-full tests: an ext4 image loop-mounted in the test's tmp dir.

Mounting needs root (CI runs as root); elsewhere, or where the kernel refuses a loop mount (some
containers), the test is skipped with a message saying why. The mount is undone in a ``finally``,
by its mount point (``umount <dir>``), never by looking for processes: the test stops whatever it
started on the file system first.

:class:`Ballast` fills the file system with a file of zeros (written, so the blocks really are
taken) and gives space back by truncating it, so a test can make the disk full, nearly full, or
roomy again while a broker runs on it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

_CHUNK = 256 * 1024


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@contextlib.contextmanager
def small_filesystem(where: Path, size_mb: int) -> Iterator[Path]:
    """Create, mount and yield an ext4 file system of ``size_mb`` MB (no blocks reserved for
    root, so "full" means full for the broker too); unmount and delete it afterwards.

    Skips the test when not root, or when the tools or the loop mount are unavailable.
    """
    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small loop file system, which needs root")
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            pytest.skip(f"disk-full tests need {tool}, which is not installed")
    image = where / "small-fs.img"
    mount_point = where / "small-fs"
    mount_point.mkdir(parents=True)
    with image.open("wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", str(image))
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 image: {made.stderr.strip()}")
    mounted = _run("mount", "-o", "loop", str(image), str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount a file system here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        unmounted = _run("umount", str(mount_point))
        if unmounted.returncode != 0:
            # Still busy (a straggler of the test): detach it lazily rather than leak the mount.
            _run("umount", "-l", str(mount_point))
        with contextlib.suppress(OSError):
            image.unlink()


def free_bytes(path: Path) -> int:
    """Bytes available to this process on the file system of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def total_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


class Ballast:
    """A file that takes the space a test wants taken."""

    def __init__(self, directory: Path, name: str = "ballast") -> None:
        self.path = directory / name

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def fill(self, leave_free: int = 0) -> int:
        """Grow until at most ``leave_free`` bytes are free (or the disk is full); returns the
        bytes free afterwards."""
        zeros = bytes(_CHUNK)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while True:
                room = free_bytes(self.path.parent) - leave_free
                if room <= 0:
                    break
                try:
                    if os.write(fd, zeros[: min(_CHUNK, room)]) <= 0:
                        break
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            with contextlib.suppress(OSError):
                os.fsync(fd)
        finally:
            os.close(fd)
        return free_bytes(self.path.parent)

    def release(self, nbytes: int | None = None) -> int:
        """Give back ``nbytes`` (all by default); returns the bytes free afterwards."""
        keep = 0 if nbytes is None else max(0, self.size - nbytes)
        with self.path.open("r+b") as f:
            f.truncate(keep)
            os.fsync(f.fileno())
        return free_bytes(self.path.parent)
