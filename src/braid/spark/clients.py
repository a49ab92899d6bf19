"""The connector's clients: one shared ``braid.Client`` per service URL in each Python process
(Spark workers are reused across tasks, so tasks share a connection instead of opening one
each), and admin clients that start without loading a CA bundle they may never use.

Shared clients are closed when the process exits. Safe across ``fork``: a client created by a
parent process is never handed to a child (the cache is keyed by process id too).

:func:`admin_client`: Spark starts a new Python process to plan every streaming query (and one
for every streaming write), and a default ``httpx`` client loads the CA bundle when it is
created - 0.1 s on an idle core, 0.5-0.8 s on a loaded one (docs/benchmarks.md), most of the
planning process's cost on top of Spark's own. Its transport sends ``http://`` requests over a
transport without a TLS context and creates the verifying transport for ``https://`` requests
when the first one is sent: certificates are checked exactly as before, only later.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading


def _import_httpx_lean() -> None:
    """Import httpx (the admin client's transport) without what the connector never uses.

    Spark starts fresh Python processes (a streaming write's planner, the first task of each
    worker), so import time counts (docs/benchmarks.md, the Spark section):

    * ``import httpx`` imports ``httpx._main`` (click, rich, pygments: ~60 ms) for the ``httpx``
      console command only. A ``None`` in ``sys.modules`` makes that import fail, which httpx
      handles by defining a stub ``httpx.main`` (it says to install ``httpx[cli]``).
    * in Spark's own Python processes (``pyspark.worker_util`` is loaded: the planning process
      and the executors' workers, which run the connector's synchronous HTTP calls only),
      ``httpcore`` is imported without ``trio``: httpcore imports trio, when it is installed,
      for async code running under trio (0.3-0.9 s), and handles its absence.

    The ``None`` entries are removed afterwards, so later explicit imports work as usual.
    """
    if "httpx" in sys.modules:
        return
    blocked = ["httpx._main"]
    if "pyspark.worker_util" in sys.modules and "httpcore" not in sys.modules:
        blocked.append("trio")
    blocked = [name for name in blocked if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401

        if "trio" in blocked:
            import httpcore  # noqa: F401
    except ImportError:  # httpx missing: the admin client reports it where it is used
        pass
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_httpx_lean()

# After the lean import above (E402): httpx is then already loaded, without what it skipped.
import httpx  # noqa: E402

from braid.admin.client import AdminClient  # noqa: E402
from braid.client import Client  # noqa: E402

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


class _TlsWhenNeeded(httpx.BaseTransport):
    """``http://`` over a transport with no TLS context; ``https://`` over a verifying one made
    on first use (see the module docstring)."""

    def __init__(self) -> None:
        self._plain = httpx.HTTPTransport(verify=False)  # never used for TLS: http:// only
        self._tls: httpx.HTTPTransport | None = None
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http":
            return self._plain.handle_request(request)
        with self._lock:
            if self._tls is None:
                self._tls = httpx.HTTPTransport()  # verifies certificates (the default)
            tls = self._tls
        return tls.handle_request(request)

    def close(self) -> None:
        self._plain.close()
        if self._tls is not None:
            self._tls.close()


def admin_client(url: str) -> AdminClient:
    """An admin client for ``url`` that loads TLS material only for an ``https://`` request."""
    return AdminClient(url, transport=_TlsWhenNeeded())


__all__ = ["admin_client", "shared_client"]
