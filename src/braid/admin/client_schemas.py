"""``AdminClient.schemas``: the ``/admin/v2/schemas`` group of :mod:`braid.admin.client` (a
topic's schema versions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from braid.admin.client_transport import _Http, _topic_path
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName


class Schemas:
    """``/admin/v2/schemas``: a topic's schema versions (shared by its partitions or segments)."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    @staticmethod
    def _path(topic: str | TopicName) -> str:
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.domain is TopicDomain.SEGMENT:
            name = name.as_segment().parent
        return f"/admin/v2/schemas/{_topic_path(name)}"

    def get(self, topic: str | TopicName, version: int | None = None) -> dict[str, Any]:
        """The latest version (or ``version``): ``{"version", "type", "timestamp", "data",
        "properties"}``; 404 when the topic has no schema."""
        suffix = "" if version is None else f"/{_version(version)}"
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/schema{suffix}")
        return result

    def get_all(self, topic: str | TopicName) -> list[dict[str, Any]]:
        """Every version since the schema was last deleted, oldest first."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/schemas")
        versions: list[dict[str, Any]] = result.get("getSchemaResponses", [])
        return versions

    def upload(
        self,
        topic: str | TopicName,
        schema_type: str,
        definition: str,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        """Register a schema (``"AVRO"``, ``"JSON"``, ``"STRING"``, ...) and return its version;
        an incompatible one is refused (409) under the namespace's strategy."""
        result: dict[str, Any] = self._http.call(
            "POST",
            f"{self._path(topic)}/schema",
            body={"type": schema_type, "schema": definition, "properties": dict(properties or {})},
        )
        return int(result["version"]["version"])

    def delete(self, topic: str | TopicName, *, force: bool = False) -> int | None:
        """Delete the schema; returns the delete's version (``None`` with ``force``, which
        removes every version and its ledger)."""
        result: dict[str, Any] = self._http.call(
            "DELETE",
            f"{self._path(topic)}/schema",
            params={"force": "true"} if force else None,
        )
        version = result.get("version")
        return None if version is None else int(version)


def _version(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"a schema version is an integer >= 0, got {value!r}")
    return value


__all__ = ["Schemas"]
