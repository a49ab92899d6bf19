"""The load manager of a ``braid broker``: placement of unowned bundles by the leader, load
shedding, bundle splits, and graceful unloads (ADR 0050).

**Placement** (:meth:`LoadManager.candidate`, the ownership's :class:`~braid.broker.ownership.
Placement`): a lookup for a bundle nobody owns is answered, on any broker, from the bundle's
*assignment* node ``/loadbalance/assignments/{tenant}/{ns}/{range}`` (``{"broker", "time"}``) when
a fresh one (younger than :data:`ASSIGNMENT_TTL_S`) names a live broker. Otherwise the leader
broker decides: on the leader, :func:`~braid.broker.load_placement.least_loaded` (Pulsar's
``LeastLongTermMessageRate``) over the live brokers' reports picks the broker, which is written
as the assignment (compare-and-swap, so two deciders agree on the first write) and answered with
an authoritative redirect; a non-leader answers a non-authoritative redirect *to the leader*
(Pulsar's centralised load manager does the same), which decides. Without a leader (an election
in progress), or with ``loadBalancerEnabled=false``, the broker falls back to rendezvous hashing -
every broker computes the same answer, so lookups never wait. The broker that takes the bundle
deletes its assignment.

**The leader's round** (every ``loadBalancerSheddingIntervalMinutes``): read every report;
:class:`~braid.broker.load_shedding.ThresholdShedder` picks bundles to move and each goes to the
least-loaded *other* broker; :class:`~braid.broker.load_placement.BundleSplitDecider` picks hot
bundles to split. Both are carried out by the bundle's owner: directly when the leader owns it,
else through the owner's admin API (``PUT .../{bundle}/unload?destinationBroker=``,
``PUT .../{bundle}/split?unload=``), over HTTPS at its ``webServiceUrlTls`` when TLS is
configured here (ADR 0066).

**Unload** (:meth:`LoadManager.unload`, the owner's side): choose the destination (given, or the
least-loaded other broker), write it as the bundle's assignment, mark the ownership node
``disabled`` (the broker stops serving the bundle, lookups send clients to the destination), close
the bundle's topics - their producers and consumers get CLOSE_PRODUCER / CLOSE_CONSUMER naming the
destination (``assignedBrokerServiceUrl``) - then delete the ownership node. The destination waits
for that deletion before serving (bounded), so clients move without an error.

**Split** (:meth:`LoadManager.split`, the owner's side, Pulsar's ``splitAndOwnBundle``): take the
two halves' ownership nodes, then compare-and-swap the namespace policies' ``bundles`` (refused if
they changed since read), then delete the parent's node; with ``unload`` the halves are unloaded.
At no moment may two brokers serve overlapping ranges (see :mod:`braid.broker.ownership`).

**Hand-over on SIGTERM** (:meth:`LoadManager.hand_over`): take no new bundle, then unload every
owned bundle to the other brokers within ``brokerShutdownTimeoutMs``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import TYPE_CHECKING

import httpx

from braid.broker.broker_registry import BrokerInfo, BrokerRegistry
from braid.broker.bundles import InvalidBundles, NamespaceBundle, NamespaceBundles
from braid.broker.cluster_tls import PeerTls, peer_admin_url, peer_client
from braid.broker.load_config import LoadBalancerSettings
from braid.broker.load_data import LocalBrokerData
from braid.broker.load_placement import BundleSplitDecider, least_loaded, namespace_of
from braid.broker.load_report import LoadReporter, TopicSample
from braid.broker.load_shedding import ThresholdShedder, weights_of
from braid.broker.ownership import (
    AssignedBroker,
    BundleOwnership,
    Candidate,
    NotOwner,
    RendezvousPlacement,
    rendezvous_score,
)
from braid.broker.resources import NamespacePolicies
from braid.clock import Clock
from braid.core.errors import ConflictError, InvalidInputError
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.security.credentials import ClientCredentials

if TYPE_CHECKING:
    from braid.broker.service import BrokerService

log = logging.getLogger(__name__)

#: Root of the leader's (and unloaders') assignments of unowned bundles.
ASSIGNMENTS_ROOT = "/loadbalance/assignments"
#: An assignment older than this is ignored (its broker never took the bundle).
ASSIGNMENT_TTL_S = 60.0


class UnknownBroker(InvalidInputError):
    """``destinationBroker`` names no live broker."""


class BundleSplitConflict(ConflictError):
    """The namespace's bundles changed while splitting (split again with the new ones)."""


def assignment_path(bundle: NamespaceBundle) -> str:
    return f"{ASSIGNMENTS_ROOT}/{bundle.namespace}/{bundle.range_name}"


def parse_bundle(name: str) -> NamespaceBundle:
    """``tenant/ns/0xLO_0xHI`` -> the bundle."""
    namespace, _, range_name = name.rpartition("/")
    return NamespaceBundle.parse(namespace, range_name)


class LoadManager:
    """One broker's load manager (module docstring)."""

    def __init__(
        self,
        service: BrokerService,
        registry: BrokerRegistry,
        ownership: BundleOwnership,
        store: MetadataStore,
        settings: LoadBalancerSettings,
        clock: Clock,
        *,
        credentials: ClientCredentials | None = None,
        tls: PeerTls | None = None,
    ) -> None:
        """``credentials``: what this broker presents to the others' admin API when the leader
        sheds or splits their bundles (``brokerClientAuthentication*``; needed when they
        authenticate); ``tls``: how it reaches them (their ``webServiceUrlTls`` when TLS is
        configured here, ADR 0066)."""
        self._service = service
        self._credentials = credentials
        self._tls = tls
        self._registry = registry
        self._ownership = ownership
        self._store = store
        self.settings = settings
        self._clock = clock
        self._fallback = RendezvousPlacement(registry)
        self.shedder = ThresholdShedder(settings)
        self.splitter = BundleSplitDecider(settings)
        #: Bundle name -> when the leader last shed it (the grace period).
        self.recently_unloaded: dict[str, float] = {}
        #: Assignments this broker made that the chosen broker's load report does not list yet:
        #: bundle -> (broker id, when) - counted by placement so a burst of lookups spreads.
        self._pending: dict[NamespaceBundle, tuple[str, int]] = {}
        self.reporter = LoadReporter(
            settings,
            clock,
            topics=self._topic_samples,
            owned=lambda: ownership.owned,
            publish=lambda data: registry.publish_load(data.to_json()),
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        ownership.placement = self
        ownership.on_acquired = self._on_acquired

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.ensure_future(self.reporter.run()),
            asyncio.ensure_future(self._leader_loop()),
        ]

    async def close(self) -> None:
        for task in [*self._tasks, *self._background]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)
        self._tasks = []

    def _topic_samples(self) -> list[TopicSample]:
        samples = []
        for name, topic in self._service.topics.items():
            c = topic.counters
            consumers = sum(len(s.consumers) for s in topic.subscriptions.values())
            samples.append(
                TopicSample(
                    name,
                    c.messages_in,
                    c.bytes_in,
                    c.messages_out,
                    c.bytes_out,
                    len(topic.producers),
                    consumers,
                )
            )
        return samples

    # -- placement ------------------------------------------------------------------------------

    async def reports(self) -> dict[str, tuple[BrokerInfo, LocalBrokerData]]:
        """Every live broker's registry entry and latest load report."""
        nodes = await self._registry.nodes()
        return {bid: (info, LocalBrokerData.decode(raw)) for bid, (info, raw) in nodes.items()}

    def choose(
        self,
        reports: dict[str, tuple[BrokerInfo, LocalBrokerData]],
        bundle: NamespaceBundle,
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> BrokerInfo | None:
        """The least-loaded live broker outside ``exclude`` for ``bundle``; brokers equally
        loaded are told apart by their rendezvous score for the bundle (Pulsar picks at random
        among them: either way, a run of bundles placed before any report changes spreads)."""
        # An assignment stops counting as pending once its broker's report lists the bundle
        # (counted there from then on), the broker is gone, or the assignment expired. Not when
        # the broker takes the bundle: its report lists it only at the next reporting interval.
        expired = self._clock.now_ms() - int(ASSIGNMENT_TTL_S * 1000)
        for pending_bundle, (broker, since) in list(self._pending.items()):
            gone = broker not in reports or since < expired
            if gone or str(pending_bundle) in reports[broker][1].bundle_stats:
                del self._pending[pending_bundle]
        pending: dict[str, int] = {}
        for broker, _ in self._pending.values():
            pending[broker] = pending.get(broker, 0) + 1
        chosen = least_loaded(
            (b for b in reports if b not in exclude),
            {b: data for b, (_, data) in reports.items()},
            weights_of(self.settings),
            overloaded_threshold_percentage=self.settings.broker_overloaded_threshold_percentage,
            pending=pending,
            tie_break=lambda broker: -rendezvous_score(bundle, broker),
        )
        return None if chosen is None else reports[chosen][0]

    def _count_pending(self, bundle: NamespaceBundle, broker: str) -> None:
        self._pending[bundle] = (broker, self._clock.now_ms())

    async def candidate(self, bundle: NamespaceBundle) -> Candidate | None:
        """Where a lookup for the unowned ``bundle`` goes (module docstring)."""
        if not self.settings.enabled:
            return await self._fallback.candidate(bundle)
        reports = await self.reports()
        assigned = await self._assignment(bundle)
        if assigned is not None and assigned in reports:
            return Candidate(reports[assigned][0])
        if self._registry.is_leader:
            chosen = self.choose(reports, bundle)
            if chosen is None:
                return None
            # Counted at once, before the record is written: lookups of other bundles decided
            # meanwhile (a client opening many partitions at once) see it and spread.
            self._count_pending(bundle, chosen.broker_id)
            recorded = await self._assign(bundle, chosen.broker_id)
            if recorded not in reports:  # a fresh record naming a broker gone since: replace it
                recorded = await self._assign(bundle, chosen.broker_id, force=True)
            self._count_pending(bundle, recorded)
            return Candidate(reports[recorded][0])
        leader = await self._registry.leader()
        if leader is not None and leader.get("brokerId") in reports:
            return Candidate(reports[leader["brokerId"]][0], authoritative=False)
        return await self._fallback.candidate(bundle)

    async def _assignment(self, bundle: NamespaceBundle) -> str | None:
        got = await self._store.get(assignment_path(bundle))
        if got is None:
            return None
        try:
            doc = json.loads(got[0])
            broker, at = str(doc["broker"]), int(doc["time"])
        except (ValueError, KeyError, TypeError):
            return None
        fresh = self._clock.now_ms() - at < ASSIGNMENT_TTL_S * 1000
        return broker if fresh else None

    async def _assign(self, bundle: NamespaceBundle, broker: str, *, force: bool = False) -> str:
        """Record ``broker`` as the bundle's next owner; returns the recorded one (another
        decider's, if it wrote first and ``force`` is off)."""
        path = assignment_path(bundle)
        value = json.dumps({"broker": broker, "time": self._clock.now_ms()}).encode()
        got = await self._store.get(path)
        if got is not None and not force:
            current = await self._assignment(bundle)
            if current is not None:
                return current
        try:
            await self._store.put(path, value, None if force else (got[1].version if got else -1))
        except BadVersion:
            current = await self._assignment(bundle)
            if current is not None:
                return current
            await self._store.put(path, value)
        self._count_pending(bundle, broker)
        return broker

    def _on_acquired(self, bundle: NamespaceBundle) -> None:
        # The assignment has done its job; the pending count stays until the report lists it.
        task = asyncio.ensure_future(self._forget_assignment(bundle))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _forget_assignment(self, bundle: NamespaceBundle) -> None:
        try:
            await self._store.delete(assignment_path(bundle))
        except NodeNotFound:
            pass
        except Exception as exc:
            log.info("could not delete the assignment of %s: %s", bundle, exc)

    # -- unload, split, hand-over (the owner's side) --------------------------------------------

    async def unload(
        self, bundle: NamespaceBundle, destination: str | None = None, *, timeout_s: float = 30.0
    ) -> str | None:
        """Unload an owned bundle, its clients sent to ``destination`` (a broker id) or the
        least-loaded other broker; returns the destination (``None``: no other broker).

        Raises:
            NotOwner: this broker does not own ``bundle``.
            UnknownBroker: ``destination`` is not a live broker.
        """
        if not self._ownership.owns(bundle):
            raise NotOwner(f"this broker does not own namespace bundle {bundle}")
        reports = await self.reports()
        mine = self._mine(reports)
        if destination is not None and destination not in reports:
            raise UnknownBroker(
                f"destinationBroker {destination!r} is not a live broker "
                f"(live: {', '.join(sorted(reports))})"
            )
        target = (
            reports[destination][0] if destination else self.choose(reports, bundle, exclude=mine)
        )
        if target is not None and target.broker_id in mine:
            target = None
        if target is not None:
            await self._assign(bundle, target.broker_id, force=True)
        if not await self._ownership.begin_unload(bundle):
            return None
        # Clients of brokers with advertisedListeners may reach the others by another listener's
        # address: they get no URL and look the topic up again with their listener.
        assigned = None
        if target is not None and not self._service.config.advertised_listeners:
            assigned = AssignedBroker(target.service_url, target.service_url_tls)
        closing = self._service.unload_bundle(bundle, assigned)
        if closing:
            _, slow = await asyncio.wait(closing, timeout=timeout_s)
            if slow:
                log.warning("%d topics of %s did not close in %.0fs", len(slow), bundle, timeout_s)
        await self._ownership.release(bundle)
        where = target.broker_id if target else "any broker"
        log.info("unloaded bundle %s (%d topics) to %s", bundle, len(closing), where)
        return target.broker_id if target else None

    async def namespace_bundles(self, namespace: str) -> NamespaceBundles:
        tenant, _, local = namespace.partition("/")
        policies = await self._service.resources.get_namespace_policies(tenant, local)
        return NamespaceBundles.from_policies(
            namespace, policies.to_json(), self._service.config.default_number_of_namespace_bundles
        )

    async def split(self, bundle: NamespaceBundle, *, unload: bool) -> NamespaceBundles:
        """Split an owned bundle in the middle (module docstring); returns the new bundles.

        Raises:
            NotOwner: this broker does not own ``bundle``.
            InvalidBundles: the bundle is not one of the namespace's, or too small to split.
            BundleSplitConflict: the namespace's bundles changed meanwhile.
        """
        if not self._ownership.owns(bundle):
            raise NotOwner(f"this broker does not own namespace bundle {bundle}")
        before = await self.namespace_bundles(bundle.namespace)
        after = before.split(bundle)
        children = [b for b in after.bundles if b not in before.bundles]
        taken = [c for c in children if await self._ownership.acquire_new(c)]
        if len(taken) != len(children):
            for child in taken:
                await self._ownership.release(child)
            raise BundleSplitConflict(f"a half of {bundle} is owned already; try again")

        def mutate(policies: NamespacePolicies) -> NamespacePolicies:
            current = NamespaceBundles.from_policies(
                bundle.namespace,
                policies.to_json(),
                self._service.config.default_number_of_namespace_bundles,
            )
            if current.boundaries != before.boundaries:
                raise BundleSplitConflict(
                    f"the bundles of {bundle.namespace} changed while splitting {bundle}"
                )
            return dataclasses.replace(
                policies, extra={**policies.extra, "bundles": after.to_json()}
            )

        tenant, _, local = bundle.namespace.partition("/")
        try:
            await self._service.resources.update_namespace_policies(tenant, local, mutate)
        except BaseException:
            for child in taken:
                await self._ownership.release(child)
            raise
        await self._ownership.release(bundle)
        log.info("split bundle %s into %s", bundle, ", ".join(c.range_name for c in children))
        if unload:
            for child in children:
                try:
                    await self.unload(child)
                except NotOwner:
                    pass
        return after

    async def hand_over(self) -> int:
        """SIGTERM: take no new bundle and unload every owned one to the other brokers within
        ``brokerShutdownTimeoutMs``; returns how many were handed over."""
        self._ownership.stop_acquiring()
        owned = self._ownership.owned
        budget = self.settings.broker_shutdown_timeout_ms / 1000.0
        if not owned:
            return 0
        log.info("handing %d bundles over before stopping (at most %.0fs)", len(owned), budget)
        reports = await self.reports()
        mine = self._mine(reports)
        targets: dict[NamespaceBundle, str | None] = {}
        for bundle in owned:
            target = self.choose(reports, bundle, exclude=mine)
            targets[bundle] = None if target is None else target.broker_id
            if target is not None:
                self._count_pending(bundle, target.broker_id)  # spreads the next choices
        unloads = [self.unload(b, t, timeout_s=max(1.0, budget / 2)) for b, t in targets.items()]
        try:
            async with asyncio.timeout(budget):
                results = await asyncio.gather(*unloads, return_exceptions=True)
        except TimeoutError:
            log.warning("the hand-over did not finish in %.0fs; stopping anyway", budget)
            return 0
        failed = [r for r in results if isinstance(r, BaseException)]
        for error in failed:
            log.warning("handing a bundle over failed: %s", error)
        return len(results) - len(failed)

    def _mine(self, reports: dict[str, tuple[BrokerInfo, LocalBrokerData]]) -> set[str]:
        me = self._ownership.me.native_url
        return {b for b, (info, _) in reports.items() if info.service_url == me}

    # -- the leader's round ---------------------------------------------------------------------

    async def _leader_loop(self) -> None:
        while True:
            await self._clock.sleep(self.settings.shedding_interval_s)
            if not (self.settings.enabled and self._registry.is_leader):
                continue
            try:
                await self.leader_round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("load manager round failed: %s", exc)

    async def leader_round(self) -> None:
        """One round of shedding and splitting (the leader's)."""
        reports = await self.reports()
        now = self._clock.monotonic()
        grace = self.settings.shedding_grace_period_s
        self.recently_unloaded = {
            b: t for b, t in self.recently_unloaded.items() if now - t < grace
        }
        if self.settings.shedding_enabled:
            data = {b: d for b, (_, d) in reports.items()}
            for decision in self.shedder.find_bundles_for_unloading(
                data, self.recently_unloaded, now
            ):
                shed = parse_bundle(decision.bundle)
                target = self.choose(reports, shed, exclude={decision.broker})
                if target is None:
                    continue
                log.info(
                    "shedding %s from %s to %s: %s",
                    decision.bundle,
                    decision.broker,
                    target.broker_id,
                    decision.reason,
                )
                self.recently_unloaded[decision.bundle] = now
                # Counted as the target's from now on: the round's next choices spread.
                self._count_pending(shed, target.broker_id)
                await self._on_owner(
                    reports[decision.broker][0],
                    decision.bundle,
                    f"unload?destinationBroker={target.broker_id}",
                )
        if self.settings.auto_bundle_split_enabled:
            await self._split_round(reports)

    async def _split_round(self, reports: dict[str, tuple[BrokerInfo, LocalBrokerData]]) -> None:
        counts: dict[str, int] = {}
        for _, report in reports.values():
            for name in report.bundle_stats:
                namespace = namespace_of(name)
                if namespace not in counts:
                    try:
                        counts[namespace] = len((await self.namespace_bundles(namespace)).bundles)
                    except (InvalidBundles, InvalidInputError):
                        counts[namespace] = self.settings.namespace_maximum_bundles
        data = {b: d for b, (_, d) in reports.items()}
        for name, reason in self.splitter.find_bundles_to_split(data, counts):
            owner = next((info for info, d in reports.values() if name in d.bundle_stats), None)
            if owner is None:
                continue
            log.info("splitting bundle %s: %s", name, reason)
            unload = str(self.settings.auto_unload_split_bundles_enabled).lower()
            await self._on_owner(owner, name, f"split?unload={unload}")

    async def _on_owner(self, owner: BrokerInfo, bundle_name: str, action: str) -> None:
        """Carry ``action`` (``unload?...`` / ``split?...``) out on the bundle's owner."""
        bundle = parse_bundle(bundle_name)
        if owner.service_url == self._ownership.me.native_url:
            verb, _, query = action.partition("?")
            arg = query.partition("=")[2]
            if verb == "unload":
                await self.unload(bundle, arg or None)
            else:
                await self.split(bundle, unload=arg == "true")
            return
        tls = self._tls
        web = peer_admin_url(tls, owner.web_service_url, owner.web_service_url_tls)
        if not web:
            return
        url = f"{web}/admin/v2/namespaces/{bundle_name}/{action}"
        headers = {"Content-Type": "application/json"}
        authorization = (
            self._credentials.http_authorization() if self._credentials is not None else None
        )
        if authorization is not None:
            headers["Authorization"] = authorization
        try:
            async with peer_client(tls, web, timeout_s=60.0) as http:
                # A redirect names the new owner's plain URL: followed only without TLS.
                response = await http.put(url, headers=headers, follow_redirects=tls is None)
        except httpx.HTTPError as exc:
            if tls is not None:
                tls.failed(owner.service_url, exc)
            raise
        if tls is not None:
            tls.succeeded(owner.service_url)
        if response.status_code >= 300:
            log.warning(
                "%s on %s: HTTP %s %s",
                action,
                owner.broker_id,
                response.status_code,
                response.text[:200],
            )


__all__ = [
    "ASSIGNMENTS_ROOT",
    "ASSIGNMENT_TTL_S",
    "BundleSplitConflict",
    "LoadManager",
    "UnknownBroker",
    "assignment_path",
    "parse_bundle",
]
