"""A real ZooKeeper for tests and benchmarks, from Debian's ``zookeeper`` package.

:class:`ZooKeeperServer` runs ``ZooKeeperServerMain`` on a free 127.0.0.1 port with its data in a
temporary directory, waits for ``ruok`` to answer ``imok`` (with a deadline), and stops the process
by id (SIGTERM, then SIGKILL). Tests can also:

* expire a client's session (:meth:`ZooKeeperServer.expire_session`): a second client joins the same
  session with its id and password and closes it - the server ends the session for good, exactly as
  on a timeout, and the first client learns it on its next contact;
* cut a client's connection (:class:`ConnectionCutter`): the client connects through a loopback
  TCP proxy that the test can sever (and refuse reconnections) and later restore.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.localcluster.ports import free_port

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
JAVA = shutil.which("java") or "/usr/bin/java"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


def missing_requirement() -> str | None:
    """Why a ZooKeeper cannot be started here, or ``None`` if it can."""
    if not Path(JAVA).exists():
        return "Java is not installed (apt-get install zookeeper brings it; `make test` does)"
    if not ZK_JAR.exists():
        return f"{ZK_JAR} is missing (apt-get install zookeeper; `make test` does)"
    return None


def four_letter_word(port: int, word: str, timeout: float = 1.0, host: str = "127.0.0.1") -> str:
    """Send a ZooKeeper four-letter command and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process on 127.0.0.1 - or, for a multi-host test, on a host
    address of a :class:`tests.support.netns.NetworkLab`, started inside that host with the
    ``command_prefix`` the lab gives (``ip netns exec <namespace>``)."""

    def __init__(
        self,
        *,
        tick_ms: int = 500,
        start_timeout: float = 60.0,
        bind_address: str = "127.0.0.1",
        command_prefix: tuple[str, ...] = (),
    ) -> None:
        self.port = 0
        self.bind_address = bind_address
        self._prefix = command_prefix
        self._tick_ms = tick_ms
        self._start_timeout = start_timeout
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"{self.bind_address}:{self.port}"

    def url(self, chroot: str = "/") -> str:
        """A ``zk://`` store URL for this server."""
        return f"zk://{self.hosts}{chroot}"

    def start(self) -> None:
        """Start the server and wait until it answers ``ruok``.

        Raises:
            RuntimeError: Java or the jar is missing, or the server did not come up in time.
        """
        reason = missing_requirement()
        if reason:
            raise RuntimeError(reason)
        self._dir = Path(tempfile.mkdtemp(prefix="braid-zk-"))
        (self._dir / "data").mkdir()
        self.port = free_port()
        config = self._dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self._tick_ms}",
                    f"dataDir={self._dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.bind_address}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,cons",
                    f"minSessionTimeout={2 * self._tick_ms}",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    "",
                ]
            )
        )
        log_file = (self._dir / "zookeeper.log").open("wb")
        self._proc = subprocess.Popen(
            [
                *self._prefix,
                JAVA,
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                str(ZK_JAR),
                MAIN_CLASS,
                str(config),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self._dir,
        )
        log_file.close()
        deadline = time.monotonic() + self._start_timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited at start-up: {self.log_tail()}")
            with contextlib.suppress(OSError):
                if four_letter_word(self.port, "ruok", host=self.bind_address) == "imok":
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not answer in {self._start_timeout}s")
            time.sleep(0.05)  # polling a process we started, not waiting in a test

    def log_tail(self, lines: int = 20) -> str:
        if self._dir is None:
            return ""
        log = self._dir / "zookeeper.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server by process id (SIGTERM, then SIGKILL) and remove its data."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def expire_session(self, client_id: tuple[int, bytes], timeout: float = 15.0) -> None:
        """End the ZooKeeper session ``client_id`` (its id and password) on the server now.

        The owning client is disconnected; its ephemeral nodes are deleted at once; when it
        reconnects the server tells it the session expired.
        """
        from kazoo.client import KazooClient

        intruder = KazooClient(hosts=self.hosts, client_id=client_id, timeout=10.0)
        intruder.start(timeout=timeout)
        try:
            if intruder.client_id[0] != client_id[0]:
                raise RuntimeError("could not join the session to expire it (already gone?)")
        finally:
            intruder.stop()  # CloseSession: the session ends, as if it had timed out
            intruder.close()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConnectionCutter:
    """A loopback TCP proxy to ZooKeeper whose connections a test can cut and restore."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._stopped = False
        self.restore()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, chroot: str = "/") -> str:
        return f"zk://{self.hosts}{chroot}"

    def restore(self) -> None:
        """Accept connections again (clients reconnect through the proxy)."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(16)
            self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        """Sever every proxied connection and refuse new ones until :meth:`restore`."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._stopped = True
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed by cut()
            try:
                upstream = socket.create_connection(self._target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole test run (skips only if Java or the jar is absent)."""
    reason = missing_requirement()
    if reason:
        pytest.skip(f"ZooKeeper tests need Debian's zookeeper package: {reason}")
    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
