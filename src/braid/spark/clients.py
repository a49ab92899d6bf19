"""One shared ``braid.Client`` per service URL in each Python process (Spark workers are reused
across tasks, so tasks share a connection instead of opening one each).

Closed when the process exits. Safe across ``fork``: a client created by a parent process is
never handed to a child (the cache is keyed by process id too).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading

from braid.client import Client

_lock = threading.Lock()
_clients: dict[tuple[int, str], Client] = {}


def shared_client(service_url: str) -> Client:
    """The process's client for ``service_url`` (created on first use)."""
    key = (os.getpid(), service_url)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = Client(service_url)
            _clients[key] = client
        return client


def _close_all() -> None:
    with _lock:
        mine = [c for (pid, _), c in _clients.items() if pid == os.getpid()]
        _clients.clear()
    for client in mine:
        with contextlib.suppress(Exception):
            client.close()


atexit.register(_close_all)

__all__ = ["shared_client"]
