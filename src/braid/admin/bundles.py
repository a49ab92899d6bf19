"""Namespace bundles and unloading in the admin REST API (Pulsar's paths; ADR 0050).

* ``GET /admin/v2/namespaces/{tenant}/{ns}/bundles``: the namespace's ``BundlesData``
  (``{"boundaries": [...], "numBundles": n}``), from its policies or the broker's
  ``defaultNumberOfNamespaceBundles``; any broker answers.
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload[?destinationBroker=host:port]``: the
  bundle's owner unloads it - clients are sent to the destination (default: the least-loaded
  other broker). Another broker answers 307 to the owner; a bundle nobody owns is a no-op (204).
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/unload``: every owned bundle of the namespace is
  unloaded by its owner (this broker asks the others: at their ``httpUrlTls`` over HTTPS when
  this broker has TLS configured, ADR 0066; a failed call is logged and the others go on).
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/split[?unload=false]``: the owner cuts the
  bundle in two at the middle of its range (``splitAlgorithmName=range_equally_divide``, the only
  algorithm); another broker answers 307; a bundle nobody owns is taken first.
* ``PUT /admin/v2/persistent/{tenant}/{ns}/{topic}/unload``: the topic's owner closes it (the
  admin API's owner redirect brings the call there); clients reconnect, to the same owner, and
  the topic is loaded again. Not loaded: a no-op.

``braid standalone`` (no bundle ownership) has the same endpoints: an unload closes the topics of
the range (its clients reconnect to the same process), a split only rewrites the boundaries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Protocol

import httpx
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.bundles import InvalidBundles, NamespaceBundle, NamespaceBundles
from braid.broker.cluster_tls import PeerTls, peer_admin_url, peer_client
from braid.broker.errors import ServiceNotReady
from braid.broker.load_manager import BundleSplitConflict, LoadManager
from braid.broker.ownership import BundleOwnership, OwnerData, client_web_url
from braid.broker.resources import BrokerResources, NamespacePolicies
from braid.core.names import TopicName

log = logging.getLogger(__name__)

#: Pulsar's split algorithm names; Braid implements the first.
SPLIT_ALGORITHMS = ("range_equally_divide",)


class BundleService(Protocol):
    """What the bundle endpoints need from the broker (``BrokerService`` provides it)."""

    ownership: BundleOwnership | None

    @property
    def topics(self) -> Mapping[str, Any]: ...

    def unload_bundle(self, bundle: NamespaceBundle) -> Sequence[Awaitable[None]]: ...

    def unload_topic(self, topic: Any) -> Awaitable[None]: ...


def bundles_router(
    resources: BrokerResources,
    broker: BundleService,
    load_manager: Callable[[], LoadManager | None],
    *,
    default_bundles: int,
    peer_tls: PeerTls | None = None,
) -> APIRouter:
    """``peer_tls``: how this broker reaches the other brokers' admin API (``braid broker``)."""
    router = APIRouter(tags=["namespaces"])

    async def namespace_bundles(tenant: str, namespace: str) -> NamespaceBundles:
        policies = await resources.get_namespace_policies(tenant, namespace)
        return NamespaceBundles.from_policies(
            f"{tenant}/{namespace}", policies.to_json(), default_bundles
        )

    async def owner_of(bundle: NamespaceBundle) -> tuple[bool, OwnerData | None]:
        """``(owned here, the owner)``; ``(False, None)`` when nobody owns it."""
        ownership = broker.ownership
        if ownership is None or ownership.owns(bundle):
            return True, None
        return False, await ownership.owner(bundle)

    async def owner_url(bundle: NamespaceBundle, request: Request) -> tuple[bool, str | None]:
        """``(owned here, the owner's web URL)``; ``(False, None)`` when nobody owns it. The
        owner's HTTPS URL for a request that came in over HTTPS (never a downgrade)."""
        here, owner = await owner_of(bundle)
        if owner is None:
            return here, None
        https = request.url.scheme == "https"
        return here, client_web_url(owner.http_url, owner.http_url_tls, https) or None

    def redirect(request: Request, owner: str) -> RedirectResponse:
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{owner.rstrip('/')}{request.url.path}{query}", status_code=307)

    @router.get(
        "/namespaces/{tenant}/{namespace}/bundles",
        summary="The namespace's bundles: hash-range boundaries of topic names (BundlesData)",
    )
    async def get_bundles(tenant: Tenant, namespace: Namespace) -> dict[str, Any]:
        return (await namespace_bundles(tenant, namespace)).to_json()

    async def unload_here(bundle: NamespaceBundle, destination: str | None) -> None:
        manager = load_manager()
        if manager is None:
            await asyncio.gather(*broker.unload_bundle(bundle))
            return
        await manager.unload(bundle, destination)

    @router.put(
        "/namespaces/{tenant}/{namespace}/{bundle}/unload",
        status_code=204,
        summary="Unload a bundle: its owner closes its topics and clients move to another broker",
    )
    async def unload_bundle(
        request: Request,
        tenant: Tenant,
        namespace: Namespace,
        bundle: str,
        destinationBroker: Annotated[str | None, Query()] = None,
    ) -> Response:
        target = (await namespace_bundles(tenant, namespace)).bundle(bundle)
        here, owner = await owner_url(target, request)
        if not here:
            return Response(status_code=204) if owner is None else redirect(request, owner)
        await unload_here(target, destinationBroker)
        return Response(status_code=204)

    @router.put(
        "/namespaces/{tenant}/{namespace}/unload",
        status_code=204,
        summary="Unload every bundle of the namespace (each by its owner)",
    )
    async def unload_namespace(request: Request, tenant: Tenant, namespace: Namespace) -> Response:
        remote: dict[str, tuple[OwnerData, list[NamespaceBundle]]] = {}
        for target in (await namespace_bundles(tenant, namespace)).bundles:
            here, owner = await owner_of(target)
            if here:
                await unload_here(target, None)
            elif owner is not None:
                remote.setdefault(owner.native_url, (owner, []))[1].append(target)
        # The owner authorizes the caller again: pass its credentials on.
        headers = {"Content-Type": "application/json"}
        if "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        for owner, targets in remote.values():
            await _unload_on(peer_tls, owner, targets, headers)
        return Response(status_code=204)

    @router.put(
        "/namespaces/{tenant}/{namespace}/{bundle}/split",
        status_code=204,
        summary="Split a bundle in two at the middle of its hash range (its owner does it)",
    )
    async def split_bundle(
        request: Request,
        tenant: Tenant,
        namespace: Namespace,
        bundle: str,
        unload: Annotated[bool, Query()] = False,
        splitAlgorithmName: Annotated[str | None, Query()] = None,
    ) -> Response:
        if splitAlgorithmName not in (None, *SPLIT_ALGORITHMS):
            raise InvalidBundles(
                f"unsupported splitAlgorithmName {splitAlgorithmName!r}; Braid splits with "
                f"{', '.join(SPLIT_ALGORITHMS)}"
            )
        bundles = await namespace_bundles(tenant, namespace)
        target = bundles.bundle(bundle)
        manager = load_manager()
        if manager is None or broker.ownership is None:
            await _split_without_owners(resources, broker, bundles, target, unload, default_bundles)
            return Response(status_code=204)
        here, owner = await owner_url(target, request)
        if not here and owner is not None:
            return redirect(request, owner)
        if not here:
            await broker.ownership.try_acquire(target)
        await manager.split(target, unload=unload)
        return Response(status_code=204)

    @router.put(
        "/persistent/{tenant}/{namespace}/{topic}/unload",
        status_code=204,
        summary="Unload a topic: its owner closes it and its clients reconnect",
    )
    async def unload_topic(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Response:
        name = str(TopicName.parse(f"persistent://{tenant}/{namespace}/{topic}"))
        loaded = broker.topics.get(name)
        if loaded is not None:
            await broker.unload_topic(loaded)
        return Response(status_code=204)

    return router


async def _unload_on(
    tls: PeerTls | None,
    owner: OwnerData,
    targets: Sequence[NamespaceBundle],
    headers: Mapping[str, str],
) -> None:
    """Ask ``owner`` to unload ``targets`` (one HTTP client for them); failures are logged."""
    web = peer_admin_url(tls, owner.http_url or None, owner.http_url_tls or None)
    if web is None:
        return
    try:
        async with peer_client(tls, web, timeout_s=60.0) as http:
            for target in targets:
                path = f"/admin/v2/namespaces/{target.namespace}/{target.range_name}/unload"
                # A redirect names the new owner's plain URL: followed only without TLS.
                answer = await http.put(path, headers=headers, follow_redirects=tls is None)
                if answer.status_code >= 300:
                    log.warning("unloading %s on %s: HTTP %s", target, web, answer.status_code)
    except (httpx.HTTPError, ServiceNotReady) as exc:
        if tls is None or not tls.failed(owner.native_url, exc):
            log.warning("unloading bundles of %s on %s failed: %s", owner.native_url, web, exc)
        return
    if tls is not None:
        tls.succeeded(owner.native_url)


async def _split_without_owners(
    resources: BrokerResources,
    broker: BundleService,
    bundles: NamespaceBundles,
    target: NamespaceBundle,
    unload: bool,
    default_bundles: int,
) -> None:
    """A standalone's split: rewrite the boundaries (CAS, refused if they changed since read);
    with ``unload``, close the range's topics."""
    after = bundles.split(target)
    tenant, _, local = bundles.namespace.partition("/")

    def mutate(policies: NamespacePolicies) -> NamespacePolicies:
        now = NamespaceBundles.from_policies(bundles.namespace, policies.to_json(), default_bundles)
        if now.boundaries != bundles.boundaries:
            raise BundleSplitConflict(f"the bundles of {bundles.namespace} changed meanwhile")
        return dataclasses.replace(policies, extra={**policies.extra, "bundles": after.to_json()})

    await resources.update_namespace_policies(tenant, local, mutate)
    if unload:
        await asyncio.gather(*broker.unload_bundle(target))


__all__ = ["SPLIT_ALGORITHMS", "bundles_router"]
