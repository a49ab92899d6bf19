"""The console's live updates: server-sent event streams fed by the DAG watch and the sampler.

Two streams, both ``text/event-stream`` (the browser's ``EventSource`` reconnects by itself):

* ``GET /console/api/events``: the overview's ``traffic`` event, one per sampler tick
  (:meth:`~braid.admin.console.traffic.TrafficSnapshot.overview_json`);
* ``GET /console/api/scalable/{tenant}/{namespace}/{topic}/events``: a ``dag`` event at once and
  after every layout change, then a ``traffic`` event per tick with the topic's per-segment
  numbers and the ``decisionSeq`` of the auto-scaler's decision log (a page re-reads the history
  through the REST API when it moves).

A topic stream opens a real DAG-watch session on the scalable-topic service (the sessions clients
use, PIP-468 ``DagWatchSession``), through a transport that drops each pushed DAG into the
stream's :class:`_Inbox`. The ``dag`` event carries the topic's ``ScalableTopicMetadata`` (the
JSON ``GET /admin/v2/scalable/...`` answers, so the page parses one shape), re-read after the
push, plus what only the push knows: the broker of each active segment and the controller
leader's URL. Viewing a topic never creates it: an unknown topic gets an ``error`` event and the
stream ends.

An inbox keeps only the newest item of each kind, so a slow page skips intermediate states
instead of queueing them. :meth:`ConsoleStreams.close` (called by the admin server before it
stops, :mod:`braid.admin.server`) ends every stream: uvicorn waits for open responses to finish.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from braid.admin.console.traffic import TrafficSampler
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.core.errors import BraidError
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_to_metadata
from braid.core.names import TopicDomain, TopicName
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: The browser's reconnect delay after a stream drops (EventSource ``retry``).
RECONNECT_MS = 1000


class LayoutSource(Protocol):
    """Where the console reads a topic's layout (the scalable-topic service)."""

    async def get_layout(self, topic: TopicName) -> SegmentLayout:
        """The topic's layout. Raises ``ScalableTopicNotFound`` (a ``BraidError``)."""
        ...


class DagWatches(Protocol):
    """The broker's DAG-watch sessions, as the console opens and closes them."""

    async def open_dag_watch(self, session_id: int, name: str, transport: Any) -> object: ...

    def close_dag_watch(self, transport: Any, session_id: int) -> None: ...


#: The auto-scaler decision log's ``seq`` of a topic on this broker (``None``: not kept here).
DecisionSeq = Callable[[TopicName], int | None]


class _Inbox:
    """The newest item of each kind for one stream, and a wake-up for its reader."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._wake = asyncio.Event()
        self.closed = False

    def put(self, kind: str, item: Any) -> None:
        if not self.closed:
            self._items[kind] = item
            self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def take(self) -> dict[str, Any]:
        """Wait for items (empty once closed)."""
        await self._wake.wait()
        self._wake.clear()
        items, self._items = self._items, {}
        return {} if self.closed else items


class _WatchTransport:
    """A DAG-watch session's transport that hands each pushed DAG to a stream's inbox."""

    def __init__(self, inbox: _Inbox) -> None:
        self._inbox = inbox

    @property
    def closed(self) -> bool:
        return self._inbox.closed

    def send_dag_update(self, session_id: int, dag: pb.ScalableTopicDAG, resolved: str) -> None:
        self._inbox.put("dag", dag)

    def send_topics_update(
        self,
        watch_id: int,
        *,
        snapshot: list[str] | None = None,
        added: list[str] | None = None,
        removed: list[str] | None = None,
    ) -> None:
        raise NotImplementedError("the console opens DAG watches only, no namespace watches")


def sse(event: str, data: object) -> bytes:
    """One server-sent event (the data is compact JSON on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class ConsoleStreams:
    """Every open console stream of this admin server (see the module docstring)."""

    def __init__(
        self,
        sampler: TrafficSampler,
        layouts: LayoutSource | None = None,
        watches: DagWatches | None = None,
        decision_seq: DecisionSeq | None = None,
    ) -> None:
        self._sampler = sampler
        self._layouts = layouts
        self._watches = watches
        self._decision_seq = decision_seq
        self._inboxes: set[_Inbox] = set()
        self._closed = False

    @property
    def open_streams(self) -> int:
        return len(self._inboxes)

    def close(self) -> None:
        """End every stream and stop sampling. Idempotent."""
        self._closed = True
        self._sampler.close()
        for inbox in list(self._inboxes):
            inbox.close()

    def router(self) -> APIRouter:
        router = APIRouter(include_in_schema=False)

        @router.get("/console/api/events")
        async def overview_events() -> StreamingResponse:
            return _event_stream(self._overview())

        @router.get("/console/api/scalable/{tenant}/{namespace}/{topic}/events")
        async def topic_events(
            tenant: Tenant, namespace: Namespace, topic: LocalTopicName
        ) -> StreamingResponse:
            name = TopicName(TopicDomain.TOPIC, tenant, namespace, topic)
            return _event_stream(self._topic(name))

        return router

    # -- streams -------------------------------------------------------------------------------

    async def _overview(self) -> AsyncIterator[bytes]:
        inbox = self._open()
        pump = asyncio.ensure_future(self._pump_traffic(inbox))
        try:
            while True:
                items = await inbox.take()
                if not items:
                    return
                yield sse("traffic", items["traffic"].overview_json())
        finally:
            pump.cancel()
            self._inboxes.discard(inbox)

    async def _topic(self, topic: TopicName) -> AsyncIterator[bytes]:
        if self._watches is None or self._layouts is None:
            yield sse("error", {"reason": "scalable topics are disabled on this broker"})
            return
        watches, layouts = self._watches, self._layouts
        try:
            await layouts.get_layout(topic)  # viewing a topic never creates it
        except BraidError as exc:
            yield sse("error", {"reason": str(exc)})
            return
        inbox = self._open()
        transport = _WatchTransport(inbox)
        session_id = next(_SESSION_IDS)
        pump = asyncio.ensure_future(self._pump_traffic(inbox))
        try:
            await watches.open_dag_watch(session_id, str(topic), transport)
            while True:
                items = await inbox.take()
                if not items:
                    return
                dag = items.get("dag")
                if dag is not None:
                    yield sse("dag", await self._dag_event(layouts, topic, dag))
                traffic = items.get("traffic")
                if traffic is not None:
                    doc = traffic.topic_json(str(topic))
                    if self._decision_seq is not None:
                        doc["decisionSeq"] = self._decision_seq(topic)
                    yield sse("traffic", doc)
        except BraidError as exc:
            yield sse("error", {"reason": str(exc)})
        finally:
            pump.cancel()
            inbox.close()
            self._inboxes.discard(inbox)
            watches.close_dag_watch(transport, session_id)

    def _open(self) -> _Inbox:
        inbox = _Inbox()
        if self._closed:
            inbox.close()
        self._inboxes.add(inbox)
        return inbox

    async def _pump_traffic(self, inbox: _Inbox) -> None:
        async for snapshot in self._sampler.updates():
            inbox.put("traffic", snapshot)
            if inbox.closed:
                return

    @staticmethod
    async def _dag_event(
        layouts: LayoutSource, topic: TopicName, dag: pb.ScalableTopicDAG
    ) -> dict[str, Any]:
        try:
            metadata: dict[str, Any] = layout_to_metadata(await layouts.get_layout(topic))
        except BraidError as exc:  # deleted meanwhile
            return {"error": str(exc)}
        return {
            "topic": str(topic),
            "metadata": metadata,
            "segmentBrokers": {str(b.segment_id): b.broker_url for b in dag.segment_brokers},
            "controllerBrokerUrl": dag.controller_broker_url or None,
        }


_SESSION_IDS = itertools.count(1)


def _event_stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    async def with_retry() -> AsyncIterator[bytes]:
        yield f"retry: {RECONNECT_MS}\n\n".encode()
        async for chunk in events:
            yield chunk

    return StreamingResponse(
        with_retry(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


__all__ = [
    "RECONNECT_MS",
    "ConsoleStreams",
    "DagWatches",
    "DecisionSeq",
    "LayoutSource",
    "sse",
]
