"""``braid standalone`` on the event loop ``BRAID_EVENT_LOOP`` picks (ADR 0078).

By default the process runs uvloop: its start-up log says so and its address space maps uvloop's
extension. ``BRAID_EVENT_LOOP=asyncio`` runs the standard loop and serves the official client the
same way; an unknown value stops start-up with one line naming the accepted values.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from braid.cli.process import StandaloneProcess
from tests.support.standalone import produce, read_all, run_standalone_to_exit


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text(encoding="utf-8")


@pytest.mark.parametrize(("value", "loop"), [(None, "uvloop"), ("asyncio", "asyncio")])
def test_standalone_runs_on_the_chosen_loop(tmp_path: Path, value: str | None, loop: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BRAID_EVENT_LOOP"}
    if value is not None:
        env["BRAID_EVENT_LOOP"] = value
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", env=env, log_path=tmp_path / "standalone.log"
    )
    try:
        assert process.pid is not None
        uses_uvloop = "/uvloop/" in _maps(process.pid)
        assert uses_uvloop == (loop == "uvloop")
        topic = f"persistent://public/default/on-{loop}"
        produce(process, topic, ["hello", "world"])
        assert read_all(process, topic) == ["hello", "world"]
        assert f"standalone running on the {loop} event loop" in process.output()
    finally:
        assert process.stop() == 0


def test_an_unknown_event_loop_stops_start_up_with_one_line(tmp_path: Path) -> None:
    result = run_standalone_to_exit(tmp_path / "data", {**os.environ, "BRAID_EVENT_LOOP": "tokio"})
    assert result.returncode == 1, result.stderr
    assert (
        "braid standalone: error: BRAID_EVENT_LOOP='tokio' is not an event loop Braid knows; "
        "use one of auto, uvloop, asyncio"
    ) in result.stderr
    assert "Traceback" not in result.stderr
