"""Client-wide settings and the service URL.

A service URL is ``pulsar://host:port`` or ``pulsar://h1:p1,h2:p2`` (the client tries the hosts in
order for lookups); ``pulsar+ssl://`` (default port 6651) connects over TLS, with the
:class:`~braid.client.auth.TlsOptions` of the settings. Malformed URLs raise
:class:`~braid.client.errors.InvalidServiceURLError` at client construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from braid.client.auth import Authentication, TlsOptions
from braid.client.errors import InvalidConfigurationError, InvalidServiceURLError

CLIENT_VERSION = "Braid-Python-0.1.0"
DEFAULT_PORT = 6650
DEFAULT_TLS_PORT = 6651
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+)(?::(\d{1,5}))?$")


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """One ``host:port``; ``url`` is its ``pulsar://host:port`` form (``pulsar+ssl://`` with
    ``tls``), the pool's key."""

    host: str
    port: int
    tls: bool = False

    @property
    def url(self) -> str:
        scheme = "pulsar+ssl" if self.tls else "pulsar"
        return f"{scheme}://{self.host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """Parse a single-host ``pulsar://host:port`` (as lookups and layouts return them).

    Raises:
        InvalidServiceURLError: not a single-host ``pulsar://`` URL.
    """
    addresses = parse_service_url(url)
    if len(addresses) != 1:
        raise InvalidServiceURLError(f"a broker URL names one host: {url!r}")
    return addresses[0]


def parse_service_url(url: str) -> tuple[BrokerAddress, ...]:
    """Parse a service URL into its broker addresses.

    Raises:
        InvalidServiceURLError: malformed, an unsupported scheme, or no host.
    """
    if not isinstance(url, str):
        raise InvalidServiceURLError(f"the service URL must be a string, got {url!r}")
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        raise InvalidServiceURLError(f"service URL {url!r} has no scheme (pulsar://host:port)")
    if scheme not in ("pulsar", "pulsar+ssl"):
        raise InvalidServiceURLError(f"service URL {url!r}: unknown scheme {scheme!r}")
    rest = rest.rstrip("/")
    if not rest:
        raise InvalidServiceURLError(f"service URL {url!r} names no host")
    addresses = []
    for part in rest.split(","):
        match = _HOST_PORT.match(part.strip())
        if match is None:
            raise InvalidServiceURLError(f"service URL {url!r}: {part!r} is not host[:port]")
        tls = scheme == "pulsar+ssl"
        default_port = DEFAULT_TLS_PORT if tls else DEFAULT_PORT
        port = int(match.group(2)) if match.group(2) else default_port
        if not 0 < port < 65536:
            raise InvalidServiceURLError(f"service URL {url!r}: port {port} is out of range")
        addresses.append(BrokerAddress(match.group(1).strip("[]"), port, tls))
    return tuple(addresses)


@dataclass(frozen=True)
class ClientSettings:
    """Options shared by everything a client creates (all times in seconds).

    Attributes:
        service: the brokers of the service URL, in order.
        operation_timeout: deadline of each request/response exchange (lookup, create, ...).
        connection_timeout: deadline of a TCP connect plus handshake.
        keepalive_interval: PING after this much silence; the connection is dropped after twice.
        backoff_initial / backoff_max: reconnect and retry delays.
        client_version: sent in CONNECT.
        tls: how ``pulsar+ssl://`` connections are made (trust, hostname verification).
        authentication: the credentials sent in CONNECT (``None``: none).
    """

    service: tuple[BrokerAddress, ...]
    operation_timeout: float = 30.0
    connection_timeout: float = 10.0
    keepalive_interval: float = 30.0
    backoff_initial: float = 0.1
    backoff_max: float = 5.0
    client_version: str = CLIENT_VERSION
    tls: TlsOptions = field(default_factory=TlsOptions)
    authentication: Authentication | None = None

    @property
    def uses_tls(self) -> bool:
        """Whether the service URL is ``pulsar+ssl://`` (lookups then follow TLS URLs)."""
        return any(address.tls for address in self.service)

    def __post_init__(self) -> None:
        for name in ("operation_timeout", "connection_timeout", "keepalive_interval"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise InvalidConfigurationError(f"{name} must be a positive number: {value!r}")
        if not 0 < self.backoff_initial <= self.backoff_max:
            raise InvalidConfigurationError("need 0 < backoff_initial <= backoff_max")


__all__ = [
    "CLIENT_VERSION",
    "BrokerAddress",
    "ClientSettings",
    "parse_broker_url",
    "parse_service_url",
]
