"""Where a scalable topic's auto-scale policy comes from: broker.conf <- namespace <- topic.

PIP-483 resolves the effective policy most-specific-wins: ``broker.conf`` defaults, then the
namespace's ``scalableTopicAutoScalePolicy`` (in its ``Policies``), then the topic's
``autoScalePolicy`` (in its ``ScalableTopicMetadata``). :class:`AutoScalePolicies` reads the two
stored overrides and resolves them with :func:`braid.core.autoscale_policy.resolve_policy`, and
validates a new override the way the admin API must before storing it: the namespace's against
the broker's, the topic's after resolution against the namespace's and the broker's.

An override already stored that no longer resolves (a namespace override changed under a topic's)
raises :class:`~braid.core.autoscale_policy.InvalidAutoScalePolicy` here; the auto-scaler then
leaves the topic alone and logs why, as upstream does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from braid.core.autoscale_policy import (
    AutoScalePolicy,
    AutoScalePolicyOverride,
    InvalidAutoScalePolicy,
    resolve_policy,
)
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName

#: Reads a namespace's stored override document (``None`` when it has none).
NamespaceOverrideSource = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


def parse_override(doc: object, where: str) -> AutoScalePolicyOverride:
    """An override from its JSON document, the error naming where it is stored.

    Raises:
        InvalidAutoScalePolicy: not an object, an unknown key, or a value out of range.
    """
    try:
        return AutoScalePolicyOverride.from_json(doc)
    except InvalidAutoScalePolicy as exc:
        raise InvalidAutoScalePolicy(f"{where}: {exc}", exc.fields) from exc


class AutoScalePolicies:
    """Resolves topics' effective policies over one broker's defaults."""

    def __init__(
        self, broker: AutoScalePolicy, namespace_override: NamespaceOverrideSource
    ) -> None:
        self._broker = broker
        self._namespace_override = namespace_override

    @property
    def broker(self) -> AutoScalePolicy:
        """The ``broker.conf`` policy (PIP-483's defaults where a key is not set)."""
        return self._broker

    async def namespace(self, tenant: str, namespace: str) -> AutoScalePolicyOverride | None:
        """The namespace's stored override, parsed.

        Raises:
            InvalidAutoScalePolicy: the stored document is malformed.
        """
        doc = await self._namespace_override(tenant, namespace)
        if doc is None:
            return None
        return parse_override(doc, f"scalableTopicAutoScalePolicy of {tenant}/{namespace}")

    @staticmethod
    def topic(topic: TopicName, layout: SegmentLayout) -> AutoScalePolicyOverride | None:
        """The topic's stored override (``autoScalePolicy`` of its layout), parsed.

        Raises:
            InvalidAutoScalePolicy: the stored document is malformed.
        """
        if layout.auto_scale_policy is None:
            return None
        return parse_override(layout.auto_scale_policy, f"autoScalePolicy of {topic}")

    async def resolve(self, topic: TopicName, layout: SegmentLayout) -> AutoScalePolicy:
        """The topic's effective policy.

        Raises:
            InvalidAutoScalePolicy: an override is malformed or makes the policy inconsistent.
        """
        namespace = await self.namespace(topic.tenant, topic.namespace)
        return resolve_policy(self._broker, namespace, self.topic(topic, layout))

    def check_namespace_override(self, doc: object) -> AutoScalePolicyOverride:
        """Validate a namespace override about to be stored (against the broker's policy).

        Raises:
            InvalidAutoScalePolicy: naming the keys at fault.
        """
        override = parse_override(doc, "scalableTopicAutoScalePolicy")
        resolve_policy(self._broker, override, None)
        return override

    async def check_topic_override(self, topic: TopicName, doc: object) -> AutoScalePolicyOverride:
        """Validate a topic override about to be stored, after resolution against the topic's
        namespace override and the broker's policy.

        Raises:
            InvalidAutoScalePolicy: naming the keys at fault (and the level each came from).
        """
        override = parse_override(doc, "autoScalePolicy")
        namespace = await self.namespace(topic.tenant, topic.namespace)
        resolve_policy(self._broker, namespace, override)
        return override


__all__ = ["AutoScalePolicies", "NamespaceOverrideSource", "parse_override"]
