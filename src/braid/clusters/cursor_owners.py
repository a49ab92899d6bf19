"""Who owns a cursor among several ``braid broker`` processes, and how a PROMOTE reaches that
broker (ADR 0061): the broker's side of :mod:`braid.clusters.cursor_promotion`.

* :class:`BundleCursorOwners` maps a managed ledger (``tenant/ns/<domain>/<local name>``) back to
  its topic and reads the owner of the topic's namespace bundle from the ownership node
  (:mod:`braid.broker.ownership`) without ever taking the bundle: *here* when this broker holds
  the node, *elsewhere* (the owner's service URL) when another broker does, *nobody* when no node
  exists. A managed ledger whose name is not a topic's is written by this broker only: *here*.
* :class:`InternalPromoteForwarder` posts the request to the owner's internal listener
  (:class:`~braid.scalable.segment_routing.InternalApiClient`: the cluster's broker secret,
  typed errors: 409 -> ``ConflictError``, 503 or unreachable -> ``ServiceNotReady``).
"""

from __future__ import annotations

from braid.broker.ownership import BundleOwnership
from braid.clusters.cursor_promotion import OWNED_HERE, CursorOwner, OwnerKind, PromoteRequest
from braid.core.errors import InvalidInputError
from braid.core.names import TopicName
from braid.scalable.segment_routing import InternalApiClient

#: The internal listener's PROMOTE endpoint, under ``/internal/v1``.
PROMOTE_CURSOR_PATH = "/bookie-clusters/promote-cursor"


def topic_of_managed_ledger(name: str) -> TopicName | None:
    """The topic whose managed ledger is ``name`` (``None`` if it is not a topic's)."""
    tenant, _, rest = name.partition("/")
    namespace, _, rest = rest.partition("/")
    domain, _, local = rest.partition("/")
    try:
        return TopicName.parse(f"{domain}://{tenant}/{namespace}/{local}")
    except InvalidInputError:
        return None


class BundleCursorOwners:
    """:class:`~braid.clusters.cursor_promotion.CursorOwners` from bundle ownership."""

    def __init__(self, ownership: BundleOwnership) -> None:
        self._ownership = ownership

    async def owner_of(self, managed_ledger: str) -> CursorOwner:
        topic = topic_of_managed_ledger(managed_ledger)
        if topic is None:
            return OWNED_HERE
        bundle = await self._ownership.bundle_of(topic)
        if self._ownership.holds(bundle):
            return OWNED_HERE
        owner = await self._ownership.owner(bundle)
        if owner is None:
            return CursorOwner(OwnerKind.NOBODY)
        # Even a node naming this broker that it does not hold (its session was lost) is not
        # one to write behind: its answer (503) makes the orchestrator look again.
        return CursorOwner(OwnerKind.ELSEWHERE, owner.native_url)

    async def held_here(self, managed_ledger: str) -> bool:
        topic = topic_of_managed_ledger(managed_ledger)
        if topic is None:
            return True
        return self._ownership.holds(await self._ownership.bundle_of(topic))


class InternalPromoteForwarder:
    """:class:`~braid.clusters.cursor_promotion.PromoteForwarder` over internal listeners."""

    def __init__(self, internal: InternalApiClient) -> None:
        self._internal = internal

    async def forward(self, service_url: str, request: PromoteRequest) -> None:
        await self._internal.call(service_url, "POST", PROMOTE_CURSOR_PATH, body=request.to_json())


__all__ = [
    "PROMOTE_CURSOR_PATH",
    "BundleCursorOwners",
    "InternalPromoteForwarder",
    "topic_of_managed_ledger",
]
