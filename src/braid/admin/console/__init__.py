"""The Braid console: a scalable topic seen live, served by every broker's web port at ``/console``.

What an operator sees (``docs/console.md``): an overview of tenants, namespaces and topics with
their traffic and the broker's health; for a scalable topic, its segment DAG drawn by epoch with
live rates and backlogs per segment, the splits and merges with the auto-scaler's reasons (and the
decisions it did not take), each subscription's progress through the DAG and its consumers, and
split / merge / auto-scale policy actions behind a confirmation.

How it is built (``docs/decisions/0038-console.md``): a static page with a few ES modules, no build
step (:mod:`~braid.admin.console.pages`); the page reads and acts through the same admin REST API
as every other client; live updates come over server-sent events
(:mod:`~braid.admin.console.streams`) fed by the scalable-topic service's DAG watch and by
:mod:`~braid.admin.console.traffic`'s sampling of counters the broker already keeps, every 2 s and
only while a console is open. Nothing here runs per message.

:func:`mount_console` adds it to the admin app; the admin server ends the console's streams
before it stops (``app.state.close_streams``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI

from braid.admin.console.pages import load_static_files, pages_router
from braid.admin.console.streams import ConsoleStreams, DecisionSeq
from braid.admin.console.traffic import DEFAULT_INTERVAL_S, TrafficSampler
from braid.clock import Clock, SystemClock
from braid.core.names import TopicName
from braid.scalable.service import ScalableTopicService


def mount_console(
    app: FastAPI,
    topics: Mapping[str, Any],
    scalable: ScalableTopicService | None,
    *,
    clock: Clock | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> ConsoleStreams:
    """Serve the console on ``app``.

    Args:
        app: the admin application.
        topics: the broker's loaded topics, by name (what the traffic sampler reads).
        scalable: the scalable-topic service (DAG watches, layouts, the auto-scaler's decision
            log); ``None`` when scalable topics are disabled (the overview still works).
        clock: time for the sampler (the system clock by default).
        interval_s: how often traffic is sampled while a console is open.
    """
    sampler = TrafficSampler(topics, clock or SystemClock(), interval_s=interval_s)
    streams = ConsoleStreams(
        sampler,
        layouts=scalable,
        watches=None if scalable is None else scalable.watches,
        decision_seq=None if scalable is None else _decision_seq(scalable),
    )
    app.include_router(pages_router(load_static_files()))
    app.include_router(streams.router())
    closers = list(getattr(app.state, "close_streams", []))
    app.state.close_streams = [*closers, streams.close]
    app.state.console = streams
    return streams


def _decision_seq(scalable: ScalableTopicService) -> DecisionSeq:
    def seq(topic: TopicName) -> int | None:
        # Only the leader's auto-scaler decides; a follower's log stays empty (None: ask REST).
        scaler = scalable.auto_scale.scaler(topic)
        return scaler.decisions.seq if scaler is not None and scaler.running else None

    return seq


__all__ = ["ConsoleStreams", "mount_console"]
