"""Whether a bundle's owner still accepts connections (ADR 0067).

A broker that dies (SIGKILL, a crash, a cut link) keeps its bundles' ownership nodes until its
metadata session expires. Meanwhile a lookup that answers with the owner's address sends the
client to a port that refuses it; the client backs off (doubling) and asks again, and the first
retry after the expiry comes up to one back-off step late. Before naming another broker as a
bundle's owner, the broker answering a lookup checks that the owner's service address accepts a
TCP connection; when it does not, the lookup waits for the ownership to change instead
(:meth:`braid.broker.ownership.BundleOwnership.lookup`).

:class:`OwnerProbe` opens (and closes at once) a TCP connection to the owner's ``pulsar://``
address, bounded by ``timeout_s``: refused, unreachable or timed out is *not reachable*. A
success is remembered for ``fresh_s`` (lookups of many topics of one live owner probe it once per
period); a failure never is. The probe never fails: any error is an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

#: How long a connection attempt to the owner may take before it counts as unreachable.
PROBE_TIMEOUT_S = 1.0
#: How long a successful probe stands for the owner being reachable.
PROBE_FRESH_S = 0.5


class OwnerProbe:
    """TCP reachability of owners' service addresses, successes cached for ``fresh_s``."""

    def __init__(
        self,
        now: Callable[[], float],
        *,
        timeout_s: float = PROBE_TIMEOUT_S,
        fresh_s: float = PROBE_FRESH_S,
    ) -> None:
        self._now = now
        self.timeout_s = timeout_s
        self.fresh_s = fresh_s
        #: service URL -> when a connection to it last succeeded.
        self._reached: dict[str, float] = {}

    async def reachable(self, service_url: str) -> bool:
        """Whether ``service_url`` (``pulsar://host:port``) accepts a TCP connection now."""
        seen = self._reached.get(service_url)
        if seen is not None and self._now() - seen < self.fresh_s:
            return True
        parts = urlsplit(service_url)
        if parts.hostname is None or parts.port is None:
            return True  # no address to check: answer as before, never hold a lookup on it
        try:
            async with asyncio.timeout(self.timeout_s):
                _, writer = await asyncio.open_connection(parts.hostname, parts.port)
        except (OSError, TimeoutError) as exc:
            self._reached.pop(service_url, None)
            log.info("bundle owner %s does not accept connections: %r", service_url, exc)
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        self._reached[service_url] = self._now()
        return True


__all__ = ["PROBE_FRESH_S", "PROBE_TIMEOUT_S", "OwnerProbe"]
