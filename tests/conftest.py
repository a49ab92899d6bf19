"""Suite-wide test configuration.

Each test directory is one tier of ADR 0004; the tier marker is applied from the directory so a
tier can be run alone (``pytest -m unit``) and nothing is left unmarked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
