"""Where a scalable topic's leader-only operations run: on this broker's controller, or on the
controller leader's broker through its admin API. The one place that decides it.

Every leader-only request (:mod:`braid.scalable.leader_operations`: split, merge, create, delete
or seek a subscription, stats) goes through :meth:`LeaderRouter.run`; nothing else compares
leaders. :meth:`LeaderRouter.locate` answers the question on its own: this broker leads
(``HERE``), another broker does (``THERE``, with its service URL; the forwarder reaches it), or
nobody does right now (``NOWHERE``: an election is settling, or the store still names this
broker's expired session).

Rules, for an operation that needs the leader:

* this broker leads: run it on the local controller (forwarded or not);
* nobody leads: refuse with :class:`~braid.scalable.errors.NotLeader` ("electing a leader; retry
  shortly");
* another broker leads and the request was already forwarded to this one: refuse with
  ``NotLeader`` naming the leader, so a request never travels twice while an election settles;
* another broker leads: forward it (:class:`~braid.scalable.forwarding.LeaderForwarder`); an
  unreachable leader is a retriable ``NotLeader``.

An operation with ``local_fallback`` (stats) runs on the local controller instead of each refusal
above, and when the leader cannot be reached.

Consumer registration (command 73) is not routed: a client session cannot be forwarded, so the
controller itself refuses a registration it does not lead, and the client looks the topic up again
and connects to the leader (``docs/protocol.md#consumer-assignment``).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from braid.core.names import TopicName
from braid.scalable.controller import ScalableTopicController
from braid.scalable.errors import NotLeader
from braid.scalable.forwarding import LeaderForwarder
from braid.scalable.leader_operations import LeaderOperation

R = TypeVar("R")

#: This broker's controller of a topic, started on demand (the service's registry).
ControllerLookup = Callable[[TopicName], Awaitable[ScalableTopicController]]


class Where(enum.Enum):
    """Who leads a topic's controller, as this broker sees it now."""

    HERE = "here"
    THERE = "there"
    NOWHERE = "nowhere"


@dataclass(frozen=True)
class LeaderLocation:
    """The answer of :meth:`LeaderRouter.locate`.

    Attributes:
        where: this broker, another one, or nobody.
        controller: this broker's controller of the topic (leader or follower).
        leader_url: the leader's broker service URL when ``where`` is ``THERE``.
    """

    where: Where
    controller: ScalableTopicController
    leader_url: str | None = None

    def __post_init__(self) -> None:
        if (self.where is Where.THERE) != (self.leader_url is not None):
            raise ValueError(f"a leader URL goes with THERE only: {self.where}, {self.leader_url}")


class LeaderRouter:
    """Runs leader-only operations where the topic's controller leader is."""

    def __init__(
        self, *, broker_url: str, controllers: ControllerLookup, forwarder: LeaderForwarder
    ) -> None:
        self._broker_url = broker_url
        self._controllers = controllers
        self._forwarder = forwarder

    async def locate(self, topic: TopicName) -> LeaderLocation:
        """Who leads ``topic``'s controller now.

        Raises:
            ScalableTopicNotFound: the topic does not exist (from the controller registry).
        """
        return await self._locate(await self._controllers(topic))

    async def _locate(self, controller: ScalableTopicController) -> LeaderLocation:
        if controller.is_leader:
            return LeaderLocation(Where.HERE, controller)
        leader = await controller.read_leader_url()
        if leader is None or leader == self._broker_url:
            return LeaderLocation(Where.NOWHERE, controller)
        return LeaderLocation(Where.THERE, controller, leader)

    async def run(
        self, topic: TopicName, operation: LeaderOperation[R], *, forwarded: bool = False
    ) -> R:
        """Run ``operation`` on the leader of ``topic`` (see the module docstring for the rules).

        Args:
            forwarded: the request came from another broker
                (:data:`~braid.scalable.forwarding.FORWARDED_HEADER`).

        Raises:
            NotLeader: no leader can serve it now (retriable); whatever the operation raises.
        """
        controller = await self._controllers(topic)
        fallback = operation.local_fallback
        if fallback and forwarded:
            return await operation.run(controller)
        location = await self._locate(controller)
        leader = location.leader_url
        if location.where is Where.HERE:
            return await operation.run(controller)
        if leader is None:  # NOWHERE
            if fallback:
                return await operation.run(controller)
            raise NotLeader(f"the controller of {topic} is electing a leader; retry shortly")
        if forwarded:
            raise NotLeader(
                f"this broker is not the controller leader of {topic} (the leader is {leader})"
            )
        try:
            return await self._forwarder.send(leader, topic, operation)
        except NotLeader:
            if not fallback:
                raise
            return await operation.run(controller)


__all__ = ["ControllerLookup", "LeaderLocation", "LeaderRouter", "Where"]
