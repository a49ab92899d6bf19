"""How the broker names and stores a topic: the names it serves on the classic path and the
managed ledger behind each topic.

Invariants: every topic maps to exactly one managed ledger, ``tenant/ns/<domain>/<local name>``
(Pulsar's naming), so two brokers that load the same topic open the same ledger and fencing
decides between them; ``topic://`` (scalable) names never reach the classic path - their
segments (``segment://``) do.
"""

from __future__ import annotations

import dataclasses

from braid.broker.errors import InvalidTopicName
from braid.core import names
from braid.core.names import TopicDomain, TopicName
from braid.ledger.api import ManagedLedgerConfig

#: A segment cursor's first snapshots go into its metadata node: most are written a few times
#: in their life, the last one being the acknowledgment that drains the segment (ADR 0043).
SEGMENT_CURSOR_NODE_SNAPSHOTS = 4


def managed_ledger_name(topic: TopicName) -> str:
    """``tenant/ns/<domain>/<local name>``: the managed ledger that backs ``topic``."""
    return f"{topic.tenant}/{topic.namespace}/{topic.domain.value}/{topic.local_name}"


def ledger_config_for(topic: TopicName, config: ManagedLedgerConfig) -> ManagedLedgerConfig:
    """``config`` as the managed ledger of ``topic`` uses it (segment topics keep their cursors'
    first snapshots in the cursor nodes)."""
    if topic.domain is TopicDomain.SEGMENT:
        return dataclasses.replace(config, cursor_node_snapshots=SEGMENT_CURSOR_NODE_SNAPSHOTS)
    return config


def parse_topic_name(name: str) -> TopicName:
    """Parse a topic name this broker serves on the classic (v4) path.

    Raises:
        InvalidTopicName: malformed, or a ``topic://`` (scalable) name, which needs the
            scalable-topic protocol rather than a plain producer/consumer.
    """
    try:
        topic = TopicName.parse(name)
    except names.InvalidTopicName as exc:
        raise InvalidTopicName(str(exc)) from exc
    if topic.domain is TopicDomain.TOPIC:
        raise InvalidTopicName(
            f"{name} is a scalable topic: a scalable-topics client resolves it with the "
            "scalable-topic lookup (CommandScalableTopicLookup) and produces to its segment:// "
            "topics; plain Pulsar clients cannot use topic:// names"
        )
    return topic


__all__ = [
    "SEGMENT_CURSOR_NODE_SNAPSHOTS",
    "ledger_config_for",
    "managed_ledger_name",
    "parse_topic_name",
]
