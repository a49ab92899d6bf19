"""``braid demo`` (what ``make demo`` runs) works end to end: it starts a standalone broker, tells
the scalable-topic story with the Braid client (splits and merges while producing and consuming,
a broker crash, the per-key order and loss check), has the official client read a classic topic,
and cleans up."""

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
    for step in range(1, 11):
        assert f"[{step}/10]" in out
    assert out.count("at its midpoint  -> epoch") == 2 and "merge segments 6, 4 and 5" in out
    assert "reconnected by themselves" in out
    assert "missing: 0   out of order (per customer): 0" in out
    assert "OK: every acknowledged order was billed, in order for every customer" in out
    assert out.count("pulsar-client received key=") == 6
    assert "backlog 0" in out
    assert "broker stopped (exit code 0)" in out
    assert "Traceback" not in out + done.stderr
