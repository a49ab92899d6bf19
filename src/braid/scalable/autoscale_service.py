"""PIP-483 on one broker: the load reporter, an auto-scaler per controller, the policy overrides.

:class:`AutoScaleService` is what the scalable-topic service holds for auto split/merge:

* the broker's :class:`~braid.scalable.load_reporter.SegmentLoadReporter` (started and closed
  with the service; absent on a control-plane-only service);
* one :class:`~braid.scalable.autoscaler.AutoScaler` per controller (:meth:`attach`), following
  the controller's leadership and consumer-membership events;
* the broker's :class:`~braid.scalable.autoscale_metrics.AutoScaleMetrics`;
* the topic-level ``autoScalePolicy`` override (validated after resolution against the namespace
  and broker levels, stored in the layout with a compare-and-swap; no new epoch);
* :meth:`describe`, which extends a topic's stats with each segment's latest load record (and
  its age), the resolved effective policy, the overrides and the last decision with its reason.
"""

from __future__ import annotations

import logging
from typing import Any

from braid.clock import Clock
from braid.core.autoscale_policy import AutoScalePolicy, InvalidAutoScalePolicy
from braid.core.layout import SegmentLayout, thaw_json
from braid.core.names import TopicName
from braid.core.segment_load import SegmentLoad
from braid.core.split_point import balanced_split_hash
from braid.metadata.api import MetadataStore
from braid.scalable.autoscale_metrics import AutoScaleMetrics
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.autoscaler import AutoScaler
from braid.scalable.controller import ScalableTopicController
from braid.scalable.load_reporter import SegmentLoadReporter
from braid.scalable.resources import ScalableTopicResources

log = logging.getLogger(__name__)


class AutoScaleService:
    """Auto split/merge on one broker."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        resources: ScalableTopicResources,
        policies: AutoScalePolicies,
        clock: Clock,
        reporter: SegmentLoadReporter | None = None,
    ) -> None:
        self._store = store
        self._resources = resources
        self.policies = policies
        self._clock = clock
        self.reporter = reporter
        self.metrics = AutoScaleMetrics()
        self._scalers: dict[str, AutoScaler] = {}
        if reporter is not None:
            reporter.set_policy_source(self.policy_of)

    async def policy_of(self, topic: TopicName) -> AutoScalePolicy:
        """The topic's effective policy (what the reporter reads its report settings from).

        Raises:
            ScalableTopicNotFound, InvalidAutoScalePolicy.
        """
        layout = (await self._resources.require_layout(topic)).layout
        return await self.policies.resolve(topic, layout)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.reporter is not None:
            self.reporter.start()

    async def close(self) -> None:
        if self.reporter is not None:
            await self.reporter.close()
        for scaler in self._scalers.values():
            scaler.stop()
        self._scalers.clear()

    # -- auto-scalers --------------------------------------------------------------------------

    def attach(self, controller: ScalableTopicController) -> AutoScaler:
        """Give ``controller`` an auto-scaler (call before it starts, so its first take-over
        starts the loop)."""
        scaler = AutoScaler(
            controller,
            store=self._store,
            resources=self._resources,
            policies=self.policies,
            clock=self._clock,
            metrics=self.metrics,
        )
        controller.leadership_listeners.append(scaler.on_leadership)
        controller.membership_listeners.append(scaler.on_membership_change)
        previous = self._scalers.get(str(controller.topic))
        if previous is not None:
            previous.stop()
        self._scalers[str(controller.topic)] = scaler
        return scaler

    def detach(self, topic: TopicName, *, deleted: bool = False) -> None:
        """The controller was released (``deleted``: the topic is gone, drop its counters)."""
        scaler = self._scalers.pop(str(topic), None)
        if scaler is not None:
            scaler.stop()
        if deleted:
            self.metrics.forget(str(topic))

    def scaler(self, topic: TopicName) -> AutoScaler | None:
        return self._scalers.get(str(topic))

    def scalers(self) -> list[AutoScaler]:
        return list(self._scalers.values())

    # -- the topic override --------------------------------------------------------------------

    async def get_topic_override(self, topic: TopicName) -> dict[str, object] | None:
        """The topic's stored ``autoScalePolicy`` (None when it has none).

        Raises:
            ScalableTopicNotFound.
        """
        layout = (await self._resources.require_layout(topic)).layout
        override = self.policies.topic(topic, layout)
        return None if override is None else override.to_json()

    async def set_topic_override(self, topic: TopicName, doc: object) -> dict[str, object]:
        """Validate (after resolution against the namespace and broker levels) and store.

        Raises:
            InvalidAutoScalePolicy (400, naming the keys), ScalableTopicNotFound.
        """
        await self._resources.require_layout(topic)
        override = await self.policies.check_topic_override(topic, doc)
        stored = override.to_json()
        await self._resources.update_layout(
            topic, lambda layout: layout.with_auto_scale_policy(stored)
        )
        log.info("auto-scale policy of %s set to %s", topic, stored)
        return stored

    async def remove_topic_override(self, topic: TopicName) -> None:
        """Drop the topic's override (the namespace's or broker's policy applies again).

        Raises:
            ScalableTopicNotFound.
        """

        def remove(layout: SegmentLayout) -> SegmentLayout:
            if layout.auto_scale_policy is None:
                return layout  # unchanged: nothing is written
            return layout.with_auto_scale_policy(None)

        await self._resources.update_layout(topic, remove)

    # -- stats ---------------------------------------------------------------------------------

    async def describe(self, topic: TopicName, stats: dict[str, Any]) -> dict[str, Any]:
        """Add auto-scale state to a topic's stats (``controller.stats()``): a ``load`` entry
        per active segment (the record, its ``modifiedAtMs``/``ageMs`` and where a split would
        cut) and an ``autoScale`` section (policy, overrides, last decision, counters)."""
        layout = (await self._resources.require_layout(topic)).layout
        now_ms = self._clock.now_ms()
        segments = stats.get("segments")
        for segment in layout.active_segments:
            found = await self._store.get(
                self._resources.segment_load_path(topic, segment.segment_id)
            )
            if found is None or not isinstance(segments, dict):
                continue
            entry = segments.get(str(segment.segment_id))
            if not isinstance(entry, dict):
                continue
            data, stat = found
            try:
                load = SegmentLoad.decode(data, stat.modified_ms)
            except InvalidAutoScalePolicy as exc:
                entry["load"] = {"error": str(exc), "modifiedAtMs": stat.modified_ms}
                continue
            record: dict[str, Any] = dict(load.to_json())
            record["modifiedAtMs"] = stat.modified_ms
            record["ageMs"] = max(0, now_ms - stat.modified_ms)
            if segment.hash_range.size >= 2:
                record["balancedSplitHash"] = balanced_split_hash(
                    segment.hash_range, load.key_hash_buckets
                )
            entry["load"] = record
        section: dict[str, Any] = {}
        try:
            section["effectivePolicy"] = (await self.policies.resolve(topic, layout)).to_json()
        except InvalidAutoScalePolicy as exc:
            section["effectivePolicy"] = None
            section["policyError"] = str(exc)
        overrides: dict[str, Any] = {}
        try:
            namespace = await self.policies.namespace(topic.tenant, topic.namespace)
            overrides["namespace"] = None if namespace is None else namespace.to_json()
        except InvalidAutoScalePolicy as exc:
            overrides["namespace"] = {"error": str(exc)}
        overrides["topic"] = (
            None if layout.auto_scale_policy is None else thaw_json(layout.auto_scale_policy)
        )
        section["overrides"] = overrides
        scaler = self._scalers.get(str(topic))
        if scaler is not None:
            section.update(scaler.stats())
        else:
            counters = self.metrics.get(str(topic))
            section["running"] = False
            section["lastDecision"] = None
            section["counters"] = None if counters is None else counters.to_json()
        stats["autoScale"] = section
        return stats


__all__ = ["AutoScaleService"]
