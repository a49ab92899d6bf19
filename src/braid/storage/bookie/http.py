"""A bookie process's HTTP endpoint: ``GET /health`` and ``GET /metrics`` on ``httpServerPort``.

Deliberately tiny (one request per connection, HTTP/1.0 answers, no framework): it serves
probes and Prometheus scrapes, nothing else. ``/health`` answers 200 with a JSON body while the
bookie is writable and 503 while it is read-only (still serving reads) or closing, so a load
balancer or a test can tell; ``/metrics`` is the Prometheus text format of the bookie's counters
(:func:`bookie_metrics_registry`). Anything else gets 404; a request line that is not HTTP gets 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from braid.storage.bookie.engine import Bookie
from braid.storage.bookie.server import ServerStats

log = logging.getLogger(__name__)

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}


class _BookieCollector(Collector):
    """Reads the bookie's state when scraped (nothing is counted twice on the hot path)."""

    def __init__(self, bookie: Bookie, stats: ServerStats) -> None:
        self._bookie = bookie
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        labels = ["bookie"]
        values = [self._bookie.bookie_id]
        stats = self._stats
        counters = {
            "braid_bookie_add_requests": (stats.add_requests, "Add requests received"),
            "braid_bookie_add_errors": (stats.add_errors, "Add requests answered with an error"),
            "braid_bookie_read_requests": (stats.read_requests, "Read (and fence) requests"),
            "braid_bookie_read_errors": (stats.read_errors, "Reads answered with an error"),
            "braid_bookie_bad_frames": (stats.bad_frames, "Connections closed for a bad frame"),
            "braid_bookie_bytes_received": (stats.bytes_received, "Bytes received"),
            "braid_bookie_bytes_sent": (stats.bytes_sent, "Bytes sent"),
            "braid_bookie_journal_fsyncs": (self._bookie.journal_fsyncs, "Journal group commits"),
        }
        for name, (value, doc) in counters.items():
            family = CounterMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            yield family
        gauges = {
            "braid_bookie_connections": (stats.connections_open, "Open client connections"),
            "braid_bookie_read_only": (
                int(self._bookie.read_only_reason is not None),
                "1 while the bookie refuses new entries (disk full)",
            ),
            "braid_bookie_ledgers": (len(self._bookie.ledgers()), "Ledgers held"),
        }
        for name, (value, doc) in gauges.items():
            gauge = GaugeMetricFamily(name, doc, labels=labels)
            gauge.add_metric(values, value)
            yield gauge


def bookie_metrics_registry(bookie: Bookie, stats: ServerStats) -> CollectorRegistry:
    """A Prometheus registry exporting one bookie's metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_BookieCollector(bookie, stats))
    return registry


class BookieHttpServer:
    """Serves ``/health`` (from ``health()``: status code and JSON document) and ``/metrics``."""

    def __init__(
        self,
        host: str,
        port: int,
        health: Callable[[], tuple[int, Mapping[str, object]]],
        registry: CollectorRegistry,
    ) -> None:
        self._host = host
        self._port = port
        self._health = health
        self._registry = registry
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request = await reader.readuntil(b"\r\n\r\n")
            parts = request.split(b"\r\n", 1)[0].split()
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
                status, body, ctype = 400, b"bad request\n", "text/plain"
            else:
                status, body, ctype = self._route(parts[0], parts[1].split(b"?", 1)[0])
            head = (
                f"HTTP/1.0 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    def _route(self, method: bytes, path: bytes) -> tuple[int, bytes, str]:
        if method not in (b"GET", b"HEAD"):
            return 404, b"not found\n", "text/plain"
        if path == b"/health":
            status, doc = self._health()
            return status, json.dumps(doc).encode() + b"\n", "application/json"
        if path == b"/metrics":
            return 200, generate_latest(self._registry), CONTENT_TYPE_LATEST
        return 404, b"not found\n", "text/plain"
