"""Several test hosts on one machine: Linux network namespaces joined by a bridge.

A :class:`NetworkLab` is what a multi-host test runs its servers in. Each *host* is a network
namespace of its own with one interface (``eth0``) and one address on a private /24; all hosts
hang off one bridge, which lives in a hub namespace, and the test process itself (in the root
namespace) is wired to the same bridge, so it reaches every host by address. Nothing listens
outside the namespaces the lab made, and nothing is routed off the machine.

* :meth:`NetworkLab.add_host` makes a host and returns its :class:`Host` (name and address);
* :meth:`NetworkLab.popen` starts a process inside a host (``ip netns exec``); the lab keeps its
  process id and stops it (SIGKILL by id) when the lab closes;
* :meth:`NetworkLab.cut` takes a host's link down (its hub-side veth), so neither it nor anyone
  else can reach it; packets are dropped, not refused, exactly as when a cable is pulled.
  :meth:`NetworkLab.restore` brings the link back;
* :meth:`NetworkLab.close` kills the lab's processes, then deletes its namespaces and the
  root-side veth, by name. Names carry the test process id (``bx<pid>-...``), so two labs of two
  test runs never collide and a leftover is attributable.

Needs root and ``ip`` (iproute2), as CI has; :func:`missing_requirement` says why not otherwise.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

IP = shutil.which("ip") or "/usr/sbin/ip"
_LAB_IDS = itertools.count()


def missing_requirement() -> str | None:
    """Why network namespaces cannot be made here, or ``None`` if they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if not Path(IP).exists():
        return "iproute2's `ip` is not installed"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [IP, *args],
        check=check,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = _ip("-o", "-4", "addr", "show").stdout
    nets = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    return nets


def _free_subnet() -> ipaddress.IPv4Network:
    used = _used_networks()
    start = os.getpid() % 200
    for i in range(200):
        candidate = ipaddress.ip_network(f"10.{200 + (start + i) % 50}.{(start + i) % 250}.0/24")
        if not any(candidate.overlaps(n) for n in used):
            return candidate
    raise RuntimeError("no free 10.x /24 for a network lab")


@dataclass(frozen=True)
class Host:
    """One simulated host: its namespace's name and its address on the lab's network."""

    name: str
    namespace: str
    address: str
    hub_link: str  # the hub-side end of its veth (what :meth:`NetworkLab.cut` takes down)

    def exec_prefix(self) -> list[str]:
        """The argv prefix that runs a command inside this host."""
        return [IP, "netns", "exec", self.namespace]


class NetworkLab:
    """A private network of namespaced hosts, reachable from the test process."""

    def __init__(self) -> None:
        reason = missing_requirement()
        if reason:
            raise RuntimeError(reason)
        self._prefix = f"bx{os.getpid()}{next(_LAB_IDS)}"
        self._subnet = _free_subnet()
        self._addresses = self._subnet.hosts()
        self._namespaces: list[str] = []
        self._root_link: str | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self.hosts: dict[str, Host] = {}
        self._hub = f"{self._prefix}-hub"
        try:
            self._make_hub()
        except BaseException:
            self.close()
            raise

    @property
    def root_address(self) -> str:
        """The test process's own address on the lab network (the last of the /24)."""
        return str(self._subnet.broadcast_address - 1)

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _make_hub(self) -> None:
        self._add_namespace(self._hub)
        _ip("-n", self._hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self._hub, "link", "set", "br0", "up")
        # The root namespace's leg: the test process reaches every host through it.
        outer, inner = f"{self._prefix}-r", f"{self._prefix}-rp"
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._root_link = outer
        self._attach(inner)
        _ip("addr", "add", f"{self.root_address}/{self._subnet.prefixlen}", "dev", outer)
        _ip("link", "set", outer, "up")

    def _attach(self, hub_end: str) -> None:
        _ip("link", "set", hub_end, "netns", self._hub)
        _ip("-n", self._hub, "link", "set", hub_end, "master", "br0")
        _ip("-n", self._hub, "link", "set", hub_end, "up")

    def add_host(self, name: str) -> Host:
        """Make a host called ``name`` (a short label, unique in this lab) and return it."""
        if name in self.hosts:
            raise ValueError(f"host {name!r} already exists")
        index = len(self.hosts)
        namespace = f"{self._prefix}-{index}"
        address = str(next(self._addresses))
        self._add_namespace(namespace)
        inside, hub_end = f"{self._prefix}-h{index}", f"{self._prefix}-p{index}"
        _ip("link", "add", inside, "type", "veth", "peer", "name", hub_end)
        _ip("link", "set", inside, "netns", namespace)
        self._attach(hub_end)
        _ip("-n", namespace, "link", "set", inside, "name", "eth0")
        _ip("-n", namespace, "addr", "add", f"{address}/{self._subnet.prefixlen}", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        host = Host(name, namespace, address, hub_end)
        self.hosts[name] = host
        return host

    def popen(
        self,
        host: Host,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdout: IO[Any] | int | None = subprocess.DEVNULL,
        stderr: IO[Any] | int | None = subprocess.STDOUT,
        cwd: str | Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``host``; the lab stops it by process id when it closes.

        ``ip netns exec`` execs the command, so the returned process id is the command's own.
        """
        proc = subprocess.Popen(
            [*host.exec_prefix(), *argv],
            env=dict(env) if env is not None else None,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
        self._procs.append(proc)
        return proc

    def cut(self, host: Host) -> None:
        """Take ``host``'s link down: its packets are dropped both ways until :meth:`restore`."""
        _ip("-n", self._hub, "link", "set", host.hub_link, "down")

    def restore(self, host: Host) -> None:
        """Bring ``host``'s link back up."""
        _ip("-n", self._hub, "link", "set", host.hub_link, "up")

    def close(self) -> None:
        """Kill the lab's processes (by id), then delete its namespaces and links (by name)."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        self._procs.clear()
        for namespace in reversed(self._namespaces):
            _ip("netns", "del", namespace, check=False)
        self._namespaces.clear()
        if self._root_link is not None:
            # Deleting the hub frees the veth pair asynchronously; wait for it, then make sure.
            deadline = time.monotonic() + 5
            while _ip("link", "show", self._root_link, check=False).returncode == 0:
                if time.monotonic() > deadline:
                    _ip("link", "del", self._root_link, check=False)
                    break
                time.sleep(0.05)  # polling the kernel's cleanup, with a deadline
            self._root_link = None

    def __enter__(self) -> NetworkLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def network_lab() -> Iterator[NetworkLab]:
    """A :class:`NetworkLab` for one test, removed afterwards (skips without root or ``ip``)."""
    reason = missing_requirement()
    if reason:
        pytest.skip(reason)
    with NetworkLab() as lab:
        yield lab
