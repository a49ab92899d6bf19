"""``AdminClient.scalable_topics``: the ``/admin/v2/scalable`` group of :mod:`braid.admin.client`
(PIP-468's scalable-topic table; its Segments table is internal to the brokers, ADR 0051)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from braid.admin.client_transport import (
    _choice,
    _Http,
    _namespace_path,
    _policy,
    _q,
    _segment_id,
    _topic,
    _topic_path,
)
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName

#: Subscription types of a scalable topic (PIP-468; ``docs/scalable-topics.md#consumers``).
SUBSCRIPTION_TYPES = ("STREAM", "QUEUE", "CHECKPOINT")
#: Where a new subscription's cursors start on the segments.
INITIAL_POSITIONS = ("Earliest", "Latest")


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

    def positions(self, topic: str | TopicName) -> dict[str, Any]:
        """The segment DAG with the last stored entry (``[ledger, entry]``) of each active
        segment, of one layout epoch (``GET .../positions``; ADR 0072)."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/positions")
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


def _subscription(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a subscription name is a non-empty string, got {name!r}")
    return _q(name)


__all__ = ["INITIAL_POSITIONS", "SUBSCRIPTION_TYPES", "ScalableTopics"]
