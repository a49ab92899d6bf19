"""The controller registration of a Stream or grouped Checkpoint consumer.

``docs/protocol.md#consumer-assignment``; ``docs/client.md#how-the-client-works-inside``.

The I/O shell around :class:`~braid.core.consumer_assignment.RegistrationState`: it connects to
the controller leader named by the layout (``controller_broker_url``; scalable-topic names are
not resolvable by the standard lookup), registers with ``CommandScalableTopicSubscribe``, and
tells it where a subscription this registration creates starts (``initial_position``, Braid
field 7), and hands every assignment diff - from the response and from pushed
``CommandScalableTopicAssignmentUpdate`` commands, applied by ``layout_epoch`` - to its consumer.
On connection loss, or when a newer layout names another controller leader, it re-registers
with backoff under the same consumer id (within the controller's grace period the same
assignment comes back, an empty diff). A grouped Checkpoint member's registration also carries
the sealed segments it has delivered whole (``drained``), and :meth:`AssignmentSession.report`
sends them again, under the same consumer id, whenever the set grows: the controller hands out
their children only then (ADR 0057). Closing sends ``CommandScalableTopicUnsubscribe``
(best effort: the grace period is the fallback) so the controller rebalances at once.

Only reachable when the broker advertises ``supports_scalable_topics`` (C15) and the layout has
managed segments.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from braid.client.backoff import retry_transient
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.dag import assignment_from_pb
from braid.client.errors import error_for_code, is_transient
from braid.client.layout_source import LayoutSource
from braid.core.consumer_assignment import (
    AssignmentDiff,
    RegistrationPhase,
    RegistrationState,
)
from braid.core.topic_layout import TopicLayout
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

DiffHandler = Callable[[AssignmentDiff], None]


class AssignmentSession:
    """One consumer's registration with its topic's controller."""

    def __init__(
        self,
        ctx: ClientContext,
        source: LayoutSource,
        subscription: str,
        consumer_name: str,
        consumer_type: int,
        on_diff: DiffHandler,
        *,
        initial_earliest: bool | None = None,
        attach_ahead: bool = False,
        drained: Callable[[], Iterable[int]] | None = None,
    ) -> None:
        self.ctx = ctx
        self.drained = drained
        self.initial_earliest = initial_earliest
        self.attach_ahead = attach_ahead
        self.source = source
        self.subscription = subscription
        self.consumer_name = consumer_name
        self.consumer_type = consumer_type
        self.on_diff = on_diff
        self.consumer_id = ctx.next_id()
        self.state = RegistrationState()
        self._conn: BrokerConnection | None = None
        self._reregistering = False
        source.add_listener(self._on_layout)

    async def start(self) -> None:
        """Register and apply the first assignment (raises the typed refusal)."""
        await retry_transient(self._register, self.ctx.backoff(), self.ctx.deadline())

    async def _controller(self) -> BrokerConnection:
        url = self.source.current.controller_broker_url
        if url:
            return await self.ctx.pool.get(url)
        return await self.ctx.pool.service_connection()

    def _subscribe_command(self, request_id: int) -> pb.BaseCommand:
        return commands.scalable_topic_subscribe(
            request_id,
            self.source.topic,
            self.subscription,
            self.consumer_name,
            self.consumer_id,
            self.consumer_type,  # type: ignore[arg-type]
            initial_earliest=self.initial_earliest,
            attach_ahead=self.attach_ahead,
            drained_segments=tuple(self.drained()) if self.drained is not None else (),
        )

    async def report(self) -> None:
        """Send the ``drained`` set again (registered only; a lost report is re-sent with the
        next registration). The answer is applied like a pushed assignment."""
        conn = self._conn
        if conn is None or conn.closed or self.state.phase is not RegistrationPhase.REGISTERED:
            return
        request_id = conn.new_request_id()
        try:
            response = (
                await conn.request(self._subscribe_command(request_id), request_id)
            ).scalableTopicSubscribeResponse
        except Exception as exc:
            log.debug("drain report on %s not answered: %s", self.source.topic, exc)
            return
        if response.HasField("error") or not response.HasField("assignment"):
            log.debug("drain report on %s refused: %s", self.source.topic, response.message)
            return
        diff = self.state.assignment_pushed(
            assignment_from_pb(response.assignment, self.ctx.settings.uses_tls)
        )
        if diff is not None and not diff.empty:
            self.on_diff(diff)

    async def _register(self) -> None:
        conn = await self._controller()
        self.state.registering()
        request_id = conn.new_request_id()
        conn.register_registration(self.consumer_id, self)
        cmd = self._subscribe_command(request_id)
        try:
            response = (await conn.request(cmd, request_id)).scalableTopicSubscribeResponse
            if response.HasField("error"):
                raise error_for_code(
                    response.error, response.message, context=f"subscribe to {self.source.topic}"
                )
            if not response.HasField("assignment"):
                raise error_for_code(pb.UnknownError, "subscribe response without an assignment")
            assignment = assignment_from_pb(response.assignment, self.ctx.settings.uses_tls)
        except BaseException:
            self.state.registration_failed()
            conn.unregister_registration(self.consumer_id)
            raise
        self._conn = conn
        diff = self.state.registered(assignment)
        if diff is not None and not diff.empty:
            self.on_diff(diff)

    # -- RegistrationHandler ------------------------------------------------------------------

    def on_assignment_update(self, update: pb.CommandScalableTopicAssignmentUpdate) -> None:
        try:
            assignment = assignment_from_pb(update.assignment, self.ctx.settings.uses_tls)
        except Exception as exc:
            log.error("ignoring an invalid assignment for %s: %s", self.source.topic, exc)
            return
        diff = self.state.assignment_pushed(assignment)
        if diff is not None and not diff.empty:
            self.on_diff(diff)

    def on_connection_lost(self) -> None:
        self._conn = None
        self.state.connection_lost()
        self._spawn_reregister()

    def _on_layout(self, layout: TopicLayout) -> None:
        conn = self._conn
        url = layout.controller_broker_url
        if conn is not None and url and conn.address.url != url.rstrip("/"):
            # A new controller leader: move the registration there.
            conn.unregister_registration(self.consumer_id)
            self._conn = None
            self.state.connection_lost()
            self._spawn_reregister()

    def _spawn_reregister(self) -> None:
        if self._reregistering or not self.state.needs_registration:
            return
        self._reregistering = True
        self.ctx.spawn(
            self._reregister(), f"re-registering with the controller of {self.source.topic}"
        )

    async def _reregister(self) -> None:
        backoff = self.ctx.backoff()
        try:
            while self.state.needs_registration and not self.ctx.closed:
                await asyncio.sleep(backoff.next_delay())
                try:
                    await self._register()
                except Exception as exc:
                    level = logging.DEBUG if is_transient(exc) else logging.WARNING
                    log.log(level, "re-registration on %s failed: %s", self.source.topic, exc)
        finally:
            self._reregistering = False

    async def close(self) -> None:
        """Leave cleanly (``CommandScalableTopicUnsubscribe``, best effort)."""
        self.source.remove_listener(self._on_layout)
        send_unsubscribe = self.state.leaving()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.unregister_registration(self.consumer_id)
            if send_unsubscribe and not conn.closed:
                request_id = conn.new_request_id()
                cmd = commands.scalable_topic_unsubscribe(request_id, self.consumer_id)
                with contextlib.suppress(Exception):
                    await conn.request(cmd, request_id)
        self.state.closed()


__all__ = ["AssignmentSession"]
