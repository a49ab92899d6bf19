"""Fixtures of the browser tier: one ``braid standalone`` process and one headless Chromium per
module (start-up is the slow part), and a check after every test that the page logged no error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from tests.support.browser import browser_errors, chromium_missing, open_browser


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    missing = chromium_missing()
    if missing is not None:  # skip before paying for a broker
        pytest.skip(f"browser tests need Chromium: {missing}")
    root = tmp_path_factory.mktemp("console")
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


@pytest.fixture(scope="module")
def browser(standalone: StandaloneProcess) -> Iterator[Any]:
    with open_browser() as driver:
        yield driver
        # Leave the page before the broker stops: its event stream would log the lost connection.
        driver.get("about:blank")


@pytest.fixture(autouse=True)
def _no_browser_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test ends with an empty error log in the browser (JavaScript, network, CSP)."""
    if "browser" not in request.fixturenames:
        yield
        return
    driver = request.getfixturevalue("browser")
    browser_errors(driver)  # drain what earlier tests left
    yield
    errors = browser_errors(driver)
    assert not errors, f"the browser logged errors: {errors}"
