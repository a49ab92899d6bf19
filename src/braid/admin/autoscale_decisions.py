"""Admin REST: a scalable topic's auto-scale decision history (taken and not taken, with reasons).

``GET /admin/v2/scalable/{tenant}/{namespace}/{topic}/autoScaleDecisions`` answers the controller
leader's :class:`~braid.scalable.autoscale_decisions.AutoScaleDecisionLog`::

    {"leaderBrokerUrl": "pulsar://...", "running": true, "seq": 42,
     "taken": [{"seq", "atMs", "firstAtMs", "count", "trigger", "action", "reason", "detail",
                "segmentIds", "splitHash"}, ...],
     "notTaken": [... the same shape, "action": "none", "count" folded repeats ...]}

The log lives in memory of the leader's auto-scaler, so the request is a leader-only read
(:class:`~braid.scalable.leader_operations.AutoScaleDecisions`) that the service's
:class:`~braid.scalable.leader_router.LeaderRouter` runs on the leader - forwarded with
:data:`~braid.scalable.forwarding.FORWARDED_HEADER`, as the topic's stats are; a broker that gets a
forwarded request, or cannot reach the leader, answers its own (empty when it has never led the
topic). 404 when the topic does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.core.names import TopicDomain, TopicName
from braid.scalable.controller import ScalableTopicController
from braid.scalable.forwarding import FORWARDED_HEADER
from braid.scalable.leader_operations import AutoScaleDecisions
from braid.scalable.service import ScalableTopicService

_FORWARDED = Annotated[str | None, Header(alias=FORWARDED_HEADER, include_in_schema=False)]


def autoscale_decisions_router(service: ScalableTopicService) -> APIRouter:
    """The decision-history endpoint (mounted under ``/admin/v2``)."""
    router = APIRouter()

    async def local_history(controller: ScalableTopicController) -> dict[str, Any]:
        leader = service.broker_url if controller.is_leader else await controller.read_leader_url()
        return _history(service, controller.topic, leader)

    @router.get(
        "/scalable/{tenant}/{namespace}/{topic}/autoScaleDecisions",
        tags=["scalable topics"],
        summary="The auto-scaler's recent decisions, taken and not taken, with their reasons",
    )
    async def autoscale_decisions(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, forwarded: _FORWARDED = None
    ) -> Any:
        name = TopicName(TopicDomain.TOPIC, tenant, namespace, topic)
        operation = AutoScaleDecisions(local_history)
        return await service.router.run(name, operation, forwarded=forwarded is not None)

    return router


def _history(service: ScalableTopicService, topic: TopicName, leader: str | None) -> dict[str, Any]:
    scaler = service.auto_scale.scaler(topic)
    doc: dict[str, Any] = {"leaderBrokerUrl": leader, "running": False}
    if scaler is None:
        doc.update({"seq": 0, "taken": [], "notTaken": []})
        return doc
    doc["running"] = scaler.running
    doc.update(scaler.decisions.to_json())
    return doc


__all__ = ["autoscale_decisions_router"]
