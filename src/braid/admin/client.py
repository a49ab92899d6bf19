"""``AdminClient``: a synchronous Python client of Braid's admin REST API (``/admin/v2``).

One method per endpoint, grouped as the REST API and the ``braid admin`` command are::

    from braid.admin import AdminClient

    with AdminClient("http://127.0.0.1:8080") as admin:
        admin.scalable_topics.create("topic://public/default/orders", segments=4)
        layout = admin.scalable_topics.split("topic://public/default/orders", 1)
        admin.scalable_topics.merge("topic://public/default/orders", [3, 4, 5])

Groups: :attr:`AdminClient.tenants`, :attr:`~AdminClient.namespaces`, :attr:`~AdminClient.topics`
(``persistent://``, partitioned or not), :attr:`~AdminClient.schemas` (a topic's schema
versions), :attr:`~AdminClient.scalable_topics` (``topic://``) and
:attr:`~AdminClient.segments` (``segment://``), plus :meth:`AdminClient.health`,
:meth:`~AdminClient.broker_health` and :meth:`~AdminClient.clusters`.

Values are plain JSON: dicts, lists, strings, ``None`` for the 204 answers. Methods that return a
segment layout (``scalable_topics.get``, ``split``, ``merge``) return the topic's
``ScalableTopicMetadata`` document (PIP-468's JSON: ``epoch``, ``nextSegmentId``, ``segments``
keyed by id string, inclusive ``hashRange``, ``properties``);
``braid.core.layout_codec.layout_from_metadata(doc)`` turns it into a validated layout.

Names are checked here before a request leaves, with :mod:`braid.core.names` (the server's own
rules): a scalable topic is ``topic://tenant/ns/name`` (or the short ``tenant/ns/name`` / ``name``
forms, which mean ``public/default``), a persistent topic ``persistent://...`` (same short forms),
a segment ``segment://tenant/ns/name/<descriptor>``, a namespace ``tenant/namespace``.

Every failure is an :class:`AdminError`, which is also the :mod:`braid.core.errors` category of
the answer: 404 :class:`~braid.core.errors.NotFoundError`; 409
:class:`~braid.core.errors.AlreadyExistsError`, :class:`~braid.core.errors.ConflictError`
(retriable), :class:`~braid.core.errors.IllegalStateError` or
:class:`~braid.core.errors.TopicTerminatedError` (a Braid broker names the category in its error
body; another server's bare 409 is a conflict); 400/412/422
:class:`~braid.core.errors.InvalidInputError`; 401/403
:class:`~braid.core.errors.AuthorizationError`; 503 and "nobody answers"
:class:`~braid.core.errors.ServiceUnavailableError` (retriable); a timeout
:class:`~braid.core.errors.DeadlineExceededError`. The message is the server's ``reason``.

This module imports only :mod:`httpx` and :mod:`braid.core` (no FastAPI, no broker), so scripts
and the CLI load it quickly.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from braid.admin.client_errors import (
    AdminAlreadyExistsError,
    AdminAuthorizationError,
    AdminConflictError,
    AdminError,
    AdminIllegalStateError,
    AdminInvalidInputError,
    AdminNotFoundError,
    AdminTimeoutError,
    AdminTopicTerminatedError,
    AdminUnavailableError,
    error_from_response,
)
from braid.core.errors import InvalidInputError
from braid.core.names import SegmentTopicName, TopicDomain, TopicName

#: Where ``braid standalone`` serves the admin API by default.
DEFAULT_URL = "http://127.0.0.1:8080"

#: Subscription types of a scalable topic (PIP-468; ``docs/scalable-topics.md#consumers``).
SUBSCRIPTION_TYPES = ("STREAM", "QUEUE", "CHECKPOINT")
#: Where a new subscription's cursors start on the segments.
INITIAL_POSITIONS = ("Earliest", "Latest")

# --- names ------------------------------------------------------------------------------------


def _q(part: str) -> str:
    """One URL path segment."""
    return quote(part, safe="")


def _namespace_path(namespace: str) -> str:
    """``tenant/namespace`` as a URL path (each part quoted)."""
    if not isinstance(namespace, str):
        raise InvalidInputError(f"a namespace must be a string, got {type(namespace).__name__}")
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidInputError(
            f"invalid namespace {namespace!r}: expected 'tenant/namespace', e.g. 'public/default'"
        )
    return f"{_q(parts[0])}/{_q(parts[1])}"


def _tenant_path(tenant: str) -> str:
    if not isinstance(tenant, str) or not tenant or "/" in tenant:
        raise InvalidInputError(f"invalid tenant name {tenant!r}")
    return _q(tenant)


def _topic(name: str | TopicName, domain: TopicDomain) -> TopicName:
    topic = name if isinstance(name, TopicName) else TopicName.parse(name, default_domain=domain)
    if topic.domain is not domain:
        raise InvalidInputError(f"{topic} is not a {domain.value}:// topic name")
    return topic


def _topic_path(topic: TopicName) -> str:
    return f"{_q(topic.tenant)}/{_q(topic.namespace)}/{_q(topic.local_name)}"


def _segment(name: str | SegmentTopicName) -> SegmentTopicName:
    return name if isinstance(name, SegmentTopicName) else SegmentTopicName.parse(name)


def _segment_path(segment: SegmentTopicName) -> str:
    return f"{_topic_path(segment.parent)}/{_q(segment.descriptor)}"


def _segment_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"a segment id is an integer >= 0, got {value!r}")
    return value


def _choice(kind: str, value: str, choices: Sequence[str]) -> str:
    for choice in choices:
        if isinstance(value, str) and value.lower() == choice.lower():
            return choice
    raise InvalidInputError(f"invalid {kind} {value!r}: expected one of {', '.join(choices)}")


# --- transport --------------------------------------------------------------------------------


class _Http:
    """Requests, answers and the mapping of failures to :class:`AdminError` (one place)."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client = client
        self.url = url

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """Send ``method path``; returns the JSON (or text) answer, ``None`` for no content.

        Raises:
            AdminError: the category matching the answer, or why there was none.
        """
        target = f"{self.url}{path}"
        try:
            response = self.client.request(
                method, path, json=body, params=dict(params) if params else None
            )
        except httpx.TimeoutException as exc:
            raise AdminTimeoutError(
                f"the broker at {self.url} did not answer {method} {path} in time ({exc})",
                method=method,
                url=target,
            ) from exc
        except httpx.ConnectError as exc:
            raise AdminUnavailableError(
                f"no broker answers at {self.url} (is `braid standalone` running there? "
                f"set --url or BRAID_ADMIN_URL): {exc}",
                method=method,
                url=target,
            ) from exc
        except httpx.HTTPError as exc:
            raise AdminUnavailableError(
                f"{method} {target} failed: {type(exc).__name__}: {exc}", method=method, url=target
            ) from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            try:
                return response.json()
            except ValueError as exc:
                raise AdminError(
                    f"the broker answered {method} {path} with invalid JSON: {exc}",
                    status=response.status_code,
                    method=method,
                    url=target,
                ) from exc
        return response.text


# --- groups -----------------------------------------------------------------------------------


class Tenants:
    """``/admin/v2/tenants``: tenants and their admin roles and allowed clusters."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def list(self) -> list[str]:
        """The tenants' names."""
        result: list[str] = self._http.call("GET", "/admin/v2/tenants")
        return result

    def get(self, tenant: str) -> dict[str, Any]:
        """``{"adminRoles": [...], "allowedClusters": [...]}``."""
        result: dict[str, Any] = self._http.call("GET", f"/admin/v2/tenants/{_tenant_path(tenant)}")
        return result

    def create(
        self,
        tenant: str,
        *,
        admin_roles: Iterable[str] | None = None,
        allowed_clusters: Iterable[str] | None = None,
    ) -> None:
        """Create a tenant; ``allowed_clusters`` defaults to the broker's cluster.

        Raises:
            AdminAlreadyExistsError, AdminInvalidInputError (name, unknown cluster).
        """
        self._http.call(
            "PUT",
            f"/admin/v2/tenants/{_tenant_path(tenant)}",
            body=_tenant_body(admin_roles, allowed_clusters),
        )

    def update(
        self,
        tenant: str,
        *,
        admin_roles: Iterable[str] | None = None,
        allowed_clusters: Iterable[str] | None = None,
    ) -> None:
        """Replace the tenant's info (omitted fields: no roles, the broker's cluster)."""
        self._http.call(
            "POST",
            f"/admin/v2/tenants/{_tenant_path(tenant)}",
            body=_tenant_body(admin_roles, allowed_clusters),
        )

    def delete(self, tenant: str) -> None:
        """Delete a tenant that has no namespaces left (409 otherwise)."""
        self._http.call("DELETE", f"/admin/v2/tenants/{_tenant_path(tenant)}")


def _tenant_body(
    admin_roles: Iterable[str] | None, allowed_clusters: Iterable[str] | None
) -> dict[str, list[str]] | None:
    if admin_roles is None and allowed_clusters is None:
        return None
    body: dict[str, list[str]] = {"adminRoles": list(admin_roles or ())}
    if allowed_clusters is not None:
        body["allowedClusters"] = list(allowed_clusters)
    return body


class Namespaces:
    """``/admin/v2/namespaces``: namespaces (``tenant/namespace``) and their policies."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def list(self, tenant: str) -> list[str]:
        """The tenant's namespaces as ``tenant/namespace``."""
        result: list[str] = self._http.call("GET", f"/admin/v2/namespaces/{_tenant_path(tenant)}")
        return result

    def get(self, namespace: str) -> dict[str, Any]:
        """The namespace's policies (Pulsar's ``Policies`` keys; unset keys are absent)."""
        result: dict[str, Any] = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}"
        )
        return result

    def create(self, namespace: str, policies: Mapping[str, Any] | None = None) -> None:
        """Create a namespace, optionally with policies, e.g.
        ``{"deduplicationEnabled": True, "retention_policies": {"retentionTimeInMinutes": 60,
        "retentionSizeInMB": -1}}``."""
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}",
            body=None if policies is None else dict(policies),
        )

    def delete(self, namespace: str) -> None:
        """Delete a namespace without topics (409 otherwise)."""
        self._http.call("DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}")

    def get_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication setting; ``None`` = the broker default applies."""
        result: bool | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication"
        )
        return result

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn deduplication on or off for the namespace's topics."""
        if not isinstance(enabled, bool):
            raise InvalidInputError(f"enabled must be True or False, got {enabled!r}")
        self._http.call(
            "POST", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication", body=enabled
        )

    def remove_deduplication(self, namespace: str) -> None:
        """Drop the namespace setting: the broker default applies again."""
        self._http.call(
            "DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication"
        )

    def get_scalable_topic_auto_scale_policy(self, namespace: str) -> dict[str, Any] | None:
        """The namespace's PIP-483 auto-scale override of its scalable topics (``None``: none)."""
        result: dict[str, Any] | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy"
        )
        return result

    def set_scalable_topic_auto_scale_policy(
        self, namespace: str, policy: Mapping[str, Any]
    ) -> None:
        """Set the namespace's ``AutoScalePolicyOverride``: camelCase knobs, each optional, e.g.
        ``{"enabled": False}`` or ``{"maxSegments": 16, "splitCooldownMs": 30000}``.

        Raises:
            AdminInvalidInputError: an unknown key, a value out of range, or values inconsistent
                with ``broker.conf`` (the message names the keys).
        """
        self._http.call(
            "POST",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy",
            body=_policy(policy),
        )

    def remove_scalable_topic_auto_scale_policy(self, namespace: str) -> None:
        """Drop the namespace's override: ``broker.conf`` applies again."""
        self._http.call(
            "DELETE",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy",
        )

    def get_schema_compatibility_strategy(self, namespace: str) -> str:
        """The namespace's schema compatibility strategy (``"UNDEFINED"``: the broker's)."""
        result: str = self._http.call(
            "GET",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/schemaCompatibilityStrategy",
        )
        return result

    def set_schema_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        """Set it: ``ALWAYS_COMPATIBLE``, ``ALWAYS_INCOMPATIBLE``, ``BACKWARD``, ``FORWARD``,
        ``FULL``, a ``_TRANSITIVE`` form, or ``UNDEFINED`` (use the broker's)."""
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/schemaCompatibilityStrategy",
            body=strategy,
        )

    def get_compaction_threshold(self, namespace: str) -> int | None:
        """Bytes after a topic's compaction horizon that trigger compaction (``None``: the
        broker's ``brokerServiceCompactionThresholdInBytes``; 0: never)."""
        result: int | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold"
        )
        return result

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        """Set the namespace's compaction threshold in bytes (0: never compact automatically)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise InvalidInputError(f"a compaction threshold is 0 or more bytes, got {threshold!r}")
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold",
            body=threshold,
        )

    def remove_compaction_threshold(self, namespace: str) -> None:
        """Drop the namespace's threshold: the broker's applies again."""
        self._http.call(
            "DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold"
        )


class Topics:
    """``/admin/v2/persistent``: classic ``persistent://`` topics."""

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

    def stats(self, topic: str | TopicName) -> dict[str, Any]:
        """Counters, storage, publishers and subscriptions (with backlog) of the topic."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/stats")
        return result

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


def _partitions(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"the number of partitions is an integer >= 1, got {value!r}")
    return value


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


class ScalableTopics:
    """``/admin/v2/scalable``: ``topic://`` topics, their segment DAG and subscriptions."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def _path(self, topic: str | TopicName) -> str:
        return f"/admin/v2/scalable/{_topic_path(_topic(topic, TopicDomain.TOPIC))}"

    def list(self, namespace: str) -> list[str]:
        """The namespace's scalable topics (``topic://`` names)."""
        result: list[str] = self._http.call(
            "GET", f"/admin/v2/scalable/{_namespace_path(namespace)}"
        )
        return result

    def create(
        self,
        topic: str | TopicName,
        segments: int = 1,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Create a scalable topic with ``segments`` equal initial hash ranges.

        Raises:
            AdminAlreadyExistsError, AdminNotFoundError (namespace), AdminInvalidInputError.
        """
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            raise InvalidInputError(f"segments must be an integer >= 1, got {segments!r}")
        body: dict[str, Any] = {"numInitialSegments": segments}
        if properties:
            body["properties"] = dict(properties)
        self._http.call("PUT", self._path(topic), body=body)

    def get(self, topic: str | TopicName) -> dict[str, Any]:
        """The topic's ``ScalableTopicMetadata`` (its segment DAG; see the module doc)."""
        result: dict[str, Any] = self._http.call("GET", self._path(topic))
        return result

    def stats(self, topic: str | TopicName) -> dict[str, Any]:
        """The DAG with per-segment stats, the subscriptions with their consumers and
        assignments, and the controller (leader, operation in flight)."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/stats")
        return result

    def delete(self, topic: str | TopicName, *, force: bool = False) -> None:
        """Delete the topic, its segments and subscriptions; without ``force`` a topic with
        connected producers or consumers is refused (409)."""
        self._http.call("DELETE", self._path(topic), params={"force": "true"} if force else None)

    def create_subscription(
        self,
        topic: str | TopicName,
        subscription: str,
        *,
        subscription_type: str = "STREAM",
        initial_position: str = "Latest",
    ) -> None:
        """Create ``subscription`` on every segment (idempotent for the same type).

        Args:
            subscription_type: ``STREAM`` (ordered, the controller assigns segments),
                ``QUEUE`` (every consumer on every segment) or ``CHECKPOINT``.
            initial_position: ``Latest`` (only new messages) or ``Earliest`` (everything kept).
        """
        body = {
            "type": _choice("subscription type", subscription_type, SUBSCRIPTION_TYPES),
            "initialPosition": _choice("initial position", initial_position, INITIAL_POSITIONS),
        }
        self._http.call(
            "PUT", f"{self._path(topic)}/subscriptions/{_subscription(subscription)}", body=body
        )

    def delete_subscription(self, topic: str | TopicName, subscription: str) -> None:
        """Delete the subscription from every segment; its consumers are unregistered."""
        self._http.call(
            "DELETE", f"{self._path(topic)}/subscriptions/{_subscription(subscription)}"
        )

    def seek(self, topic: str | TopicName, subscription: str, timestamp_ms: int) -> None:
        """Move the subscription on every segment to the first message published at or after
        ``timestamp_ms`` (milliseconds since the epoch)."""
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise InvalidInputError(f"timestamp_ms must be an integer >= 0, got {timestamp_ms!r}")
        self._http.call(
            "POST",
            f"{self._path(topic)}/subscriptions/{_subscription(subscription)}/seek",
            body={"timestamp": timestamp_ms},
        )

    def split(
        self, topic: str | TopicName, segment_id: int, split_hash: int | None = None
    ) -> dict[str, Any]:
        """Split an active segment at its midpoint, or so that ``split_hash`` is the first hash
        of the upper child; returns the new ``ScalableTopicMetadata``.

        Raises:
            AdminNotFoundError (topic, segment), AdminIllegalStateError (sealed segment, hash
            outside the range), AdminConflictError (another operation running),
            AdminUnavailableError (no controller leader right now).
        """
        body = None
        if split_hash is not None:
            if isinstance(split_hash, bool) or not isinstance(split_hash, int):
                raise InvalidInputError(f"split_hash must be an integer, got {split_hash!r}")
            body = {"splitHash": split_hash}
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._path(topic)}/split/{_segment_id(segment_id)}", body=body
        )
        return result

    def merge(self, topic: str | TopicName, segment_ids: Iterable[int]) -> dict[str, Any]:
        """Merge two or more hash-adjacent active segments into one; returns the new
        ``ScalableTopicMetadata``. Two ids use PIP-468's ``merge/{id1}/{id2}``, more use
        ``merge`` with ``{"segmentIds": [...]}``."""
        ids = [_segment_id(i) for i in segment_ids]
        if len(ids) < 2:
            raise InvalidInputError(f"a merge needs two or more segment ids, got {ids}")
        if len(ids) == 2:
            path = f"{self._path(topic)}/merge/{ids[0]}/{ids[1]}"
            result: dict[str, Any] = self._http.call("POST", path)
        else:
            result = self._http.call("POST", f"{self._path(topic)}/merge", body={"segmentIds": ids})
        return result

    def get_auto_scale_policy(self, topic: str | TopicName) -> dict[str, Any] | None:
        """The topic's PIP-483 auto-scale override (``None``: the namespace's or broker's
        policy applies). ``stats`` shows the resolved effective policy."""
        result: dict[str, Any] | None = self._http.call(
            "GET", f"{self._path(topic)}/autoScalePolicy"
        )
        return result

    def set_auto_scale_policy(self, topic: str | TopicName, policy: Mapping[str, Any]) -> None:
        """Set the topic's ``AutoScalePolicyOverride`` (camelCase knobs, each optional; e.g.
        ``{"enabled": False}``, ``{"splitMsgRateInThreshold": 2000, "maxSegments": 8}``).

        Raises:
            AdminInvalidInputError: an unknown key, a value out of range, or a policy that is
                inconsistent once resolved over the namespace's override and ``broker.conf``
                (the message names the keys and where each value came from).
        """
        self._http.call("POST", f"{self._path(topic)}/autoScalePolicy", body=_policy(policy))

    def remove_auto_scale_policy(self, topic: str | TopicName) -> None:
        """Drop the topic's override."""
        self._http.call("DELETE", f"{self._path(topic)}/autoScalePolicy")


def _policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(policy, Mapping):
        raise InvalidInputError(f"an auto-scale policy is a mapping of knobs, got {policy!r}")
    return dict(policy)


def _subscription(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a subscription name is a non-empty string, got {name!r}")
    return _q(name)


class Segments:
    """``/admin/v2/segments``: one ``segment://`` topic of a scalable topic.

    These are the controller's tools (PIP-468 "Segment Topic Management"); an operator rarely
    needs them. Changing a segment by hand (terminating an active one, deleting one) leaves the
    topic's layout pointing at it: prefer ``scalable_topics.split``/``merge``.
    """

    def __init__(self, http: _Http) -> None:
        self._http = http

    def _path(self, segment: str | SegmentTopicName) -> str:
        return f"/admin/v2/segments/{_segment_path(_segment(segment))}"

    def create(self, segment: str | SegmentTopicName, subscriptions: Iterable[str] = ()) -> None:
        """Create the segment topic with a cursor at its start for each subscription
        (idempotent)."""
        names = list(subscriptions)
        self._http.call("PUT", self._path(segment), body=names or None)

    def terminate(self, segment: str | SegmentTopicName) -> None:
        """Seal the segment topic: producers get ``TopicTerminated`` (idempotent)."""
        self._http.call("POST", f"{self._path(segment)}/terminate")

    def delete(self, segment: str | SegmentTopicName) -> None:
        """Delete the segment topic and its data."""
        self._http.call("DELETE", self._path(segment))


# --- the client -------------------------------------------------------------------------------


class BookieClusters:
    """``/admin/v2/bookie-clusters``: PIP-470 storage clusters and switching between them."""

    _ROOT = "/admin/v2/bookie-clusters"

    def __init__(self, http: _Http) -> None:
        self._http = http

    def _path(self, name: str) -> str:
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"a storage cluster name is a non-empty string, got {name!r}")
        return f"{self._ROOT}/{_q(name)}"

    def list(self) -> list[dict[str, Any]]:
        """The registered clusters (``name``, ``metadataServiceUri``, ``status``, ``active``,
        ``clientOpen``)."""
        result: list[dict[str, Any]] = self._http.call("GET", self._ROOT)
        return result

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._http.call("GET", self._path(name))
        return result

    def register(
        self, name: str, metadata_service_uri: str, status: str = "STANDBY"
    ) -> dict[str, Any]:
        """Register a cluster (409 when its URI collides with another's), or set a registered
        one's status (``ACTIVE`` only for the active cluster: reconciliation)."""
        status = _choice("status", status, ("ACTIVE", "STANDBY", "DEPRECATED"))
        result: dict[str, Any] = self._http.call(
            "PUT",
            self._path(name),
            body={"metadataServiceUri": metadata_service_uri, "status": status},
        )
        return result

    def precheck(self, name: str) -> dict[str, Any]:
        """I11: ``{"ready", "idgenAdvancedBeyondSource", "sourceClusterName",
        "targetClusterName", "sourceMaxHighOrderBit", "targetMaxHighOrderBit"}``."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(name)}/precheck")
        return result

    def advance_idgen(self, name: str, margin: int = 1_000_000) -> dict[str, Any]:
        """Raise the cluster's id generator ``margin`` past every other cluster's ids; returns
        the precheck."""
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise InvalidInputError(f"margin must be an integer >= 0, got {margin!r}")
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._path(name)}/advance-idgen", body={"margin": margin}
        )
        return result

    def switch(self, target: str) -> dict[str, Any]:
        """Switch to ``target``; returns the status. 409 when refused (precheck, no client,
        another switch unfinished)."""
        self._path(target)
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._ROOT}/switch", body={"target": target}
        )
        return result

    def status(self) -> dict[str, Any]:
        """The active cluster, dual read, and the switch's phase, progress and failures."""
        result: dict[str, Any] = self._http.call("GET", f"{self._ROOT}/status")
        return result

    def rollback(self) -> dict[str, Any]:
        """Return every attribution to the old cluster (within the window)."""
        result: dict[str, Any] = self._http.call("POST", f"{self._ROOT}/rollback")
        return result

    def cleanup(
        self,
        *,
        dry_run: bool = True,
        src_cluster_filter: str | None = None,
        max_deletions: int = 0,
        force: bool = False,
    ) -> dict[str, Any]:
        """Preview (default) or start the deletion of the old cluster's copies."""
        if isinstance(max_deletions, bool) or not isinstance(max_deletions, int):
            raise InvalidInputError(f"max_deletions must be an integer, got {max_deletions!r}")
        result: dict[str, Any] = self._http.call(
            "POST",
            f"{self._ROOT}/cleanup",
            body={
                "dryRun": bool(dry_run),
                "srcClusterFilter": src_cluster_filter,
                "maxDeletions": max_deletions,
                "force": bool(force),
            },
        )
        return result

    def close_client(self, name: str) -> None:
        """Close the broker's client of a retired cluster."""
        self._http.call("POST", f"{self._path(name)}/close-client")


class AdminClient:
    """A synchronous client of a Braid broker's admin REST API.

    Args:
        url: the broker's admin base URL (``http://host:port``; default ``braid standalone``'s).
        timeout: seconds to wait for each answer (a split or a delete of a large topic may take
            a few seconds).
        transport: an ``httpx`` transport (tests, proxies); the default one otherwise.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInputError(
                f"invalid admin URL {url!r}: expected http://host:port, e.g. {DEFAULT_URL}"
            )
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)
        http = _Http(self._client, self.url)
        self._http = http
        self.tenants = Tenants(http)
        self.namespaces = Namespaces(http)
        self.topics = Topics(http)
        self.schemas = Schemas(http)
        self.scalable_topics = ScalableTopics(http)
        self.segments = Segments(http)
        self.bookie_clusters = BookieClusters(http)

    def health(self) -> dict[str, Any]:
        """``GET /health``: the process answers (``{"status": "ok"}``)."""
        result: dict[str, Any] = self._http.call("GET", "/health")
        return result

    def broker_health(self) -> str:
        """``GET /admin/v2/brokers/health``: ``"ok"`` after a round trip to the metadata store."""
        result: str = self._http.call("GET", "/admin/v2/brokers/health")
        return result

    def clusters(self) -> list[str]:
        """The cluster names this broker knows."""
        result: list[str] = self._http.call("GET", "/admin/v2/clusters")
        return result

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition (topic counters, backlogs, PIP-483
        auto-scale counters)."""
        result: str = self._http.call("GET", "/metrics")
        return result

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        self._client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AdminClient({self.url!r})"


__all__ = [
    "DEFAULT_URL",
    "INITIAL_POSITIONS",
    "SUBSCRIPTION_TYPES",
    "AdminAlreadyExistsError",
    "AdminAuthorizationError",
    "AdminClient",
    "AdminConflictError",
    "AdminError",
    "AdminIllegalStateError",
    "AdminInvalidInputError",
    "AdminNotFoundError",
    "AdminTimeoutError",
    "AdminTopicTerminatedError",
    "AdminUnavailableError",
    "BookieClusters",
    "Namespaces",
    "ScalableTopics",
    "Schemas",
    "Segments",
    "Tenants",
    "Topics",
]
