"""Debian's ZooKeeper as ``braid cluster`` runs it: where it is, its configuration, its health.

Braid does not ship ZooKeeper; it runs the one Debian's ``zookeeper`` package installs
(``/usr/share/java/zookeeper.jar``, started with ``java -cp <jar>
org.apache.zookeeper.server.ZooKeeperServerMain <zoo.cfg>``, as the test suite runs it).
:func:`find_zookeeper` raises :class:`ZooKeeperMissing` naming the package when Java or the jar is
absent. The server is standalone (one node), listens on one address, keeps its data in the
cluster directory, and answers the ``ruok`` four-letter word (:func:`ruok`) once it serves.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from braid.core.errors import IllegalStateError

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: ZooKeeper's tick: sessions may be as short as two ticks (brokers ask for 10 s by default).
TICK_MS = 500


class ZooKeeperMissing(IllegalStateError):
    """Java or Debian's ZooKeeper jar is not installed."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    """Where the Java runtime and the ZooKeeper jar are."""

    java: Path
    jar: Path


def find_zookeeper(
    jar: Path = ZK_JAR, environ: Mapping[str, str] | None = None
) -> ZooKeeperInstall:
    """Locate Java and the ZooKeeper jar.

    Raises:
        ZooKeeperMissing: either is absent; the message names the package that brings both.
    """
    path = None if environ is None else environ.get("PATH")
    java = shutil.which("java", path=path)
    if java is None or not jar.exists():
        what = "a Java runtime (`java` on PATH)" if java is None else str(jar)
        raise ZooKeeperMissing(
            f"ZooKeeper cannot start: {what} is missing. `braid cluster` runs Debian's "
            "ZooKeeper: install it with `apt-get install zookeeper` (it brings Java too)"
        )
    return ZooKeeperInstall(Path(java), jar)


def zoo_cfg(data_dir: Path, address: str, port: int) -> str:
    """The text of a standalone server's ``zoo.cfg``."""
    lines = [
        f"tickTime={TICK_MS}",
        f"dataDir={data_dir}",
        f"clientPort={port}",
        f"clientPortAddress={address}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr,cons,stat",
        f"minSessionTimeout={2 * TICK_MS}",
        "maxSessionTimeout=60000",
        "maxClientCnxns=0",
    ]
    return "\n".join(lines) + "\n"


def command(install: ZooKeeperInstall, config: Path) -> list[str]:
    """The command line of the server (a small heap: it holds a test cluster's metadata)."""
    return [
        str(install.java),
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dzookeeper.admin.enableServer=false",
        "-cp",
        str(install.jar),
        MAIN_CLASS,
        str(config),
    ]


def ruok(address: str, port: int, timeout: float = 1.0) -> bool:
    """Whether the server at ``address:port`` answers ``ruok`` with ``imok``."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            chunks = []
            while chunk := sock.recv(64):
                chunks.append(chunk)
    except OSError:
        return False
    return b"".join(chunks) == b"imok"


__all__ = ["ZK_JAR", "ZooKeeperInstall", "ZooKeeperMissing", "command", "find_zookeeper", "ruok"]
