"""Suite-wide test configuration.

Each test directory is one tier of ADR 0004; the tier marker is applied from the directory so a
tier can be run alone (``pytest -m unit``) and nothing is left unmarked.

Hypothesis runs without its wall-clock checks (per-example deadline, "too slow" data
generation): they measure the machine, not the code, and failed on a loaded 2-core machine with
inputs that pass on a quiet one. Every test still has pytest-timeout's limit.

The root logger is put back after every test: a test that calls a CLI entry point in-process
(``braid.cli.main.main`` configures logging for a process) would otherwise leave a handler on
pytest's captured stream, which is closed by the time late finalizers log at shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("braid", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("braid")


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
