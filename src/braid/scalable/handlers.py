"""The scalable-topic commands of one client connection (``docs/protocol.md#commands-70-82``).

One :class:`ScalableTopicSession` per connection that uses them, registered with the broker's
command registry as the ``scalable-topics`` family (:func:`scalable_topic_commands`):

* 70 ``SCALABLE_TOPIC_LOOKUP`` opens a DAG-watch session; the first ``SCALABLE_TOPIC_UPDATE``
  carries the DAG or the establishment error (not found, invalid name), later ones every layout
  change. 72 ``SCALABLE_TOPIC_CLOSE`` ends it.
* 73 ``SCALABLE_TOPIC_SUBSCRIBE`` registers a STREAM/CHECKPOINT consumer with the controller
  leader (this broker must lead the topic: otherwise ``ServiceNotReady`` naming the leader, and the
  client looks up again); the answer is ``SCALABLE_TOPIC_SUBSCRIBE_RESPONSE`` and later
  assignments arrive as 75 ``SCALABLE_TOPIC_ASSIGNMENT_UPDATE``. 82 ``SCALABLE_TOPIC_UNSUBSCRIBE``
  leaves cleanly (idempotent, answered with ``SUCCESS``).
* 76/78 ``WATCH_SCALABLE_TOPICS[_CLOSE]``: namespace membership watch (snapshot, then diffs).

When the connection closes, its watches end and its registered consumers enter their grace
periods (the registrations stay: the client reconnects).

Limits (ADR 0044): a connection holds at most ``scalableTopicMaxSessionsPerConnection`` DAG-watch
and namespace-watch sessions, open or being opened - more are refused at once with
``TooManyRequests`` naming the key, before any task or state exists for them - and each
establishment holds one of the broker's ``maxConcurrentLookupRequest`` slots while it reads the
metadata store. A session id the connection already uses replaces that session.
"""

from __future__ import annotations

import logging

from braid.broker.errors import TooManyRequests, to_server_error
from braid.broker.registry import CommandChannel, CommandFamily
from braid.broker.request_limits import LookupLimiter
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.coordinator import ConsumerAssignmentView
from braid.scalable.resources import SubscriptionType
from braid.scalable.service import ScalableTopicService
from braid.security.authorization import TopicOperation

log = logging.getLogger(__name__)

_CONSUMER_TYPES = {
    pb.STREAM: SubscriptionType.STREAM,
    pb.CHECKPOINT: SubscriptionType.CHECKPOINT,
}


def assignment_to_proto(view: ConsumerAssignmentView) -> pb.ScalableConsumerAssignment:
    assignment = pb.ScalableConsumerAssignment(layout_epoch=view.layout_epoch)
    for segment in view.segments:
        entry = assignment.segments.add(
            segment_id=segment.segment_id,
            hash_start=segment.hash_start,
            hash_end=segment.hash_end,
            segment_topic=segment.segment_topic,
            paused=segment.paused,
        )
        for bucket in segment.bucket_ranges:
            entry.bucket_ranges.add(start=bucket.start, end=bucket.end)
        if segment.broker is not None:
            entry.broker_url = segment.broker.url
            if segment.broker.url_tls:
                entry.broker_url_tls = segment.broker.url_tls
    return assignment


class ScalableTopicSession:
    """The scalable-topic state of one connection; also the transport sessions push through."""

    def __init__(
        self,
        channel: CommandChannel,
        service: ScalableTopicService,
        lookups: LookupLimiter | None = None,
    ) -> None:
        self._channel = channel
        self._service = service
        self._lookups = lookups or LookupLimiter(0)
        self._max_sessions = service.settings.max_sessions_per_connection
        #: Ids of this connection's DAG-watch and namespace-watch sessions, open or opening.
        self._dag_sessions: set[int] = set()
        self._ns_sessions: set[int] = set()

    def _session_refusal(self, ids: set[int], session_id: int) -> TooManyRequests | None:
        """Count ``session_id`` in, or say why this connection may not open another session."""
        if session_id in ids:
            return None
        if self._max_sessions and len(self._dag_sessions) + len(self._ns_sessions) >= (
            self._max_sessions
        ):
            return TooManyRequests(
                f"this connection has {self._max_sessions} scalable-topic sessions open "
                "(scalableTopicMaxSessionsPerConnection); close one first"
            )
        ids.add(session_id)
        return None

    # -- transport (DagWatchTransport, AssignmentTransport) ------------------------------------

    @property
    def closed(self) -> bool:
        return self._channel.closed

    def send_dag_update(self, session_id: int, dag: pb.ScalableTopicDAG, resolved: str) -> None:
        self._channel.send(
            commands.scalable_topic_update(session_id, dag, resolved_topic_name=resolved)
        )

    def send_topics_update(
        self,
        watch_id: int,
        *,
        snapshot: list[str] | None = None,
        added: list[str] | None = None,
        removed: list[str] | None = None,
    ) -> None:
        self._channel.send(
            commands.watch_scalable_topics_update(
                watch_id, snapshot=snapshot, added=added, removed=removed
            )
        )

    def send_assignment_update(self, consumer_id: int, assignment: ConsumerAssignmentView) -> None:
        self._channel.send(
            commands.scalable_topic_assignment_update(consumer_id, assignment_to_proto(assignment))
        )

    # -- DAG watch -----------------------------------------------------------------------------

    def on_lookup(self, event: CommandReceived) -> None:
        req = event.command.scalableTopicLookup
        refused = self._session_refusal(self._dag_sessions, req.session_id)
        if refused is not None:
            code, message = to_server_error(refused)
            self._channel.send(
                commands.scalable_topic_update(req.session_id, error=code, message=message)
            )
            return

        async def run() -> None:
            try:
                await self._channel.authorize(TopicOperation.LOOKUP, req.topic)
                with self._lookups.slot():
                    await self._service.watches.open_dag_watch(req.session_id, req.topic, self)
            except Exception as exc:
                self._dag_sessions.discard(req.session_id)
                code, message = to_server_error(exc)
                log.info(
                    "scalable lookup of %r from %s refused: %s",
                    req.topic,
                    self._channel.remote_address,
                    message,
                )
                self._channel.send(
                    commands.scalable_topic_update(req.session_id, error=code, message=message)
                )

        self._channel.spawn(run())

    def on_close(self, event: CommandReceived) -> None:
        session_id = event.command.scalableTopicClose.session_id
        self._dag_sessions.discard(session_id)
        self._service.watches.close_dag_watch(self, session_id)

    # -- consumer controller sessions ----------------------------------------------------------

    def on_subscribe(self, event: CommandReceived) -> None:
        req = event.command.scalableTopicSubscribe

        async def run() -> None:
            try:
                await self._channel.authorize(TopicOperation.CONSUME, req.topic, req.subscription)
                sub_type = _CONSUMER_TYPES[req.consumer_type]
                view = await self._service.register_consumer(
                    req.topic,
                    req.subscription,
                    req.consumer_name,
                    req.consumer_id,
                    sub_type,
                    self,
                    earliest=req.initial_position == pb.CommandSubscribe.Earliest,
                    attach_ahead=req.attach_ahead,
                    drained=tuple(req.drained_segments),
                )
            except Exception as exc:
                code, message = to_server_error(exc)
                log.info(
                    "registration of %r on %s/%s refused: %s",
                    req.consumer_name,
                    req.topic,
                    req.subscription,
                    message,
                )
                self._channel.send(
                    commands.scalable_topic_subscribe_response(
                        req.request_id, error=code, message=message
                    )
                )
                return
            self._channel.send(
                commands.scalable_topic_subscribe_response(
                    req.request_id, assignment_to_proto(view)
                )
            )

        self._channel.spawn(run())

    def on_unsubscribe(self, event: CommandReceived) -> None:
        req = event.command.scalableTopicUnsubscribe

        async def run() -> None:
            try:
                await self._service.unregister_consumer(self, req.consumer_id)
            except Exception as exc:
                # Idempotent and best-effort for the client: the grace period is the fallback.
                log.info("clean leave of consumer %d failed: %r", req.consumer_id, exc)
            self._channel.send(commands.success(req.request_id))

        self._channel.spawn(run())

    # -- namespace watch -----------------------------------------------------------------------

    def on_watch_topics(self, event: CommandReceived) -> None:
        req = event.command.watchScalableTopics
        filters = {kv.key: kv.value for kv in req.property_filters}
        current_hash = req.current_hash if req.HasField("current_hash") else None
        refused = self._session_refusal(self._ns_sessions, req.watch_id)
        if refused is not None:
            code, message = to_server_error(refused)
            self._channel.send(
                commands.watch_scalable_topics_update(req.watch_id, error=code, message=message)
            )
            return

        async def run() -> None:
            try:
                await self._channel.authorize_namespace_topics(req.namespace)
                with self._lookups.slot():
                    await self._service.watches.open_namespace_watch(
                        req.watch_id, req.namespace, filters, current_hash, self
                    )
            except Exception as exc:
                self._ns_sessions.discard(req.watch_id)
                code, message = to_server_error(exc)
                self._channel.send(
                    commands.watch_scalable_topics_update(req.watch_id, error=code, message=message)
                )

        self._channel.spawn(run())

    def on_watch_topics_close(self, event: CommandReceived) -> None:
        watch_id = event.command.watchScalableTopicsClose.watch_id
        self._ns_sessions.discard(watch_id)
        self._service.watches.close_namespace_watch(self, watch_id)

    async def close(self) -> None:
        self._dag_sessions.clear()
        self._ns_sessions.clear()
        self._service.on_connection_closed(self)


def scalable_topic_commands(
    service: ScalableTopicService, lookups: LookupLimiter | None = None
) -> CommandFamily[ScalableTopicSession]:
    """The ``scalable-topics`` command family, to register on the broker's command registry
    (``lookups``: the broker's ``maxConcurrentLookupRequest`` limiter)."""
    command = pb.BaseCommand
    return CommandFamily(
        name="scalable-topics",
        open_session=lambda channel: ScalableTopicSession(channel, service, lookups),
        handlers={
            command.SCALABLE_TOPIC_LOOKUP: ScalableTopicSession.on_lookup,
            command.SCALABLE_TOPIC_CLOSE: ScalableTopicSession.on_close,
            command.SCALABLE_TOPIC_SUBSCRIBE: ScalableTopicSession.on_subscribe,
            command.SCALABLE_TOPIC_UNSUBSCRIBE: ScalableTopicSession.on_unsubscribe,
            command.WATCH_SCALABLE_TOPICS: ScalableTopicSession.on_watch_topics,
            command.WATCH_SCALABLE_TOPICS_CLOSE: ScalableTopicSession.on_watch_topics_close,
        },
    )


__all__ = ["ScalableTopicSession", "assignment_to_proto", "scalable_topic_commands"]
