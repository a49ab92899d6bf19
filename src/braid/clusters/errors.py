"""The errors of storage-cluster switching, each in the :mod:`braid.core.errors` category whose HTTP
status the admin API answers with (409 for refused switches, 404 for unknown clusters)."""

from __future__ import annotations

from braid.core.errors import AlreadyExistsError, ConflictError, IllegalStateError, NotFoundError


class BookieClusterNotFound(NotFoundError):
    """No storage cluster is registered under that name."""


class ClusterUriCollision(AlreadyExistsError):
    """``register`` with a metadata-service URI (or co-located chroot) another cluster uses."""


class IdgenPrecheckFailed(ConflictError):
    """I11 does not hold: the target's ledger-id generator is not beyond the source's ids."""

    retriable = False


class SwitchRejected(IllegalStateError):
    """The switch (or rollback, cleanup, close-client) is not possible now; nothing changed."""
