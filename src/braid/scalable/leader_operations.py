"""The leader-only requests on a scalable topic, as values (PIP-468: only the controller leader
splits, merges and changes subscriptions; its coordinators alone know the live consumers).

Each request is a frozen :class:`LeaderOperation`: what to do on the leader's controller
(:meth:`~LeaderOperation.run`) and how to read the leader's answer when the request was forwarded
(:meth:`~LeaderOperation.result_of`). :class:`~braid.scalable.leader_router.LeaderRouter` decides
where it runs; :class:`~braid.scalable.forwarding.LeaderForwarder` owns its admin REST form. So an
operation is written once here, once in the forwarder's request table, and nowhere else.

:attr:`LeaderOperation.local_fallback` marks a read that any broker's controller can answer,
less well (stats: a follower has no live consumer sessions): it is served locally when no other
broker can serve it, instead of failing with ``NotLeader``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import TopicName
from braid.scalable.controller import ScalableTopicController
from braid.scalable.resources import SubscriptionType

R = TypeVar("R")


class LeaderOperation(Generic[R]):
    """A request only the topic's controller leader serves."""

    #: Served by this broker's controller when no other broker can serve it (see module doc).
    local_fallback: ClassVar[bool] = False

    async def run(self, controller: ScalableTopicController) -> R:
        """Run on this broker's controller (the leader, or any controller if ``local_fallback``)."""
        raise NotImplementedError

    def result_of(self, answer: Any) -> R:
        """The result from the leader's JSON answer to the forwarded request."""
        raise NotImplementedError


class _NoResult(LeaderOperation[None]):
    def result_of(self, answer: Any) -> None:
        return None


class _LayoutResult(LeaderOperation[SegmentLayout]):
    def result_of(self, answer: Any) -> SegmentLayout:
        return layout_from_metadata(answer)


@dataclass(frozen=True)
class Split(_LayoutResult):
    """Split an active segment (at its midpoint, or where the upper child starts); returns the
    new layout."""

    segment_id: int
    split_hash: int | None = None

    async def run(self, controller: ScalableTopicController) -> SegmentLayout:
        return await controller.split(self.segment_id, self.split_hash)


@dataclass(frozen=True)
class Merge(_LayoutResult):
    """Merge two or more hash-adjacent active segments; returns the new layout."""

    segment_ids: Sequence[int]

    async def run(self, controller: ScalableTopicController) -> SegmentLayout:
        return await controller.merge(self.segment_ids)


@dataclass(frozen=True)
class CreateSubscription(_NoResult):
    """Create a subscription on every segment (its cursors at the earliest or latest entry)."""

    subscription: str
    sub_type: SubscriptionType
    earliest: bool = False

    async def run(self, controller: ScalableTopicController) -> None:
        await controller.create_subscription(
            self.subscription, self.sub_type, earliest=self.earliest
        )


@dataclass(frozen=True)
class DeleteSubscription(_NoResult):
    """Delete a subscription from every segment (its consumers are unregistered)."""

    subscription: str

    async def run(self, controller: ScalableTopicController) -> None:
        await controller.delete_subscription(self.subscription)


@dataclass(frozen=True)
class SeekSubscription(_NoResult):
    """Move a subscription to a publish time on every segment."""

    subscription: str
    timestamp_ms: int

    async def run(self, controller: ScalableTopicController) -> None:
        await controller.seek_subscription(self.subscription, self.timestamp_ms)


StatsDescriber = Callable[[TopicName, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Stats(LeaderOperation[dict[str, Any]]):
    """The topic's stats, completed by ``describe`` (the auto-scale state) where they are taken.

    A read: served by this broker's controller when the leader cannot be reached.
    """

    describe: StatsDescriber = field(compare=False)
    local_fallback: ClassVar[bool] = True

    async def run(self, controller: ScalableTopicController) -> dict[str, Any]:
        return await self.describe(controller.topic, await controller.stats())

    def result_of(self, answer: Any) -> dict[str, Any]:
        result: dict[str, Any] = answer
        return result


ControllerDescriber = Callable[[ScalableTopicController], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AutoScaleDecisions(LeaderOperation[dict[str, Any]]):
    """The auto-scaler's recent decisions, as ``describe`` reads them from the broker that runs
    the auto-scaler (the leader's). A read: served locally when the leader cannot be reached."""

    describe: ControllerDescriber = field(compare=False)
    local_fallback: ClassVar[bool] = True

    async def run(self, controller: ScalableTopicController) -> dict[str, Any]:
        return await self.describe(controller)

    def result_of(self, answer: Any) -> dict[str, Any]:
        result: dict[str, Any] = answer
        return result


__all__ = [
    "AutoScaleDecisions",
    "ControllerDescriber",
    "CreateSubscription",
    "DeleteSubscription",
    "LeaderOperation",
    "Merge",
    "SeekSubscription",
    "Split",
    "Stats",
    "StatsDescriber",
]
