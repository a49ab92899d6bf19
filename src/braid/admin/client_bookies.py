"""``AdminClient.bookies``: the ``/admin/v2/bookies`` group of :mod:`braid.admin.client` (the
home storage cluster's bookies and their decommissioning)."""

from __future__ import annotations

from typing import Any

from braid.admin.client_transport import _Http, _q
from braid.core.errors import InvalidInputError


class Bookies:
    """``/admin/v2/bookies``: the available bookies, under-replicated ledgers, decommission."""

    _ROOT = "/admin/v2/bookies"

    def __init__(self, http: _Http) -> None:
        self._http = http

    def under_replicated(self) -> list[int]:
        """Ledgers marked under-replicated."""
        result: dict[str, Any] = self._http.call("GET", f"{self._ROOT}/underreplicated")
        ledgers: list[int] = result["ledgers"]
        return ledgers

    def _path(self, bookie_id: str) -> str:
        if not isinstance(bookie_id, str) or not bookie_id:
            raise InvalidInputError(f"a bookie id is a non-empty string, got {bookie_id!r}")
        return f"{self._ROOT}/{_q(bookie_id)}/decommission"

    def decommission(self, bookie_id: str) -> dict[str, Any]:
        """Start moving every fragment of the bookie elsewhere; returns the progress
        (``ledgersRemaining``, ``underReplicatedLedgers``, ``done``)."""
        result: dict[str, Any] = self._http.call("POST", self._path(bookie_id))
        return result

    def decommission_status(self, bookie_id: str) -> dict[str, Any]:
        """The progress of a decommission."""
        result: dict[str, Any] = self._http.call("GET", self._path(bookie_id))
        return result

    def list(self) -> list[dict[str, Any]]:
        """The available bookies (``bookieId``, ``state`` writable/readonly, ``rack``)."""
        result: dict[str, Any] = self._http.call("GET", f"{self._ROOT}/all")
        bookies: list[dict[str, Any]] = result["bookies"]
        return bookies


__all__ = ["Bookies"]
