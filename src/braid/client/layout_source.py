"""Where a topic's layout comes from: the DAG watch, or a synthetic layout built locally.

Every producer and consumer is driven by a :class:`LayoutSource` (ADR 0022): it exposes the
current :class:`~braid.core.topic_layout.TopicLayout`, tells listeners when a newer one is
applied (epoch monotonicity via :class:`~braid.core.topic_layout.LayoutTracker`), and lets the
segment-gone retry loop wait for a layout newer than the one it routed on.

* :class:`DagWatchLayoutSource` - ``docs/protocol.md#dag-watch``: ``CommandScalableTopicLookup``
  opens a session, every ``CommandScalableTopicUpdate`` carries a layout (or the establishment
  error, surfaced as the create/subscribe failure), and on connection loss the session is re-opened
  with backoff and the layout refreshed. Used for every name when the broker advertises
  ``supports_scalable_topics`` (it answers ``persistent://`` names with the synthetic DAG).
* :class:`SyntheticLayoutSource` - for a broker that does not advertise the feature (C15: no
  scalable-topic command is ever sent to it): ``PARTITIONED_METADATA`` gives the partition count
  and :meth:`TopicLayout.synthetic` the layout. A partition-count change is a newer layout.

:class:`LayoutSources` shares one source per topic among a client's producers and consumers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from braid.client.backoff import retry_transient
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.dag import layout_from_dag
from braid.client.errors import (
    AlreadyClosedError,
    FeatureNotSupportedError,
    InvalidTopicNameError,
    NotConnectedError,
    error_for_code,
    is_transient,
)
from braid.client.first_update import await_first_update
from braid.client.lookup import partition_count
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.core.topic_layout import LayoutTracker, TopicLayout
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

LayoutListener = Callable[[TopicLayout], None]


def parse_topic(topic: str) -> TopicName:
    """Validate an application's topic name (``topic://``, ``persistent://`` or short form).

    Raises:
        InvalidTopicNameError: malformed, a ``segment://`` name (segments are internal), or a
            ``non-persistent://`` one (Braid's consumers keep cursors; such topics have none).
    """
    try:
        name = TopicName.parse(topic)
    except InvalidInputError as exc:
        raise InvalidTopicNameError(str(exc)) from exc
    if name.domain is TopicDomain.SEGMENT:
        raise InvalidTopicNameError(
            f"{topic!r} names a segment; segments are internal, use the topic:// name"
        )
    if name.domain is TopicDomain.NON_PERSISTENT:
        raise InvalidTopicNameError(
            f"{topic!r} is a non-persistent topic: Braid's client serves stored topics "
            "(topic://, persistent://); use a Pulsar client for non-persistent ones"
        )
    return name


class LayoutSource:
    """The current layout of one topic, and notifications of newer ones."""

    def __init__(self, ctx: ClientContext, name: TopicName) -> None:
        self.ctx = ctx
        self.name = name
        self._tracker = LayoutTracker()
        self._listeners: list[LayoutListener] = []
        self._changed = asyncio.Event()
        self.closed = False

    @property
    def topic(self) -> str:
        """The canonical topic name (as resolved)."""
        layout = self._tracker.current
        return layout.topic if layout is not None else str(self.name)

    @property
    def current(self) -> TopicLayout:
        """The last applied layout.

        Raises:
            AlreadyClosedError: before :meth:`start` succeeded.
        """
        layout = self._tracker.current
        if layout is None:
            raise AlreadyClosedError(f"layout of {self.name} is not resolved")
        return layout

    async def start(self) -> None:
        """Resolve the first layout (raises the typed resolution error)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop tracking."""
        self.closed = True
        self._changed.set()

    def add_listener(self, listener: LayoutListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: LayoutListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def apply(self, layout: TopicLayout) -> bool:
        """Apply ``layout`` if newer; notify listeners; return whether it was applied."""
        if not self._tracker.offer(layout):
            return False
        log.debug("layout of %s now at epoch %d", layout.topic, layout.epoch)
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in list(self._listeners):
            try:
                listener(layout)
            except Exception:
                log.exception("layout listener of %s failed", layout.topic)
        return True

    async def wait_newer(self, epoch: int, within: float) -> TopicLayout | None:
        """A layout with an epoch above ``epoch``, waiting up to ``within`` seconds for it."""
        layout = self._tracker.current
        if layout is not None and layout.epoch > epoch:
            return layout
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await changed.wait()
        layout = self._tracker.current
        return layout if layout is not None and layout.epoch > epoch else None


class SyntheticLayoutSource(LayoutSource):
    """The locally built layout of a classic topic (broker without scalable-topic support)."""

    def __init__(self, ctx: ClientContext, name: TopicName) -> None:
        super().__init__(ctx, name)
        self._partitions: int | None = None

    async def start(self) -> None:
        await retry_transient(self._refresh, self.ctx.backoff(), self.ctx.deadline())

    async def _refresh(self) -> None:
        partitions = await partition_count(self.ctx.pool, str(self.name))
        if partitions == self._partitions:
            return
        epoch = 0 if self._partitions is None else self.current.epoch + 1
        self._partitions = partitions
        self.apply(TopicLayout.synthetic(self.name, partitions, epoch))

    async def wait_newer(self, epoch: int, within: float) -> TopicLayout | None:
        # Nothing pushes: a classic topic only changes when its partition count grows.
        layout = await super().wait_newer(epoch, 0)
        if layout is not None:
            return layout
        await asyncio.sleep(within)
        with contextlib.suppress(Exception):
            await self._refresh()
        return await super().wait_newer(epoch, 0)


class DagWatchLayoutSource(LayoutSource):
    """A DAG-watch session (``docs/protocol.md#dag-watch``) kept open for the source's life."""

    def __init__(self, ctx: ClientContext, name: TopicName) -> None:
        super().__init__(ctx, name)
        self._conn: BrokerConnection | None = None
        self._session_id = 0
        self._first: asyncio.Future[None] | None = None
        self._resolved: str | None = None
        self._reconnecting = False

    async def start(self) -> None:
        await retry_transient(self._open_session, self.ctx.backoff(), self.ctx.deadline())

    async def _open_session(self) -> None:
        conn = await self.ctx.pool.service_connection()
        if not conn.supports_scalable_topics:
            raise FeatureNotSupportedError(
                f"{conn.address.url} does not advertise scalable-topic support"
            )
        self._session_id = self.ctx.next_id()
        first = self._first = self.ctx.loop.create_future()
        self._conn = conn
        session_id = self._session_id
        conn.register_session(session_id, self)
        conn.send(commands.scalable_topic_lookup(session_id, str(self.name)))
        await await_first_update(
            first,
            self.ctx.settings.operation_timeout,
            lambda: conn.unregister_session(session_id),
            f"layout for {self.name} from {conn.address.url}",
        )

    # -- SessionHandler ------------------------------------------------------------------------

    def on_layout_update(self, update: pb.CommandScalableTopicUpdate) -> None:
        first = self._first
        if update.HasField("error"):
            error = error_for_code(update.error, update.message, context=f"layout of {self.name}")
            if first is not None and not first.done():
                first.set_exception(error)
            else:
                log.warning("DAG watch of %s reported %s", self.name, error)
            return
        if not update.HasField("dag"):
            return
        if update.HasField("resolved_topic_name") and update.resolved_topic_name:
            self._resolved = update.resolved_topic_name
        topic = self._resolved or str(self.name)
        try:
            layout = layout_from_dag(topic, update.dag, tls=self.ctx.settings.uses_tls)
        except InvalidInputError as exc:
            if first is not None and not first.done():
                first.set_exception(exc)
            log.error("ignoring an invalid layout of %s: %s", topic, exc)
            return
        self.apply(layout)
        if first is not None and not first.done():
            first.set_result(None)

    def on_connection_lost(self) -> None:
        self._conn = None
        first = self._first
        if first is not None and not first.done():
            first.set_exception(NotConnectedError(f"DAG watch of {self.name} lost its connection"))
            return
        if not self.closed and not self._reconnecting:
            self._reconnecting = True
            self.ctx.spawn(self._reconnect(), f"DAG watch reconnect of {self.name}")

    async def _reconnect(self) -> None:
        backoff = self.ctx.backoff()
        try:
            while not self.closed and not self.ctx.closed:
                await asyncio.sleep(backoff.next_delay())
                try:
                    await self._open_session()
                    return
                except Exception as exc:
                    if not is_transient(exc):
                        log.warning("re-opening the DAG watch of %s failed: %s", self.name, exc)
        finally:
            self._reconnecting = False

    async def close(self) -> None:
        await super().close()
        conn = self._conn
        self._conn = None
        if conn is not None and not conn.closed:
            conn.unregister_session(self._session_id)
            with contextlib.suppress(Exception):
                conn.send(commands.scalable_topic_close(self._session_id))


class LayoutSources:
    """One started :class:`LayoutSource` per topic, shared and reference-counted."""

    def __init__(self, ctx: ClientContext) -> None:
        self.ctx = ctx
        self._sources: dict[str, asyncio.Future[LayoutSource]] = {}
        self._refs: dict[str, int] = {}

    async def acquire(self, topic: str) -> LayoutSource:
        """The started source of ``topic``; pair with :meth:`release`.

        Raises:
            InvalidTopicNameError: a bad or ``segment://`` name.
            FeatureNotSupportedError: a ``topic://`` name and a broker without scalable topics.
            NotFoundError, ...: the topic could not be resolved.
        """
        name = parse_topic(topic)
        key = str(name)
        fut = self._sources.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._start(name))
            self._sources[key] = fut
            self._refs[key] = 0
        self._refs[key] += 1
        try:
            return await asyncio.shield(fut)
        except BaseException:
            await self._drop_ref(key, fut)
            raise

    async def _start(self, name: TopicName) -> LayoutSource:
        conn = await retry_transient(
            self.ctx.pool.service_connection, self.ctx.backoff(), self.ctx.deadline()
        )
        source: LayoutSource
        if conn.supports_scalable_topics:
            source = DagWatchLayoutSource(self.ctx, name)
        elif name.domain is TopicDomain.TOPIC:
            raise FeatureNotSupportedError(
                f"{name} is a scalable topic, but the broker at {conn.address.url} does not "
                "advertise scalable-topic support"
            )
        else:
            source = SyntheticLayoutSource(self.ctx, name)
        await source.start()
        return source

    async def release(self, source: LayoutSource) -> None:
        """Give back a source from :meth:`acquire`; the last release closes it."""
        key = str(source.name)
        fut = self._sources.get(key)
        if fut is not None:
            await self._drop_ref(key, fut)

    async def _drop_ref(self, key: str, fut: asyncio.Future[LayoutSource]) -> None:
        self._refs[key] -= 1
        if self._refs[key] > 0:
            return
        del self._refs[key]
        if self._sources.get(key) is fut:
            del self._sources[key]
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            await fut.result().close()
        elif not fut.done():
            fut.cancel()

    async def close(self) -> None:
        """Close every source."""
        for key, fut in list(self._sources.items()):
            self._sources.pop(key, None)
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                await fut.result().close()
            else:
                fut.cancel()
        self._refs.clear()


__all__ = [
    "DagWatchLayoutSource",
    "LayoutListener",
    "LayoutSource",
    "LayoutSources",
    "SyntheticLayoutSource",
    "parse_topic",
]
