"""The connection pool: one connection per broker, shared by everything a client creates.

:meth:`ConnectionPool.get` returns the live connection to a broker URL, opening it if needed;
concurrent callers for the same broker share one in-flight connect. A closed connection leaves
the pool by itself, so the next ``get`` reconnects. Lookups go to the service URL's brokers
(:meth:`ConnectionPool.service_connection`), trying them in order.
"""

from __future__ import annotations

import asyncio
import logging

from braid.client.connection import BrokerConnection
from braid.client.errors import AlreadyClosedError, ConnectError
from braid.client.settings import BrokerAddress, ClientSettings, parse_broker_url

log = logging.getLogger(__name__)


class ConnectionPool:
    """Connections by broker URL (``pulsar://host:port``)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._connections: dict[str, BrokerConnection] = {}
        self._connecting: dict[str, asyncio.Future[BrokerConnection]] = {}
        self._closed = False
        self._service_index = 0

    async def get(self, url: str) -> BrokerConnection:
        """The connection to ``url``, connecting if there is none.

        Raises:
            ConnectError: the broker could not be reached (retriable).
            InvalidServiceURLError: ``url`` is not a ``pulsar://host:port`` URL.
            AlreadyClosedError: the pool is closed.
        """
        return await self.get_address(parse_broker_url(url))

    async def get_address(self, address: BrokerAddress) -> BrokerConnection:
        """Like :meth:`get`, for a parsed address."""
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        key = address.url
        conn = self._connections.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._open(address))
            self._connecting[key] = pending
            pending.add_done_callback(lambda _f: self._connecting.pop(key, None))
        # Shield: one caller's cancellation must not abort the connect the others wait for.
        return await asyncio.shield(pending)

    async def _open(self, address: BrokerAddress) -> BrokerConnection:
        conn = await BrokerConnection.open(address, self.settings)
        if self._closed:
            conn.close()
            raise AlreadyClosedError("the client is closed")
        self._connections[address.url] = conn
        conn.add_close_listener(self._forget)
        return conn

    def _forget(self, conn: BrokerConnection) -> None:
        if self._connections.get(conn.address.url) is conn:
            del self._connections[conn.address.url]

    async def service_connection(self) -> BrokerConnection:
        """A connection to one of the service URL's brokers (the last good one first).

        Raises:
            ConnectError: none of them could be reached.
        """
        service = self.settings.service
        errors: list[str] = []
        for offset in range(len(service)):
            index = (self._service_index + offset) % len(service)
            try:
                conn = await self.get_address(service[index])
            except ConnectError as exc:
                errors.append(str(exc))
                continue
            self._service_index = index
            return conn
        raise ConnectError("no service broker reachable: " + "; ".join(errors))

    def connections(self) -> list[BrokerConnection]:
        """The open connections (a snapshot)."""
        return [c for c in self._connections.values() if not c.closed]

    async def close(self) -> None:
        """Close every connection; later ``get`` calls fail."""
        self._closed = True
        for fut in list(self._connecting.values()):
            fut.cancel()
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            await conn.wait_closed()


__all__ = ["ConnectionPool"]
