"""Binary-protocol connections from a broker to the other brokers of its cluster (ADR 0070).

A coordinator ends a transaction on a topic another broker owns by sending it
END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION, as Pulsar's transaction-buffer client does. The
brokers' only other channel to each other is the internal HTTP listener; the Braid client's
connection pool is not for brokers (``client/`` depends on nothing of the broker's and the broker on
nothing of the client's), so this is the broker's own small client over the sans-I/O
:class:`~braid.protocol.connection.ClientConnection`: one connection per peer URL, shared by every
coordinator of the broker, requests matched by ``request_id``, closed and forgotten on any error
(the next request reconnects). It presents ``brokerClientAuthenticationPlugin``'s credentials.

A peer is named by its ``pulsar://`` service URL everywhere (ownership records, lookups, the
coordinator-assignment map); only the dialling differs. With TLS between brokers configured
(:class:`~braid.broker.cluster_tls.PeerTls` ``required``: ``brokerClientTlsEnabled=true``, or this
broker serving TLS), a peer is reached at the ``pulsar+ssl://`` URL it registered
(``pulsarServiceUrlTls``), with the broker's TLS client settings
(``brokerClientTrustCertsFilePath``, ``brokerClientCertificateFilePath``/
``brokerClientKeyFilePath``, host-name verification as configured); a peer without a TLS
listener is refused - no plain fallback - and a failed handshake is logged once per peer, as for
the brokers' HTTPS calls.

:func:`find_owner` is LOOKUP as a client does it: ask, follow redirects (``authoritative`` as told),
until a broker says *Connect*.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable

from braid.broker.cluster_tls import PeerTls
from braid.broker.errors import ServiceNotReady
from braid.protocol import commands
from braid.protocol.connection import ClientConnection
from braid.protocol.errors import ConnectionClosedError, ConnectionStateError, ProtocolError
from braid.protocol.events import CommandReceived, ConnectionClosed, ProtocolViolation
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.credentials import ClientCredentials

log = logging.getLogger(__name__)

_READ_SIZE = 1 << 16
#: Seconds a peer has to answer a connect or one request.
PEER_TIMEOUT_S = 10.0
#: Redirects a lookup follows before giving up (retriably).
MAX_REDIRECTS = 8
_VERSION = "Braid-broker-peer"


class PeerRefused(ServiceNotReady):
    """A peer broker answered with an error, or could not be reached (the caller retries)."""


class PeerConnection:
    """One connected, handshaken connection to a peer broker (create with :meth:`open`)."""

    def __init__(
        self,
        url: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        proto: ClientConnection,
    ) -> None:
        self.url = url
        self._reader = reader
        self._writer = writer
        self._proto = proto
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self.closed = False
        self._task = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def open(
        cls,
        url: str,
        credentials: ClientCredentials | None,
        tls: ssl.SSLContext | None = None,
    ) -> PeerConnection:
        """Connect to ``pulsar://host:port`` (or, with ``tls``, ``pulsar+ssl://host:port``) and
        handshake.

        Raises:
            PeerRefused: unreachable, the TLS handshake failed, or the peer refused the
                handshake.
        """
        scheme, _, rest = url.partition("://")
        host, _, port = rest.rstrip("/").rpartition(":")
        want = "pulsar+ssl" if tls is not None else "pulsar"
        if scheme != want or not host or not port.isdigit():
            raise PeerRefused(f"cannot reach peer broker {url!r}: not a {want}://host:port URL")
        host = host.strip("[]")
        loop = asyncio.get_running_loop()
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(PEER_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(
                    host,
                    int(port),
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
                proto = ClientConnection(
                    _VERSION,
                    created_at=loop.time(),
                    auth_method_name=credentials.method if credentials else "none",
                    auth_data=credentials.auth_data() if credentials else None,
                )
                writer.write(proto.data_to_send())
                while proto.protocol_version is None:
                    data = await reader.read(_READ_SIZE)
                    for event in proto.receive_data(data, loop.time()):
                        if isinstance(event, ProtocolViolation | ConnectionClosed):
                            raise PeerRefused(f"peer broker {url} refused the handshake: {event}")
                    writer.write(proto.data_to_send())
        except (OSError, TimeoutError) as exc:
            if writer is not None:
                writer.close()
            raise PeerRefused(f"cannot reach peer broker {url}: {exc or 'timed out'}") from exc
        except PeerRefused:
            if writer is not None:
                writer.close()
            raise
        return cls(url, reader, writer, proto)

    def new_request_id(self) -> int:
        return next(self._ids)

    async def request(self, cmd: pb.BaseCommand, request_id: int) -> pb.BaseCommand:
        """Send ``cmd``; its answer (the typed response, or ERROR).

        Raises:
            PeerRefused: the connection closed or the peer did not answer in time.
        """
        if self.closed:
            raise PeerRefused(f"connection to peer broker {self.url} is closed")
        future: asyncio.Future[pb.BaseCommand] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._proto.send(cmd)
            self._writer.write(self._proto.data_to_send())
            async with asyncio.timeout(PEER_TIMEOUT_S):
                return await future
        except (TimeoutError, ProtocolError, ConnectionClosedError, ConnectionStateError) as exc:
            self.close()
            raise PeerRefused(
                f"peer broker {self.url} did not answer: {exc or 'timed out'}"
            ) from exc
        finally:
            self._pending.pop(request_id, None)

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._proto.closed:
                data = await self._reader.read(_READ_SIZE)
                for event in self._proto.receive_data(data, loop.time()):
                    if isinstance(event, CommandReceived):
                        inner = commands.inner(event.command)
                        future = self._pending.get(getattr(inner, "request_id", -1))
                        if future is not None and not future.done():
                            future.set_result(event.command)
                pending = self._proto.data_to_send()  # PONGs
                if pending:
                    self._writer.write(pending)
        except (OSError, ProtocolError) as exc:
            log.debug("connection to peer broker %s ended: %s", self.url, exc)
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._proto.close()
        self._writer.close()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(PeerRefused(f"connection to peer broker {self.url} closed"))
        if self._task is not asyncio.current_task():
            self._task.cancel()


#: The ``pulsar+ssl://`` URL a peer registered for its ``pulsar://`` one (``None``: it has none).
TlsUrlOf = Callable[[str], Awaitable[str | None]]


class PeerConnections:
    """One connection per peer broker URL, opened on first use, replaced once closed.

    ``tls`` (this broker's :func:`~braid.broker.cluster_tls.peer_tls`) and ``tls_url_of`` (the
    broker registry's ``pulsarServiceUrlTls`` of a peer): with ``tls.required`` every peer is
    dialled over TLS (see the module doc).
    """

    def __init__(
        self,
        credentials: ClientCredentials | None = None,
        *,
        tls: PeerTls | None = None,
        tls_url_of: TlsUrlOf | None = None,
    ) -> None:
        if tls is not None and tls.required and tls_url_of is None:
            raise ValueError("TLS between brokers needs the peers' pulsar+ssl:// URLs")
        self._credentials = credentials
        self._tls = tls if tls is not None and tls.required else None
        self._tls_url_of = tls_url_of
        self._connections: dict[str, PeerConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, url: str) -> PeerConnection:
        """The open connection to the peer whose service URL is ``url`` (made if needed).

        Raises:
            PeerRefused: unreachable, refused, or (TLS configured) it has no TLS listener.
        """
        lock = self._locks.setdefault(url, asyncio.Lock())
        async with lock:
            conn = self._connections.get(url)
            if conn is None or conn.closed:
                conn = await self._open(url)
                self._connections[url] = conn
            return conn

    async def _open(self, url: str) -> PeerConnection:
        tls = self._tls
        if tls is None:
            return await PeerConnection.open(url, self._credentials)
        assert self._tls_url_of is not None
        dial = url if url.startswith("pulsar+ssl://") else await self._tls_url_of(url)
        if not dial:
            raise PeerRefused(
                f"peer broker {url} has no TLS (pulsar+ssl) listener and this broker has TLS "
                "configured (brokerClientTlsEnabled=true or a TLS port): no plain fallback; give "
                "it brokerServicePortTls"
            )
        try:
            conn = await PeerConnection.open(dial, self._credentials, tls.context)
        except PeerRefused as exc:
            tls.failed(dial, exc)
            raise
        tls.succeeded(dial)
        return conn

    async def call(self, url: str, make: Callable[[int], pb.BaseCommand]) -> pb.BaseCommand:
        """Send the command ``make(request_id)`` to ``url``; its answer."""
        conn = await self.get(url)
        request_id = conn.new_request_id()
        return await conn.request(make(request_id), request_id)

    async def ask(self, url: str, make: Callable[[int], pb.BaseCommand], what: str) -> None:
        """Send ``make(request_id)`` to ``url``; raise :class:`PeerRefused` (``what`` failed)
        unless the answer carries no error."""
        refused = refusal(await self.call(url, make), f"{what} at {url}")
        if refused is not None:
            raise refused

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


def refusal(response: pb.BaseCommand, what: str) -> PeerRefused | None:
    """The error a peer's answer carries (an ERROR, or a response's ``error``), or ``None``."""
    if response.type == pb.BaseCommand.ERROR:
        code, text = response.error.error, response.error.message
    else:
        inner = commands.inner(response)
        if inner is None or not inner.HasField("error"):
            return None
        code, text = getattr(inner, "error"), getattr(inner, "message")  # noqa: B009
    return PeerRefused(f"{what}: {pb.ServerError.Name(code)}: {text}")


def _lookup(topic: str, authoritative: bool, request_id: int) -> pb.BaseCommand:
    return commands.lookup(topic, request_id, authoritative=authoritative)


async def find_owner(peers: PeerConnections, first: str, topic: str, authoritative: bool) -> str:
    """The service URL of the broker serving ``topic``, asking ``first`` (a broker a lookup
    redirected to) and following redirects.

    Raises:
        PeerRefused: a lookup failed, or too many redirects (retriable).
    """
    url = first
    for _ in range(MAX_REDIRECTS):
        answer = await peers.call(url, functools.partial(_lookup, topic, authoritative))
        refused = refusal(answer, f"lookup of {topic} at {url}")
        if refused is not None:
            raise refused
        found = answer.lookupTopicResponse
        if found.response == pb.CommandLookupTopicResponse.Failed:
            raise PeerRefused(f"lookup of {topic} at {url} failed")
        if found.response == pb.CommandLookupTopicResponse.Connect:
            return found.brokerServiceUrl or url
        url, authoritative = found.brokerServiceUrl, found.authoritative
    raise PeerRefused(f"lookup of {topic} was redirected more than {MAX_REDIRECTS} times")
