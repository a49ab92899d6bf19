"""Suite-wide test configuration.

Each test directory is one tier of ADR 0004; the tier marker is applied from the directory so a
tier can be run alone (``pytest -m unit``) and nothing is left unmarked.

Hypothesis runs without its wall-clock checks (per-example deadline, "too slow" data
generation): they measure the machine, not the code, and failed on a loaded 2-core machine with
inputs that pass on a quiet one. Every test still has pytest-timeout's limit.

Servers that child processes start get their ports from ``BRAID_PORT_RANGE``
(:mod:`braid.localcluster.ports`), set here to a slice of the ports below the kernel's ephemeral
range, one slice per pytest process (``make test`` runs two): a port picked by the kernel could be
taken by another process's outgoing connection before the child binds it, and the two processes
would pick from the same pool.

The root logger is put back after every test: a test that calls a CLI entry point in-process
(``braid.cli.main.main`` configures logging for a process) would otherwise leave a handler on
pytest's captured stream, which is closed by the time late finalizers log at shutdown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("braid", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("braid")

#: Ports below this are left to fixed-port services; the slices end below the ephemeral range.
_PORTS_FROM = 10_000


def _port_slice(worker: int, workers: int) -> str:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        ephemeral_low = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32_768
    width = (max(ephemeral_low, _PORTS_FROM + 2 * workers) - _PORTS_FROM) // workers
    low = _PORTS_FROM + worker * width
    return f"{low}-{low + width - 1}"


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    if worker.isdigit() and workers.isdigit():  # the suite's own setting, whatever is inherited
        os.environ["BRAID_PORT_RANGE"] = _port_slice(int(worker), max(1, int(workers)))


@pytest.fixture(autouse=True)
def _keep_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


_TIERS = ("unit", "integration", "cluster", "interop", "spark", "browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            rel = Path(str(item.fspath)).relative_to(root)
        except ValueError:
            continue
        tier = rel.parts[0] if rel.parts else ""
        if tier in _TIERS:
            item.add_marker(getattr(pytest.mark, tier))
