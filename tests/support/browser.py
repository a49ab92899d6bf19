"""A real headless Chromium for the console's browser tests (Debian's ``chromium`` and
``chromium-driver``, driven with Selenium).

:func:`open_browser` starts one Chromium with the flags this machine needs (no sandbox as root,
no GPU, none of Chromium's background connections: the machine has no internet) and a fresh
profile directory, and keeps the browser's console log. Tests skip with a clear message only when
Chromium or its driver is not installed (``make system-deps`` installs both, as CI does).

:func:`wait_js` polls a JavaScript expression with a deadline instead of sleeping;
:func:`browser_errors` returns the SEVERE entries of the browser log since the last call;
:func:`screenshot` writes ``build/console-screenshots/NAME.png`` (git-ignored) for a person to look
at after the run.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "console-screenshots"

#: Without these Chromium tries to reach the internet (updates, sync, field trials) and logs
#: failures; --no-sandbox because tests run as root.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if shutil.which(path) is None:
            return f"{path} not found: install Debian's {package} (make system-deps does)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install -e '.[dev]')"
    return None


@contextmanager
def open_browser() -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile; quit and removed afterwards."""
    missing = chromium_missing()
    if missing is not None:
        pytest.skip(f"browser tests need Chromium: {missing}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="braid-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_js(driver: Any, expression: str, *, within: float = 10.0, message: str = "") -> Any:
    """Poll ``return (expression)`` in the page until it is truthy; returns its value."""
    seen: list[Any] = [None]

    def truthy() -> bool:
        seen[0] = driver.execute_script(f"return ({expression});")
        return bool(seen[0])

    wait_for(truthy, within=within, message=message or expression)
    return seen[0]


def browser_errors(driver: Any) -> list[dict[str, Any]]:
    """The browser log's SEVERE entries since the previous call (the log is drained)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def screenshot(driver: Any, name: str) -> Path:
    """Save the page as ``build/console-screenshots/{name}.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


__all__ = [
    "CHROMIUM_FLAGS",
    "SCREENSHOTS",
    "browser_errors",
    "chromium_missing",
    "open_browser",
    "screenshot",
    "wait_js",
]
