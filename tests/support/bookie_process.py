"""``braid bookie`` as a real child process, for the cluster tests.

:class:`BookieProcess` starts ``python -m braid.cli.main bookie`` on free 127.0.0.1 ports with
its directories under the test's tmp dir, waits until it prints that it is ready, and stops it -
SIGTERM (clean), SIGKILL (crash) - always by its own process id. ``wipe()`` deletes its
directories (a bookie "lost for good"). For a multi-host test it runs inside a network namespace
(``exec_prefix``, from :meth:`tests.support.netns.Host.exec_prefix`) on that host's ``address``,
on BookKeeper's default port (the host's address is its own).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from braid.localcluster.ports import free_port

#: The port of a bookie on a lab host of its own (BookKeeper's default; the address is private).
HOST_BOOKIE_PORT = 3181


class BookieProcess:
    """One bookie process: ``bookie_id`` stays the same across restarts (ports may not)."""

    def __init__(
        self,
        bookie_id: str,
        directory: Path,
        metadata_url: str,
        *,
        extra: dict[str, str] | None = None,
        cluster: str = "standalone",
        address: str = "127.0.0.1",
        exec_prefix: Sequence[str] = (),
    ) -> None:
        self.bookie_id = bookie_id
        self.address = address
        self.exec_prefix = list(exec_prefix)
        self.directory = directory
        self.metadata_url = metadata_url
        self.cluster = cluster
        self.extra = dict(extra or {})
        self.port = 0
        self.http_port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    def _conf(self) -> Path:
        conf = self.directory.parent / f"{self.bookie_id}.conf"
        lines = {
            "bookieId": self.bookie_id,
            "advertisedAddress": self.address,
            "bookiePort": str(self.port),
            "httpServerPort": str(self.http_port),
            "journalDirectories": str(self.directory),
            "ledgerDirectories": str(self.directory),
            "metadataServiceUri": self.metadata_url,
            "storageClusterName": self.cluster,
            **self.extra,
        }
        conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return conf

    def start(self, *, new_port: bool = True, format_: bool = False, wait: bool = True) -> None:
        if self.exec_prefix:
            self.port, self.http_port = HOST_BOOKIE_PORT, HOST_BOOKIE_PORT + 1
        elif new_port or not self.port:
            self.port = free_port()
            self.http_port = free_port()
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2] / "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        command = [
            *self.exec_prefix,
            sys.executable,
            "-m",
            "braid.cli.main",
            "bookie",
            "--config",
            str(self._conf()),
        ]
        if format_:
            command.append("--format")
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()  # the previous run's pipe
        self.output = []
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        if wait:
            self.wait_ready()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.output.append(line.rstrip())

    def wait_ready(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while not any(" ready on " in line for line in self.output):
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"bookie {self.bookie_id} exited:\n" + self.log_tail())
            if time.monotonic() > deadline:
                raise AssertionError(f"bookie {self.bookie_id} not ready:\n" + self.log_tail())
            time.sleep(0.05)

    def wait_exit(self, within: float = 30.0) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=within)
        if self._reader is not None:
            self._reader.join(timeout=5)
        return code

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.output[-lines:])

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def wipe(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def stop(self) -> None:
        """Whatever state it is in: gone afterwards (for fixtures' cleanup)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
