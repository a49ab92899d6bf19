"""The multi-host test harness itself: hosts reach each other and the test process, a cut host
is unreachable both ways until restored, a ZooKeeper runs inside a host, and closing the lab
leaves no namespace or link behind."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.support import netns
from tests.support.netns import NetworkLab, network_lab
from tests.support.zookeeper import ZooKeeperServer, missing_requirement

__all__ = ["network_lab"]

pytestmark = pytest.mark.timeout(120)

_ECHO = """
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen()
print("listening", flush=True)
while True:
    conn, _ = srv.accept()
    conn.sendall(conn.recv(64)); conn.close()
"""

_CLIENT = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
    s.sendall(b"ping"); print(s.recv(64).decode())
"""


def _echo(address: str, port: int, timeout: float = 5.0) -> str:
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.sendall(b"ping")
        return sock.recv(64).decode()


def _start_echo(lab: NetworkLab, host: netns.Host, port: int) -> None:
    proc = lab.popen(
        host, [sys.executable, "-c", _ECHO, host.address, str(port)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"listening"


def test_hosts_reach_each_other_and_the_test_process(network_lab: NetworkLab) -> None:
    a, b = network_lab.add_host("a"), network_lab.add_host("b")
    assert a.address != b.address
    _start_echo(network_lab, a, 7001)
    assert _echo(a.address, 7001) == "ping"
    client = network_lab.popen(
        b, [sys.executable, "-c", _CLIENT, a.address, "7001", "5"], stdout=subprocess.PIPE
    )
    out, _ = client.communicate(timeout=30)
    assert out.decode().strip() == "ping"


def test_a_cut_host_is_unreachable_until_restored(network_lab: NetworkLab) -> None:
    a = network_lab.add_host("a")
    _start_echo(network_lab, a, 7002)
    assert _echo(a.address, 7002) == "ping"
    network_lab.cut(a)
    started = time.monotonic()
    with pytest.raises(OSError):  # dropped, not refused: the connect times out
        _echo(a.address, 7002, timeout=1.0)
    assert time.monotonic() - started >= 0.9
    network_lab.restore(a)
    deadline = time.monotonic() + 10
    while True:
        try:
            assert _echo(a.address, 7002, timeout=1.0) == "ping"
            break
        except OSError:
            if time.monotonic() > deadline:
                raise


@pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement()))
def test_zookeeper_runs_inside_a_host(network_lab: NetworkLab) -> None:
    from kazoo.client import KazooClient

    zk_host = network_lab.add_host("zk")
    server = ZooKeeperServer(
        bind_address=zk_host.address, command_prefix=tuple(zk_host.exec_prefix())
    )
    server.start()
    try:
        client = KazooClient(hosts=server.hosts, timeout=10.0)
        client.start(timeout=20)
        try:
            client.create("/lab", b"x")
            assert client.get("/lab")[0] == b"x"
        finally:
            client.stop()
            client.close()
    finally:
        server.stop()


def test_closing_the_lab_removes_its_namespaces_and_links() -> None:
    reason = netns.missing_requirement()
    if reason:
        pytest.skip(reason)
    lab = NetworkLab()
    lab.add_host("a")
    names = list(lab._namespaces)
    lab.close()
    listed = subprocess.run([netns.IP, "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in listed for name in names)
    links = subprocess.run([netns.IP, "-o", "link"], capture_output=True, text=True).stdout
    assert lab._prefix not in links
