"""Serve the admin app with uvicorn inside the broker's event loop
(``docs/architecture.md#binding-decisions``).

uvicorn normally owns the process: it installs SIGINT/SIGTERM handlers and runs its own loop. Here
the broker process owns both, so :class:`AdminServer` binds the socket itself (port 0 = a free port,
readable afterwards), runs uvicorn's serve loop as a task with signal capture disabled, and stops it
when the process shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from braid.core.errors import IllegalStateError

log = logging.getLogger(__name__)


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the host process decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AdminServerError(IllegalStateError):
    """The admin HTTP server could not start."""


class AdminServer:
    """An HTTP server for ``app`` on ``host:port`` in the running event loop; HTTPS with
    ``ssl_context`` (``webServicePortTls``)."""

    def __init__(
        self, app: FastAPI, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._app = app
        self._ssl_context = ssl_context
        self._host = host
        self._requested_port = port
        self._socket: socket.socket | None = None
        self._port: int | None = None
        self._server: _EmbeddedUvicorn | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was requested)."""
        if self._port is None:
            raise AdminServerError("the admin server is not started")
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://{self._host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving; returns once requests are accepted.

        Raises:
            AdminServerError: the port is taken or the server failed during start-up.
        """
        config = uvicorn.Config(
            self._app,
            host=self._host,
            port=self._requested_port,
            log_config=None,  # keep the process's structured logging
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            ssl_context_factory=self._context_factory if self._ssl_context is not None else None,
        )
        try:
            self._socket = config.bind_socket()
        except SystemExit as exc:  # uvicorn exits the process when bind fails
            raise AdminServerError(
                f"cannot listen on {self._host}:{self._requested_port} (address in use?)"
            ) from exc
        self._port = int(self._socket.getsockname()[1])
        self._server = _EmbeddedUvicorn(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        # uvicorn has no start-up future; its own flag flips once the listener is serving.
        while not self._server.started:
            if self._task.done():
                failure = self._task.exception() if not self._task.cancelled() else None
                raise AdminServerError(f"admin server failed to start: {failure}") from failure
            await asyncio.sleep(0.01)
        log.info("admin server listening on %s", self.url)

    def _context_factory(self, config: uvicorn.Config, default: object) -> ssl.SSLContext:
        assert self._ssl_context is not None
        return self._ssl_context

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests (bounded) and close. Idempotent."""
        if self._server is not None and self._task is not None:
            # uvicorn waits for every response in flight: end the long-lived ones (the console's
            # event streams) first, or each open page would hold the stop for the whole grace.
            for close_streams in getattr(self._app.state, "close_streams", ()):
                close_streams()
            self._server.should_exit = True
            try:
                await self._task
            except (Exception, SystemExit) as exc:
                log.warning("admin server stopped with an error: %s", exc)
            self._task = None
        if self._socket is not None:
            self._socket.close()
