"""The admin client's transport, and the name checks every group of it shares.

:class:`_Http` sends one request and maps every failure (an error answer, a timeout, no broker)
to its :class:`~braid.admin.client_errors.AdminError` category, in one place. The helpers turn
names into URL path parts, checking them with :mod:`braid.core.names` (the server's own rules)
before a request leaves. Private to :mod:`braid.admin.client` and its groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from braid.admin.client_errors import (
    AdminError,
    AdminTimeoutError,
    AdminUnavailableError,
    error_from_response,
)
from braid.core.errors import InvalidInputError
from braid.core.names import SegmentTopicName, TopicDomain, TopicName


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


def _policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(policy, Mapping):
        raise InvalidInputError(f"an auto-scale policy is a mapping of knobs, got {policy!r}")
    return dict(policy)


_JSON = {"Content-Type": "application/json"}


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
        response = self.send(method, path, body=body, params=params)
        target = f"{self.url}{path}"
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

    def send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send ``method path``; returns the successful response as it came (bytes, headers).

        Raises:
            AdminError: the category matching the answer, or why there was none.
        """
        target = f"{self.url}{path}"
        try:
            response = self.client.request(
                method,
                path,
                json=body,
                params=dict(params) if params else None,
                # Always JSON: the broker refuses a POST of any other type (a cross-site guard).
                headers=_JSON if method != "GET" else None,
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
        return response
