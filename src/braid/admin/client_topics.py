"""``AdminClient.topics``: the ``/admin/v2/persistent`` group of :mod:`braid.admin.client`
(``persistent://`` topics, partitioned or not)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from braid.admin.client_topic_admin import PolicySettings, TopicOperations
from braid.admin.client_transport import _Http, _namespace_path, _q, _topic, _topic_path
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName


class Topics(PolicySettings, TopicOperations):
    """``/admin/v2/persistent``: classic ``persistent://`` topics (with their settings and the
    inspection and cursor operations of :mod:`braid.admin.client_topic_admin`)."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def _path(self, topic: str | TopicName) -> str:
        return f"/admin/v2/persistent/{_topic_path(_topic(topic, TopicDomain.PERSISTENT))}"

    def list(self, namespace: str) -> list[str]:
        """The namespace's persistent topics (full names)."""
        result: list[str] = self._http.call(
            "GET", f"/admin/v2/persistent/{_namespace_path(namespace)}"
        )
        return result

    def create(self, topic: str | TopicName) -> None:
        """Create a non-partitioned topic (409 if it exists)."""
        self._http.call("PUT", self._path(topic))

    def delete(self, topic: str | TopicName) -> None:
        self._http.call("DELETE", self._path(topic))

    def terminate(self, topic: str | TopicName) -> dict[str, Any]:
        """Seal the topic; returns its last message id ``{"ledgerId", "entryId", ...}``."""
        result: dict[str, Any] = self._http.call("POST", f"{self._path(topic)}/terminate")
        return result

    def migrate_to_scalable(
        self,
        topic: str | TopicName,
        *,
        segments: int | None = None,
        name: str | None = None,
        subscription_modes: dict[str, str] | None = None,
        prepare: bool = False,
    ) -> dict[str, Any]:
        """Migrate the topic to a scalable topic (ADR 0063) and return the migration's status;
        ``prepare`` stops before anything is terminated. Resumes a recorded, unfinished one."""
        body: dict[str, Any] = {"prepare": prepare}
        if segments is not None:
            body["segments"] = segments
        if name is not None:
            body["name"] = name
        if subscription_modes:
            body["subscriptionModes"] = subscription_modes
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._path(topic)}/migrateToScalable", body=body
        )
        return result

    def migration_status(self, topic: str | TopicName) -> dict[str, Any]:
        """The status of the topic's migration to a scalable topic (404: none)."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/migrateToScalable")
        return result

    def rollback_migration(self, topic: str | TopicName) -> dict[str, Any]:
        """Roll the topic's migration back (409 once a partition was terminated)."""
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._path(topic)}/migrateToScalable/rollback"
        )
        return result

    def stats(self, topic: str | TopicName) -> dict[str, Any]:
        """Counters, storage, publishers and subscriptions (with backlog) of the topic."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/stats")
        return result

    def unload(self, topic: str | TopicName) -> None:
        """Close the topic on its owner; its clients reconnect and it is loaded again."""
        self._http.call("PUT", f"{self._path(topic)}/unload")

    def compact(self, topic: str | TopicName) -> None:
        """Start compacting the topic (the run continues on the broker; 409 while one runs)."""
        self._http.call("PUT", f"{self._path(topic)}/compaction")

    def compaction_status(self, topic: str | TopicName) -> dict[str, Any]:
        """``{"status": "NOT_RUN" | "RUNNING" | "SUCCESS" | "ERROR", "lastError": ...}``."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/compaction")
        return result

    def list_partitioned(self, namespace: str) -> builtins.list[str]:
        """The namespace's partitioned topics (full names, without partition suffixes)."""
        result: builtins.list[str] = self._http.call(
            "GET", f"/admin/v2/persistent/{_namespace_path(namespace)}/partitioned"
        )
        return result

    def create_partitioned(self, topic: str | TopicName, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` partitions (409 if the name is taken)."""
        self._http.call("PUT", f"{self._path(topic)}/partitions", body=_partitions(partitions))

    def get_partitioned_metadata(self, topic: str | TopicName) -> dict[str, Any]:
        """``{"partitions": N}`` (0 for a topic that is not partitioned)."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/partitions")
        return result

    def update_partitioned(self, topic: str | TopicName, partitions: int) -> None:
        """Raise the number of partitions to ``partitions`` (it can only grow)."""
        self._http.call("POST", f"{self._path(topic)}/partitions", body=_partitions(partitions))

    def delete_partitioned(self, topic: str | TopicName, *, force: bool = False) -> None:
        """Delete a partitioned topic and its partitions (``force``: even with clients)."""
        self._http.call(
            "DELETE",
            f"{self._path(topic)}/partitions",
            params={"force": "true"} if force else None,
        )

    def permissions(self, topic: str | TopicName) -> dict[str, builtins.list[str]]:
        """Role -> actions on the topic: the namespace's grants with the topic's own added."""
        result: dict[str, builtins.list[str]] = self._http.call(
            "GET", f"{self._path(topic)}/permissions"
        )
        return result

    def grant_permission(self, topic: str | TopicName, role: str, actions: Sequence[str]) -> None:
        """Grant ``role`` exactly ``actions`` on this topic (its partitions included)."""
        self._http.call(
            "POST", f"{self._path(topic)}/permissions/{_q(role)}", body=builtins.list(actions)
        )

    def revoke_permission(self, topic: str | TopicName, role: str) -> None:
        """Revoke ``role``'s grant on this topic (412 when the grant is the namespace's)."""
        self._http.call("DELETE", f"{self._path(topic)}/permissions/{_q(role)}")


def _partitions(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"the number of partitions is an integer >= 1, got {value!r}")
    return value


__all__ = ["Topics"]
