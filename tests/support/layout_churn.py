"""Splits and merges of a scalable topic kept in flight while a cluster is being hurt.

:class:`LayoutChurn` runs :class:`tests.integration.e2e.workload.LayoutDriver` on a thread: one
split or merge each time ``progress()`` (a load's acknowledged count) has grown by ``every``, so
the layout changes while messages flow and the pace follows the load, never a timer. Each
operation goes through the admin API of the next broker ``web_urls()`` names (rotating): a
broker that is down, cut off or losing the controller's leadership fails that one operation,
which is recorded (with the broker and the error) and the next goes elsewhere. Failed
operations are expected under faults; the counts of done and failed ones are the report.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from braid.admin import AdminClient
from tests.integration.e2e.workload import LayoutDriver


class LayoutChurn:
    """One split or merge per ``every`` units of ``progress()``, until :meth:`stop`."""

    def __init__(
        self,
        topic: str,
        web_urls: Callable[[], list[str]],
        progress: Callable[[], int],
        *,
        every: int = 150,
        min_active: int = 3,
        max_active: int = 6,
        timeout: float = 30.0,
    ) -> None:
        self.topic = topic
        self._web_urls = web_urls
        self._progress = progress
        self.every = every
        self.timeout = timeout
        self.driver = LayoutDriver(
            None,  # type: ignore[arg-type]  # set to a live broker's client per operation
            topic,
            min_active=min_active,
            max_active=max_active,
        )
        #: ``(broker web URL, error)`` of each operation that failed.
        self.failed: list[tuple[str, str]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="layout-churn", daemon=True)
        self._turn = 0

    @property
    def done(self) -> list[str]:
        return self.driver.done

    def start(self) -> LayoutChurn:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            mark = self._progress()
            while not self._stop.is_set():
                if self._progress() < mark + self.every:
                    self._stop.wait(0.05)  # polling the load's progress, not a wait for time
                    continue
                mark = self._progress()
                self._step()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _step(self) -> None:
        urls = self._web_urls()
        if not urls:
            return
        url = urls[self._turn % len(urls)]
        self._turn += 1
        try:
            with AdminClient(url, timeout=self.timeout) as admin:
                self.driver.admin = admin
                self.driver.step()
        except Exception as exc:  # a broker killed or cut off under the call
            self.failed.append((url, f"{type(exc).__name__}: {exc}"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout * 2 + 30)
        assert not self._thread.is_alive(), "the layout churn did not stop"
        assert self.error is None, f"the layout churn failed: {self.error!r}"

    def line(self) -> str:
        splits = sum(op.startswith("split") for op in self.done)
        return (
            f"layout churn on {self.topic}: {splits} splits and {len(self.done) - splits} merges "
            f"done, {len(self.failed)} failed under faults"
        )


__all__ = ["LayoutChurn"]
