"""DAG-watch sessions (PIP-468 ``DagWatchSession``) and namespace watches
(``CommandWatchScalableTopics``): ``docs/protocol.md#dag-watch`` and ``#namespace-watch``.

Any broker serves them: a session reads the layout from the metadata store, resolves the broker of
each **active** segment and the controller leader's URL, and sends the whole DAG in
``CommandScalableTopicUpdate``; afterwards it pushes the DAG again on every layout change it is
told about (:meth:`DagWatchSession.push`). Epochs only increase within a session: a
notification that raced an older read never produces a push with an epoch the client already has.

A ``persistent://`` name resolves to a synthetic single-segment DAG whose one segment carries
``legacy_topic_name`` (``docs/protocol.md#feature-gating``): the migration bridge, so one client
code path serves both kinds of topic.

Namespace watches send a snapshot of the namespace's scalable topics (optionally filtered by topic
properties, AND semantics), then diffs (``removed`` before ``added``). ``current_hash`` (CRC32C
over the sorted names, as ``CommandGetTopicsOfNamespace``) lets a reconnecting client skip an
unchanged snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

import crc32c

from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.protocol.dag import ScalableTopicDag
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class DagWatchTransport(Protocol):
    """The connection a DAG-watch or namespace-watch session pushes to."""

    @property
    def closed(self) -> bool: ...

    def send_dag_update(self, session_id: int, dag: pb.ScalableTopicDAG, resolved: str) -> None:
        """Send ``CommandScalableTopicUpdate`` with a DAG."""
        ...

    def send_topics_update(
        self,
        watch_id: int,
        *,
        snapshot: list[str] | None = None,
        added: list[str] | None = None,
        removed: list[str] | None = None,
    ) -> None:
        """Send ``CommandWatchScalableTopicsUpdate``."""
        ...


def layout_to_dag(
    layout: SegmentLayout,
    segment_brokers: Mapping[int, str],
    controller_url: str | None,
    *,
    segment_brokers_tls: Mapping[int, str] | None = None,
    controller_url_tls: str | None = None,
) -> pb.ScalableTopicDAG:
    """The wire form of a layout; ``segment_brokers`` lists the brokers of active segments
    (``*_tls``: the ``pulsar+ssl://`` URLs of those with a TLS listener)."""
    splits = layout.entry_bucket_splits
    return ScalableTopicDag.of_layout(
        layout,
        segment_brokers=segment_brokers,
        controller_broker_url=controller_url,
        segment_brokers_tls=segment_brokers_tls,
        controller_broker_url_tls=controller_url_tls,
        # PIP-486: every segment advertises its bucket boundaries (none with one bucket).
        entry_bucket_splits={sid: splits for sid in layout.segments} if splits else None,
    ).to_proto()


def legacy_dag(
    persistent_topic: str,
    broker_url: str,
    created_at_ms: int = 0,
    broker_url_tls: str | None = None,
) -> pb.ScalableTopicDAG:
    """The synthetic one-segment DAG of a ``persistent://`` topic (the migration bridge)."""
    return ScalableTopicDag.of_layout(
        SegmentLayout.initial(1, created_at_ms),
        segment_brokers={0: broker_url},
        segment_brokers_tls={0: broker_url_tls} if broker_url_tls else None,
        legacy_topic_names={0: persistent_topic},
    ).to_proto()


class DagWatchSession:
    """One client's watch of one topic's layout."""

    def __init__(
        self, session_id: int, topic: TopicName, resolved_name: str, transport: DagWatchTransport
    ) -> None:
        self.session_id = session_id
        self.topic = topic
        self.resolved_name = resolved_name
        self.transport = transport
        self.last_epoch: int | None = None
        self.closed = False

    def push(self, dag: pb.ScalableTopicDAG) -> bool:
        """Send ``dag`` unless the session is closed or already has this epoch or a newer one."""
        if self.closed or self.transport.closed:
            return False
        if self.last_epoch is not None and dag.epoch <= self.last_epoch:
            return False
        self.last_epoch = dag.epoch
        self.transport.send_dag_update(self.session_id, dag, self.resolved_name)
        return True

    def close(self) -> None:
        self.closed = True


def topics_hash(names: Iterable[str]) -> str:
    """CRC32C over the sorted names, as Pulsar's ``TopicList.calculateHash``."""
    value = 0
    for name in sorted(names):
        value = crc32c.crc32c(name.encode(), value)
    return str(value & 0xFFFFFFFF)


class NamespaceWatchSession:
    """One client's watch of a namespace's scalable-topic set (snapshot, then diffs)."""

    def __init__(
        self,
        watch_id: int,
        tenant: str,
        namespace: str,
        property_filters: Mapping[str, str],
        transport: DagWatchTransport,
    ) -> None:
        self.watch_id = watch_id
        self.tenant = tenant
        self.namespace = namespace
        self.property_filters = dict(property_filters)
        self.transport = transport
        self.current: set[str] | None = None
        self.closed = False

    def matches(self, layout: SegmentLayout) -> bool:
        """Whether a topic with this layout's properties belongs to the set (AND of filters)."""
        return all(layout.properties.get(k) == v for k, v in self.property_filters.items())

    def publish(self, names: set[str], client_hash: str | None = None) -> None:
        """Send the first snapshot, or the diff against what the client has."""
        if self.closed or self.transport.closed:
            return
        if self.current is None:
            self.current = set(names)
            if client_hash is not None and client_hash == topics_hash(names):
                return  # the client's set is current: no snapshot needed
            self.transport.send_topics_update(self.watch_id, snapshot=sorted(names))
            return
        removed = sorted(self.current - names)
        added = sorted(names - self.current)
        if not removed and not added:
            return
        self.current = set(names)
        self.transport.send_topics_update(self.watch_id, added=added, removed=removed)

    def close(self) -> None:
        self.closed = True


__all__ = [
    "DagWatchSession",
    "DagWatchTransport",
    "NamespaceWatchSession",
    "layout_to_dag",
    "legacy_dag",
    "topics_hash",
]
