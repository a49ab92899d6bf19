"""``braid demo`` (what ``make demo`` runs) works end to end: it starts a standalone broker,
produces and consumes with the official client across a broker restart, and cleans up."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_the_whole_scenario_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "braid.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for step in range(1, 8):
        assert f"[{step}/7]" in out
    assert out.count("sent     key=") == 6
    # Three acknowledged before the restart, the three others redelivered after it.
    assert out.count("NOT acked") == 3
    assert "the subscription's cursor survived" in out
    assert "backlog 0" in out
    assert "broker stopped (exit code 0)" in out
    assert "Traceback" not in out + done.stderr
