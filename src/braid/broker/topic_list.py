"""The ``topic-list`` command family: GET_TOPICS_OF_NAMESPACE and the topic-list watch.

Regex and multi-topic consumers learn a namespace's topics from the broker:

* GET_TOPICS_OF_NAMESPACE answers the namespace's ``persistent://`` topics (partitions by their
  ``-partition-N`` names), its ``non-persistent://`` ones active on this broker, or both, as its
  ``mode`` asks (``PERSISTENT``, the default; ``NON_PERSISTENT``; ``ALL``), filtered by
  ``topics_pattern`` when the client sends one (``filtered=true``), with the list's
  ``topics_hash``; a client that already holds that hash gets ``changed=false`` and no names
  (:mod:`braid.core.topic_list` has the rules);
* WATCH_TOPIC_LIST opens a watcher for a namespace and pattern: WATCH_TOPIC_LIST_SUCCESS carries
  the matching topics and their hash, then a WATCH_TOPIC_UPDATE (new and deleted topics, new
  hash) follows every creation or deletion of a matching topic - seen through the managed-ledger
  factory's listener, so topics created by any broker sharing the metadata store count;
  WATCH_TOPIC_LIST_CLOSE (or the connection closing) ends it. CONNECTED advertises
  ``supports_topic_watchers``. A watcher follows persistent topics only (non-persistent ones have
  no creation event that other brokers see).

A watcher registers for events *before* it lists the namespace and replays what arrived while the
list was being read, so a topic created meanwhile is neither lost nor announced twice.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol

from braid.broker.errors import ServerError, to_server_error
from braid.broker.non_persistent import NonPersistentTopics
from braid.broker.registry import CommandChannel, CommandFamily, CommandHandler, CommandType
from braid.core.names import NamespaceName, TopicDomain
from braid.core.topic_list import compile_pattern, filter_topics, matches, topics_hash
from braid.ledger.api import ManagedLedgerFactory
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: Longest topics pattern accepted (Pulsar's ``subscriptionPatternMaxLength`` default).
MAX_PATTERN_LENGTH = 50


class TopicListService(Protocol):
    """What the topic-list commands need from the broker (``BrokerService``)."""

    async def list_topics(self, namespace: str) -> list[str]:
        """The namespace's persistent topics (full names)."""
        ...

    async def check_namespace(self, namespace: str) -> NamespaceName:
        """Validate ``tenant/ns`` and check it exists (``TopicNotFound`` naming it if not)."""
        ...

    @property
    def non_persistent(self) -> NonPersistentTopics:
        """The non-persistent topics this broker serves now."""
        ...


#: Called with ``(topic, created)`` for every topic created or deleted in a namespace.
TopicEvent = Callable[[str, bool], None]


class TopicEvents:
    """Creations and deletions of ``persistent://`` topics, by namespace (one managed-ledger
    listener for the whole broker)."""

    def __init__(self, ml_factory: ManagedLedgerFactory) -> None:
        self._by_namespace: dict[str, set[TopicEvent]] = {}
        self._unregister = ml_factory.register_listener(self._on_ledger)

    def _on_ledger(self, ml_name: str, created: bool) -> None:
        tenant, sep, rest = ml_name.partition("/")
        namespace, sep2, rest = rest.partition("/")
        domain, sep3, local = rest.partition("/")
        if not (sep and sep2 and sep3) or domain != TopicDomain.PERSISTENT.value:
            return
        listeners = self._by_namespace.get(f"{tenant}/{namespace}")
        if not listeners:
            return
        topic = f"persistent://{tenant}/{namespace}/{local}"
        for listener in list(listeners):
            try:
                listener(topic, created)
            except Exception:
                log.exception("topic-list listener failed for %s", topic)

    def subscribe(self, namespace: str, listener: TopicEvent) -> Callable[[], None]:
        """Call ``listener`` for the namespace's topic events; returns the unsubscriber."""
        self._by_namespace.setdefault(namespace, set()).add(listener)

        def unsubscribe() -> None:
            listeners = self._by_namespace.get(namespace)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._by_namespace[namespace]

        return unsubscribe

    def close(self) -> None:
        self._unregister()
        self._by_namespace.clear()


class _Watcher:
    """One WATCH_TOPIC_LIST: the matching topics, kept current, and the updates it sends."""

    def __init__(
        self, watcher_id: int, pattern: re.Pattern[str], send: Callable[[pb.BaseCommand], None]
    ) -> None:
        self.watcher_id = watcher_id
        self._pattern = pattern
        self._send = send
        self._topics: set[str] | None = None  # None while the initial list is being read
        self._early: list[tuple[str, bool]] = []
        self.unsubscribe: Callable[[], None] = lambda: None

    def on_event(self, topic: str, created: bool) -> None:
        if not matches(topic, self._pattern):
            return
        if self._topics is None:
            self._early.append((topic, created))
            return
        if created == (topic in self._topics):
            return  # already known (created) or already gone (deleted)
        if created:
            self._topics.add(topic)
        else:
            self._topics.discard(topic)
        update = pb.CommandWatchTopicUpdate(
            watcher_id=self.watcher_id, topics_hash=topics_hash(self._topics)
        )
        (update.new_topics if created else update.deleted_topics).append(topic)
        self._send(commands.wrap(update))

    def start(self, listed: list[str]) -> list[str]:
        """Take the initial list, apply the events that came meanwhile; returns the list."""
        self._topics = set(filter_topics(listed, self._pattern))
        for topic, created in self._early:
            if created:
                self._topics.add(topic)
            else:
                self._topics.discard(topic)
        self._early.clear()
        return sorted(self._topics)


class TopicListCommands:
    """One connection's topic-list requests and watchers."""

    def __init__(
        self, channel: CommandChannel, service: TopicListService, events: TopicEvents
    ) -> None:
        self._channel = channel
        self._service = service
        self._events = events
        self._watchers: dict[int, _Watcher] = {}

    async def close(self) -> None:
        for watcher in self._watchers.values():
            watcher.unsubscribe()
        self._watchers.clear()

    def on_topics_of_namespace(self, event: CommandReceived) -> None:
        req = event.command.getTopicsOfNamespace

        async def run() -> None:
            await self._channel.authorize_namespace_topics(req.namespace)
            namespace = await self._service.check_namespace(req.namespace)
            topics: list[str] = []
            if req.mode != pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
                topics = await self._service.list_topics(str(namespace))
            if req.mode != pb.CommandGetTopicsOfNamespace.PERSISTENT:
                topics += self._service.non_persistent.names(str(namespace))
            filtered = False
            if req.HasField("topics_pattern") and len(req.topics_pattern) <= MAX_PATTERN_LENGTH:
                topics = filter_topics(topics, compile_pattern(req.topics_pattern))
                filtered = True
            digest = topics_hash(topics)
            unchanged = req.HasField("topics_hash") and req.topics_hash == digest
            self._channel.send(
                commands.topics_of_namespace_response(
                    req.request_id,
                    [] if unchanged else topics,
                    filtered=filtered,
                    topics_hash=digest,
                    changed=not unchanged,
                )
            )

        self._channel.spawn(run(), request_id=req.request_id)

    def on_watch_topic_list(self, event: CommandReceived) -> None:
        req = event.command.watchTopicList
        channel = self._channel
        if req.watcher_id in self._watchers:
            channel.send(
                commands.error(
                    req.request_id,
                    ServerError.UnknownError,
                    f"topic list watcher {req.watcher_id} is already present on the connection",
                )
            )
            return
        if len(req.topics_pattern) > MAX_PATTERN_LENGTH:
            channel.send(
                commands.error(
                    req.request_id,
                    ServerError.NotAllowedError,
                    "Unable to create topic list watcher: pattern longer than maximum "
                    f"{MAX_PATTERN_LENGTH}",
                )
            )
            return

        async def run() -> None:
            try:
                await channel.authorize_namespace_topics(req.namespace)
                namespace = await self._service.check_namespace(req.namespace)
                pattern = compile_pattern(req.topics_pattern)
                watcher = _Watcher(req.watcher_id, pattern, channel.send)
                watcher.unsubscribe = self._events.subscribe(str(namespace), watcher.on_event)
                self._watchers[req.watcher_id] = watcher
                topics = watcher.start(await self._service.list_topics(str(namespace)))
            except Exception as exc:
                dropped = self._watchers.pop(req.watcher_id, None)
                if dropped is not None:
                    dropped.unsubscribe()
                channel.send(commands.error(req.request_id, *to_server_error(exc)))
                return
            digest = topics_hash(topics)
            success = pb.CommandWatchTopicListSuccess(
                request_id=req.request_id, watcher_id=req.watcher_id, topics_hash=digest
            )
            if not (req.HasField("topics_hash") and req.topics_hash == digest):
                success.topic.extend(topics)
            channel.send(commands.wrap(success))

        channel.spawn(run())

    def on_watch_topic_list_close(self, event: CommandReceived) -> None:
        req = event.command.watchTopicListClose
        watcher = self._watchers.pop(req.watcher_id, None)
        if watcher is not None:
            watcher.unsubscribe()
        self._channel.send(commands.success(req.request_id))


_HANDLERS: dict[CommandType, CommandHandler[TopicListCommands]] = {
    pb.BaseCommand.GET_TOPICS_OF_NAMESPACE: TopicListCommands.on_topics_of_namespace,
    pb.BaseCommand.WATCH_TOPIC_LIST: TopicListCommands.on_watch_topic_list,
    pb.BaseCommand.WATCH_TOPIC_LIST_CLOSE: TopicListCommands.on_watch_topic_list_close,
}


def topic_list_commands(
    service: TopicListService, events: TopicEvents
) -> CommandFamily[TopicListCommands]:
    """The ``topic-list`` command family, served for ``service``."""
    return CommandFamily(
        name="topic-list",
        open_session=lambda channel: TopicListCommands(channel, service, events),
        handlers=_HANDLERS,
    )


__all__ = [
    "MAX_PATTERN_LENGTH",
    "TopicEvents",
    "TopicListCommands",
    "TopicListService",
    "topic_list_commands",
]
