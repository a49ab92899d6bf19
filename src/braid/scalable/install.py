"""Plug the scalable-topic layer into a running broker (what ``braid standalone`` does).

:func:`install_scalable_topics` builds the :class:`~braid.scalable.service.ScalableTopicService`
over the in-process broker (segments through :class:`~braid.scalable.segments.LocalSegmentAdmin`,
namespace policies through the broker's resources), registers the ``scalable-topics`` command
family on the broker's command registry, advertises ``supports_scalable_topics`` in CONNECTED,
routes the broker's drain events to the service, and gives it the broker's
:class:`~braid.scalable.load_reporter.SegmentLoadReporter` (PIP-483: the load of the segment
topics served here, pushed to the metadata store).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.cluster_tls import PeerTls
from braid.broker.resources import BrokerResources
from braid.broker.security_settings import broker_client_credentials
from braid.broker.service import BrokerService
from braid.clock import Clock
from braid.core.autoscale_policy import AutoScalePolicy
from braid.scalable.controller import StepHook
from braid.scalable.faults import migration_pause_hook_from_env, pause_hook_from_env
from braid.scalable.handlers import scalable_topic_commands
from braid.scalable.load_reporter import SegmentLoadReporter
from braid.scalable.migration import (
    ClassicTopics,
    LocalClassicTopics,
    MigrationExecutor,
    RoutedClassicTopics,
)
from braid.scalable.segment_routing import DrainRelay
from braid.scalable.segments import LocalSegmentAdmin, SegmentAdmin
from braid.scalable.service import (
    NamespacePolicySource,
    ScalableTopicService,
    ScalableTopicSettings,
)


class BrokerNamespaces(NamespacePolicySource):
    """Namespace existence and policies, read through the broker's resources."""

    def __init__(self, resources: BrokerResources, broker_allows_auto_creation: bool) -> None:
        self._resources = resources
        self._broker_default = broker_allows_auto_creation

    async def namespace_exists(self, tenant: str, namespace: str) -> bool:
        return await self._resources.namespace_exists(tenant, namespace)

    async def auto_topic_creation_allowed(self, tenant: str, namespace: str) -> bool:
        policies = await self._resources.get_namespace_policies(tenant, namespace)
        return policies.is_auto_topic_creation_allowed(self._broker_default)

    async def retention_minutes(self, tenant: str, namespace: str) -> int | None:
        policies = await self._resources.get_namespace_policies(tenant, namespace)
        if policies.retention is None:
            return None
        return policies.retention.retention_time_in_minutes

    async def auto_scale_override(self, tenant: str, namespace: str) -> Mapping[str, Any] | None:
        policies = await self._resources.get_namespace_policies(tenant, namespace)
        return policies.scalable_topic_auto_scale_policy


def settings_from_config(broker: BrokerService) -> ScalableTopicSettings:
    config = broker.config
    policy = AutoScalePolicy.from_broker_config(config.scalable_topic_settings)
    return ScalableTopicSettings(
        max_initial_segments=policy.max_segments,
        enabled=config.scalable_topic_enabled,
        consumer_session_grace_s=float(config.scalable_topic_consumer_session_grace_seconds),
        gc_interval_s=float(config.scalable_topic_gc_interval_seconds),
        allow_auto_topic_creation=config.allow_auto_topic_creation,
        default_retention_minutes=config.default_retention_time_in_minutes,
        auto_scale=policy,
        max_sessions_per_connection=config.scalable_topic_max_sessions_per_connection,
        entry_buckets=config.scalable_topic_entry_buckets,
    )


async def install_scalable_topics(
    broker: BrokerService,
    resources: BrokerResources,
    *,
    settings: ScalableTopicSettings | None = None,
    step_hook: StepHook | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    registry: BrokerRegistry | None = None,
    segments: SegmentAdmin | None = None,
    drain_relay: DrainRelay | None = None,
    peer_tls: PeerTls | None = None,
) -> ScalableTopicService:
    """Build the scalable-topic service over ``broker`` (already listening) and wire it in;
    the caller starts it (``await service.start(web_service_url)``) once the admin API is up.

    ``step_hook`` defaults to the ``BRAID_FAULT_PAUSE_AT`` fault point, if that is set;
    ``clock`` (grace periods, GC ticks, load reports, auto-scale ticks) defaults to the broker's.
    ``segments`` defaults to the in-process broker (``braid standalone``); ``braid broker`` gives
    its :class:`~braid.scalable.segment_routing.RoutedSegmentAdmin`, :class:`DrainRelay` and
    ``peer_tls`` (how a non-leader forwards to the controller leader's admin API).
    """
    settings = settings or settings_from_config(broker)
    if step_hook is None:
        step_hook = pause_hook_from_env(os.environ if environ is None else environ)
    clock = clock or broker.clock
    reporter = SegmentLoadReporter(
        lambda: broker.topics, broker.metadata, clock=clock, policy=settings.auto_scale
    )
    service = ScalableTopicService(
        store=broker.metadata,
        segments=segments or LocalSegmentAdmin(broker),
        namespaces=BrokerNamespaces(resources, settings.allow_auto_topic_creation),
        broker_url=broker.service_url,
        broker_url_tls=broker.service_url_tls,
        broker_client_credentials=broker_client_credentials(broker.config),
        clock=clock,
        settings=settings,
        step_hook=step_hook,
        load_reporter=reporter,
        registry=registry,
        drain_relay=drain_relay,
        peer_tls=peer_tls,
    )
    if settings.enabled:
        # Partitions of a migrated topic: on the in-process broker (``braid standalone``), or
        # on their owners through the routed segments (``braid broker``, ADR 0063).
        classic: ClassicTopics = (
            LocalClassicTopics(broker)
            if segments is None
            else RoutedClassicTopics(broker, service.segments)
        )
        service.migrations = MigrationExecutor(
            broker.metadata,
            service.resources,
            service.segments,
            classic,
            clock,
            legacy_roots_servable=True,
            phase_hook=migration_pause_hook_from_env(os.environ if environ is None else environ),
            max_segments=service.settings.max_initial_segments,
        )
        broker.commands.register(scalable_topic_commands(service, broker.lookups))
        broker.feature_flags.supports_scalable_topics = True
        broker.drain_listeners.append(service.on_subscription_drained)
        broker.creation_guards.append(service.migrations.refuse_recreating)
    return service


__all__ = ["BrokerNamespaces", "install_scalable_topics", "settings_from_config"]
