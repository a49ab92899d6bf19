"""Free ports from ``BRAID_PORT_RANGE``: inside the range, never a busy or taken one, cycling so
one process does not hand out the same port twice in a row, and a clear error for a bad range."""

from __future__ import annotations

import itertools
import socket

import pytest

from braid.localcluster import ports
from braid.localcluster.ports import PortRangeError, free_port, port_range


def _listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_ports_come_from_the_range_skip_busy_and_taken_ones_and_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    low = free_port()  # a free port from the kernel, and the next few, as the range
    busy = _listening(low)
    try:
        monkeypatch.setenv(ports.PORT_RANGE_ENV, f"{low}-{low + 3}")
        monkeypatch.setattr(ports, "_next", {})
        got = [free_port(taken={low + 1}) for _ in range(6)]
    finally:
        busy.close()
    usable = {p for p in (low + 2, low + 3) if ports.port_free("127.0.0.1", p)}
    assert set(got) <= usable and set(got) == usable
    assert all(a != b for a, b in itertools.pairwise(got)) or len(usable) == 1


def test_a_range_with_nothing_free_and_a_malformed_one_are_typed_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = _listening(0)
    port = busy.getsockname()[1]
    try:
        monkeypatch.setenv(ports.PORT_RANGE_ENV, f"{port}-{port}")
        with pytest.raises(PortRangeError, match="no free port"):
            free_port()
    finally:
        busy.close()
    for bad in ("1000", "9-1", "0-10", "a-b", "1-70000"):
        with pytest.raises(PortRangeError, match="LOW-HIGH"):
            port_range(bad)
    assert port_range("") is None
    assert port_range("20000-20010") == (20000, 20010)


def test_without_a_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ports.PORT_RANGE_ENV, raising=False)
    port = free_port()
    assert ports.port_free("127.0.0.1", port)
