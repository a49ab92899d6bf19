"""Tells an admin API caller that its answer came from the broker's memory of the metadata store.

While the metadata store (ZooKeeper) is unreachable, the broker answers reads of tenants,
namespaces and policies with what it last read (:mod:`braid.metadata.last_known`). Such an
answer is still ``200``, with the header ``Braid-Metadata-Stale: true``, so a script can tell it
from a fresh one; writes are refused with 503 as before. :class:`StaleReadHeader` is the ASGI
middleware: it opens a tracker for each request and adds the header when a read used memory.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from braid.metadata.last_known import track_stale_reads

#: The response header set on an answer built from remembered metadata.
STALE_HEADER = "Braid-Metadata-Stale"


class StaleReadHeader:
    """ASGI middleware adding :data:`STALE_HEADER` to answers built from stale reads."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        tracker = track_stale_reads()

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start" and tracker.stale:
                headers = list(message.get("headers", []))
                headers.append((STALE_HEADER.lower().encode(), b"true"))
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_marked)


__all__ = ["STALE_HEADER", "StaleReadHeader"]
