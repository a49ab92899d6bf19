"""Choosing a free port for a server that another process binds a moment later.

``braid cluster up`` with base port 0, ``StandaloneProcess`` and the test suite pick a port here
and hand it to a child process, which binds it a little later. By default the kernel picks it
(bind to port 0, read the port, close): such a port lies in the kernel's *ephemeral* range, where
every outgoing connection's local port and every other port-0 bind on the machine are also taken
from - so, rarely, something else takes it in between and the child fails with "address already
in use". With ``BRAID_PORT_RANGE=LOW-HIGH`` ports are chosen from that range instead (each
checked free, the next call going on from the last one, so one process never hands out the same
port twice while it cycles through the range): a range below the ephemeral one (see
``/proc/sys/net/ipv4/ip_local_port_range``) that nothing else allocates from, and one range per
concurrent user - what the test suite does for each of its pytest processes (``tests/conftest.py``),
and what an operator can do to keep a local cluster's ports inside a firewall's allowed range.

Invariant: a returned port was free when checked (as a server binds it: ``SO_REUSEADDR``) and is
not in ``taken``.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Collection

from braid.core.errors import InvalidInputError

#: The environment variable naming the range to choose ports from (``LOW-HIGH``, inclusive).
PORT_RANGE_ENV = "BRAID_PORT_RANGE"

_lock = threading.Lock()
_next: dict[tuple[int, int], int] = {}


class PortRangeError(InvalidInputError):
    """``BRAID_PORT_RANGE`` is malformed, or no port in it is free."""


def port_free(address: str, port: int) -> bool:
    """Whether a server could listen on ``address:port`` now (as servers bind: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def port_range(text: str | None) -> tuple[int, int] | None:
    """``LOW-HIGH`` as a pair (``None`` for no text).

    Raises:
        PortRangeError: not two ports 1..65535 with LOW <= HIGH.
    """
    if not text:
        return None
    low_text, sep, high_text = text.partition("-")
    if sep and low_text.strip().isdigit() and high_text.strip().isdigit():
        low, high = int(low_text), int(high_text)
        if 1 <= low <= high <= 65535:
            return low, high
    raise PortRangeError(
        f"{PORT_RANGE_ENV} must be LOW-HIGH with 1 <= LOW <= HIGH <= 65535: {text!r}"
    )


def free_port(address: str = "127.0.0.1", taken: Collection[int] = ()) -> int:
    """A port a server can bind on ``address`` now, not in ``taken`` (see the module docstring).

    Raises:
        PortRangeError: ``BRAID_PORT_RANGE`` is malformed or has no free port left.
    """
    bounds = port_range(os.environ.get(PORT_RANGE_ENV))
    if bounds is None:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((address, 0))
                port = int(sock.getsockname()[1])
            if port not in taken:
                return port
    low, high = bounds
    size = high - low + 1
    with _lock:
        start = _next.get(bounds)
        if start is None:
            start = random.randrange(size)
        for step in range(size):
            port = low + (start + step) % size
            if port not in taken and port_free(address, port):
                _next[bounds] = (port - low + 1) % size
                return port
    raise PortRangeError(f"no free port on {address} in {PORT_RANGE_ENV}={low}-{high}")


__all__ = ["PORT_RANGE_ENV", "PortRangeError", "free_port", "port_free", "port_range"]
