"""Fixtures of the end-to-end acceptance runs: one real ``braid standalone`` child process per
test module (started once, shared by the module's tests, each on its own topic), the admin client
on it, and unique ``topic://`` names.

The process is stopped by its id when the module ends, whatever state a test left it in.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess

_counter = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    root: Path = tmp_path_factory.mktemp("e2e")
    process = StandaloneProcess.start_on_free_ports(root / "data", log_path=root / "standalone.log")
    try:
        yield process
    finally:
        if process.running:
            process.stop()


@pytest.fixture(scope="module")
def admin(standalone: StandaloneProcess) -> Iterator[AdminClient]:
    with AdminClient(standalone.web_url) as client:
        yield client


@pytest.fixture
def scalable_topic(request: pytest.FixtureRequest) -> str:
    """A ``topic://`` name no other test uses (not created yet)."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    return f"topic://public/default/{name}-{next(_counter)}"
