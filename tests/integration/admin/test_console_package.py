"""The wheel ships the console: every file of ``braid/admin/console/static`` is in the built
wheel (package data), so ``pip install`` then ``braid standalone`` serves ``/console`` offline."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "src" / "braid" / "admin" / "console" / "static"


def test_the_wheel_holds_every_console_file(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = (tmp_path / "dist").glob("braid-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"braid/admin/console/static/{p.name}" for p in STATIC.iterdir() if p.is_file()}
    assert {"braid/admin/console/static/index.html"} <= expected
    assert expected <= shipped, sorted(expected - shipped)
