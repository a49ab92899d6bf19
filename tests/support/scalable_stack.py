"""An in-process broker with the scalable-topic layer installed, for integration tests.

:func:`open_scalable_stack` is :func:`~tests.support.broker_stack.open_broker_stack` plus
:func:`~braid.scalable.install.install_scalable_topics` (what ``braid standalone`` wires), with the
scalable layer's timers on their own clock so a test can hold grace periods and GC ticks on a
``ManualClock`` while storage keeps real time (pass the same clock as ``metadata_clock`` when the
test reads store times, as the auto-scaler's merge window does). :func:`second_service` starts
another :class:`~braid.scalable.service.ScalableTopicService` on the same metadata store and
data-plane broker: a second broker's control plane, for leader-failover tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from braid.clock import Clock, SystemClock
from braid.metadata import MetadataStore, open_store
from braid.scalable.controller import StepHook
from braid.scalable.install import BrokerNamespaces, install_scalable_topics
from braid.scalable.segments import LocalSegmentAdmin
from braid.scalable.service import ScalableTopicService, ScalableTopicSettings
from tests.support.broker_stack import BrokerStack, open_broker_stack


@dataclass
class ScalableStack:
    broker: BrokerStack
    scalable: ScalableTopicService

    async def close(self) -> None:
        await self.scalable.close()
        await self.broker.close()


async def open_scalable_stack(
    data_dir: Path,
    *,
    scalable_clock: Clock | None = None,
    settings: ScalableTopicSettings | None = None,
    step_hook: StepHook | None = None,
    **config: Any,
) -> ScalableStack:
    broker = await open_broker_stack(data_dir, **config)
    try:
        scalable = await install_scalable_topics(
            broker.service,
            broker.resources,
            settings=settings,
            step_hook=step_hook,
            environ={},
            clock=scalable_clock,
        )
        await scalable.start()
    except BaseException:
        await broker.close()
        raise
    return ScalableStack(broker, scalable)


@dataclass
class OtherBroker:
    """A second broker's control plane: its own metadata session, the same data-plane broker."""

    store: MetadataStore
    scalable: ScalableTopicService

    async def close(self) -> None:
        await self.scalable.close()
        await self.store.close()


async def second_service(
    stack: ScalableStack,
    *,
    broker_url: str = "pulsar://127.0.0.1:1",
    clock: Clock | None = None,
    settings: ScalableTopicSettings | None = None,
    step_hook: StepHook | None = None,
    web_service_url: str | None = None,
) -> OtherBroker:
    """Another broker's scalable-topic service: a new session on the same metadata store (so it
    competes in elections as another broker would) over the same data-plane broker."""
    broker = stack.broker
    store = await open_store(broker.config.metadata_store_url)
    service = ScalableTopicService(
        store=store,
        segments=LocalSegmentAdmin(broker.service),
        namespaces=BrokerNamespaces(broker.resources, True),
        broker_url=broker_url,
        clock=clock or SystemClock(),
        settings=settings or ScalableTopicSettings(),
        step_hook=step_hook,
    )
    try:
        await service.start(web_service_url)
    except BaseException:
        await store.close()
        raise
    return OtherBroker(store, service)
