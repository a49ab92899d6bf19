"""Caps on open client connections, in total and per client IP (Pulsar's ``brokerMaxConnections``
and ``brokerMaxConnectionsPerIp``).

:class:`ConnectionLimiter` is pure bookkeeping: :meth:`~ConnectionLimiter.admit` counts a new
connection in or says why it may not open, :meth:`~ConnectionLimiter.release` counts it out when it
closes. The broker asks before it builds anything for a socket, so a refused connection costs a
few bytes - an ``ERROR NotAllowedError`` naming the cap, as Pulsar sends - and the clients already
connected never notice. Refusals are counted (the broker logs them at most every few seconds: a
client retrying in a loop must not flood the log).
"""

from __future__ import annotations

from collections import Counter


class ConnectionLimiter:
    """Counts open connections against the two caps (``0`` = no cap).

    Args:
        max_connections: ``brokerMaxConnections``.
        max_connections_per_ip: ``brokerMaxConnectionsPerIp``.
    """

    def __init__(self, max_connections: int = 0, max_connections_per_ip: int = 0) -> None:
        if max_connections < 0 or max_connections_per_ip < 0:
            raise ValueError("connection caps must be 0 (none) or positive")
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self._open = 0
        self._per_ip: Counter[str] = Counter()
        #: Connections refused so far, for stats and the rate-limited log line.
        self.refused = 0
        self._next_log = 0.0

    @property
    def open_connections(self) -> int:
        return self._open

    def open_from(self, ip: str) -> int:
        """Connections open from ``ip``."""
        return self._per_ip[ip]

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip`` in; returns ``None``, or the reason it is refused
        (then nothing is counted and :meth:`release` must not be called for it)."""
        if self.max_connections and self._open >= self.max_connections:
            self.refused += 1
            return f"reached the maximum number of connections ({self.max_connections})"
        if self.max_connections_per_ip and self._per_ip[ip] >= self.max_connections_per_ip:
            self.refused += 1
            return (
                f"reached the maximum number of connections from {ip} "
                f"({self.max_connections_per_ip})"
            )
        self._open += 1
        self._per_ip[ip] += 1
        return None

    def log_due(self, now: float, interval_s: float = 10.0) -> bool:
        """Whether a refusal at ``now`` (monotonic seconds) is to be logged: at most one line per
        ``interval_s``, so a client retrying in a loop cannot flood the log."""
        if now < self._next_log:
            return False
        self._next_log = now + interval_s
        return True

    def release(self, ip: str) -> None:
        """Count an admitted connection out."""
        self._open -= 1
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]


__all__ = ["ConnectionLimiter"]
