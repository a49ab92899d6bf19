"""``braid demo`` (what ``make demo`` runs) works end to end: it starts a standalone broker, tells
the scalable-topic story with the Braid client (splits and merges while producing and consuming,
a broker crash, the per-key order and loss check), has the official client read a classic topic,
ends with the console URL of the topic it built, and cleans up. Run with ``--keep`` here: the
broker stays up at the end, its console page answers, and Ctrl+C (SIGINT) stops it cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading

import httpx
import pytest


def test_demo_runs_the_whole_scenario_and_keeps_the_broker_for_the_console() -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "braid.cli.main", "demo", "--keep"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    kept = threading.Event()

    def read() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if "press Ctrl+C to stop" in line:
                kept.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert kept.wait(90), "".join(lines)
        out = "".join(lines)
        url = re.search(r"the console shows topic://demo/orders/events live: (\S+)", out)
        assert url is not None, out
        page = httpx.get(url.group(1), timeout=10)
        assert page.status_code == 200 and "Braid console" in page.text
        base = url.group(1).split("/console/")[0]
        topic = httpx.get(f"{base}/admin/v2/scalable/demo/orders/events", timeout=10)
        assert topic.status_code == 200 and topic.json()["epoch"] >= 3
        demo.send_signal(signal.SIGINT)
        try:
            # The demo stops its broker with SIGTERM and waits up to 20 s before a SIGKILL.
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the demo did not exit after Ctrl+C; its output:\n" + "".join(lines))
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    reader.join(10)  # the pipe is at its end once the process has exited
    out = "".join(lines)
    assert demo.returncode == 0, out
    for step in range(1, 11):
        assert f"[{step}/10]" in out
    assert out.count("at its midpoint  -> epoch") == 2 and "merge segments 6, 4 and 5" in out
    assert "reconnected by themselves" in out
    assert "missing: 0   out of order (per customer): 0" in out
    assert "OK: every acknowledged order was billed, in order for every customer" in out
    assert out.count("pulsar-client received key=") == 6
    assert "backlog 0" in out
    assert "broker stopped (exit code 0)" in out
    assert "Traceback" not in out
