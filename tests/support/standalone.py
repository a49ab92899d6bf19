"""Run Braid standalone for tests: as a subprocess (the real ``braid standalone`` command) or
configured for in-process use.

The subprocess side is :class:`braid.cli.process.StandaloneProcess` (also used by ``braid demo``
and the benchmarks): free 127.0.0.1 ports chosen once and kept across restarts, readiness polled
with a deadline (admin ``/health`` and the broker port), stop by process id (SIGTERM, then SIGKILL
after a deadline), ``kill()`` for a crash, ``restart()`` on the same data dir.

Fixtures (import them explicitly into a test module)::

    from tests.support.standalone import standalone_process  # noqa: F401 - pytest fixture

``standalone_process`` yields a started process on ``tmp_path / "data"``; whatever state the test
leaves it in, the fixture stops it (and fails loudly if it cannot).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.broker.config import BrokerConfig
from braid.cli.process import StandaloneProcess, StandaloneStartError, free_port

__all__ = [
    "StandaloneProcess",
    "StandaloneStartError",
    "free_port",
    "standalone_config",
    "standalone_process",
]


def standalone_config(data_dir: Path, **overrides: object) -> BrokerConfig:
    """An in-process configuration: ephemeral 127.0.0.1 ports, ``data_dir``, defaults otherwise."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "broker_service_port": 0,
        "web_service_port": 0,
        **overrides,
    }
    return BrokerConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def standalone_process(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """A running ``braid standalone`` subprocess on ``tmp_path / "data"``."""
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()
