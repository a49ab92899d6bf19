"""Suite-wide test configuration.

Each test directory is one tier of ADR 0004; the tier marker is applied from the directory so a
tier can be run alone (``pytest -m unit``) and nothing is left unmarked.

Hypothesis runs without its wall-clock checks (per-example deadline, "too slow" data
generation): they measure the machine, not the code, and failed on a loaded 2-core machine with
inputs that pass on a quiet one. Every test still has pytest-timeout's limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("braid", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("braid")

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
