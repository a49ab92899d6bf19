"""``AdminClient.backlog``: backlog quotas, retention and message TTL (:mod:`braid.admin.client`).

Quotas and message TTL are set on a namespace (``tenant/namespace``), a ``persistent://`` topic,
or a scalable ``topic://`` topic (covering its whole segment DAG); retention on a namespace.
Bodies and paths are Pulsar's (:mod:`braid.admin.backlog_limits`); the broker validates them
(a bad policy or type comes back as a 412 naming it).
"""

from __future__ import annotations

from typing import Any

from braid.admin.client_transport import _Http, _namespace_path, _topic_path
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName


def _target(target: str) -> str:
    """The admin path of a namespace, a persistent topic or a scalable topic."""
    if "://" not in target:
        return f"/admin/v2/namespaces/{_namespace_path(target)}"
    topic = TopicName.parse(target)
    if topic.domain is TopicDomain.PERSISTENT:
        return f"/admin/v2/persistent/{_topic_path(topic)}"
    if topic.domain is TopicDomain.TOPIC:
        return f"/admin/v2/scalable/{_topic_path(topic)}"
    raise InvalidInputError(f"backlog quotas are set on namespaces and topics, not on {topic}")


def _ns(namespace: str) -> str:
    return f"/admin/v2/namespaces/{_namespace_path(namespace)}"


class BacklogPolicies:
    """Backlog quotas (namespaces and topics), retention and message TTL (namespaces)."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def get_backlog_quotas(self, target: str) -> dict[str, Any]:
        """The quotas set on ``target`` by type (``{}``: none; the next level's apply)."""
        result: dict[str, Any] = self._http.call("GET", _target(target) + "/backlogQuotaMap")
        return result

    def set_backlog_quota(
        self,
        target: str,
        *,
        limit_size: int = -1,
        limit_time: int = -1,
        policy: str = "producer_request_hold",
        quota_type: str = "destination_storage",
    ) -> None:
        """Set a quota: ``limit_size`` bytes / ``limit_time`` seconds (``-1``: none) and the
        policy applied over it (``producer_request_hold``, ``producer_exception`` or
        ``consumer_backlog_eviction``); ``quota_type`` is ``destination_storage`` or
        ``message_age``."""
        body = {"limitSize": limit_size, "limitTime": limit_time, "policy": policy}
        self._http.call(
            "POST",
            _target(target) + "/backlogQuota",
            body=body,
            params={"backlogQuotaType": quota_type},
        )

    def remove_backlog_quota(self, target: str, quota_type: str = "destination_storage") -> None:
        self._http.call(
            "DELETE", _target(target) + "/backlogQuota", params={"backlogQuotaType": quota_type}
        )

    def get_retention(self, namespace: str) -> dict[str, Any] | None:
        """``{"retentionTimeInMinutes", "retentionSizeInMB"}``, or ``None`` (broker default)."""
        result: dict[str, Any] | None = self._http.call("GET", _ns(namespace) + "/retention")
        return result

    def set_retention(self, namespace: str, time_in_minutes: int, size_in_mb: int) -> None:
        """Keep consumed data this long / this much (``-1``: unlimited, 0: delete at once)."""
        body = {"retentionTimeInMinutes": time_in_minutes, "retentionSizeInMB": size_in_mb}
        self._http.call("POST", _ns(namespace) + "/retention", body=body)

    def remove_retention(self, namespace: str) -> None:
        self._http.call("DELETE", _ns(namespace) + "/retention")

    def get_message_ttl(self, target: str) -> int | None:
        """The TTL in seconds of a namespace or topic, or ``None`` (the next level applies)."""
        result: int | None = self._http.call("GET", _target(target) + "/messageTTL")
        return result

    def set_message_ttl(self, target: str, seconds: int) -> None:
        """Acknowledge messages older than ``seconds`` for every subscription (0: never)."""
        if "://" in target:  # Pulsar's topic endpoint takes it as a query parameter
            params = {"messageTTL": str(seconds)}
            self._http.call("POST", _target(target) + "/messageTTL", params=params)
        else:
            self._http.call("POST", _target(target) + "/messageTTL", body=seconds)

    def remove_message_ttl(self, target: str) -> None:
        self._http.call("DELETE", _target(target) + "/messageTTL")


__all__ = ["BacklogPolicies"]
