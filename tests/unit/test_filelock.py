"""The one file-lock helper: exclusive, refused while held (even in the same process), visible to
a probe, and gone when released."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.core.errors import IllegalStateError
from braid.filelock import DataDirInUse, FileLock, is_locked


def test_a_held_lock_refuses_a_second_owner_with_data_dir_in_use(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "LOCK"
    first = FileLock(path)
    first.acquire("first", content="123\n")
    assert path.read_text() == "123\n"
    assert is_locked(path)
    with pytest.raises(DataDirInUse, match="taken"):
        FileLock(path).acquire("taken")
    assert isinstance(DataDirInUse("x"), IllegalStateError)
    first.release()
    assert not is_locked(path)
    second = FileLock(path)
    second.acquire("second")
    assert second.held
    second.release()
    second.release()  # idempotent
    assert not second.held


def test_release_with_unlink_removes_the_file_and_probes_see_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "session.lock"
    lock = FileLock(path)
    lock.acquire("in use")
    lock.release(unlink=True)
    assert not path.exists()
    assert not is_locked(path)


def test_one_object_cannot_take_its_lock_twice(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "LOCK")
    lock.acquire("in use")
    with pytest.raises(IllegalStateError):
        lock.acquire("in use")
    lock.release()
