"""``AdminClient.topics`` and ``AdminClient.namespaces``: topic-level settings and the operations
``pulsar-admin topics`` offers for inspecting and moving subscriptions (:mod:`braid.admin.client`).

* :class:`PolicySettings` (on ``topics`` and ``namespaces``): ``get_policy`` / ``set_policy`` /
  ``remove_policy`` by Pulsar's REST name - on a topic ``retention``, ``deduplicationEnabled``,
  ``maxProducers``, ``maxConsumers``, ``maxConsumersPerSubscription`` (``applied=True``: the value
  in force, its namespace's or the broker's when the topic has none); on a namespace
  ``maxProducersPerTopic``, ``maxConsumersPerTopic``, ``maxConsumersPerSubscription``.
* :class:`TopicOperations` (on ``topics``): ``internal_stats``, ``peek_messages``,
  ``examine_message``, ``get_message_by_id`` (each a list of :class:`PeekedMessage`, one per
  entry; a batch is one entry, which ``braid admin`` splits into its messages as Pulsar's admin
  client does), ``reset_cursor``, ``skip``, ``clear_backlog``
  and ``expire_messages``.

Paths and bodies are Pulsar's (:mod:`braid.admin.topic_settings`,
:mod:`braid.admin.topic_operations`); the broker validates values (412 naming the problem).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from braid.admin.client_backlog import _target
from braid.admin.client_errors import AdminNotFoundError
from braid.admin.client_transport import _Http, _q
from braid.core.errors import InvalidInputError

#: The settings a topic has, by REST name.
TOPIC_POLICIES = (
    "retention",
    "deduplicationEnabled",
    "maxProducers",
    "maxConsumers",
    "maxConsumersPerSubscription",
)
#: The caps a namespace has, by REST name (retention and deduplication have their own methods).
NAMESPACE_POLICIES = ("maxProducersPerTopic", "maxConsumersPerTopic", "maxConsumersPerSubscription")


@dataclass(frozen=True)
class PeekedMessage:
    """One entry as a peek / examine / get-by-id answer carries it."""

    message_id: str
    #: The entry's uncompressed payload: a batch stays one payload (split it with
    #: ``braid.protocol.batch.decode_batch(payload, num_messages)``, as ``braid admin`` does).
    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    #: The ``X-Pulsar-*`` headers of the entry (publish time, producer, sequence id, ...).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Messages in the entry's batch (``None``: not batched).
    num_messages: int | None = None


def message_of(payload: bytes, headers: Mapping[str, str]) -> PeekedMessage:
    """The entry of one answer, with its ``X-Pulsar-*`` headers (lower-cased)."""
    wanted = {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}
    prefix = "x-pulsar-property-"
    props = {k[len(prefix) :]: v for k, v in wanted.items() if k.startswith(prefix)}
    count = wanted.get("x-pulsar-num-batch-message")
    return PeekedMessage(
        wanted.get("x-pulsar-message-id", ""),
        payload,
        props,
        wanted,
        None if count is None else int(count),
    )


class PolicySettings:
    """Generic get/set/remove of a topic's or namespace's settings by REST name."""

    _http: _Http
    _names: tuple[str, ...] = TOPIC_POLICIES

    def _check(self, name: str) -> str:
        if name not in self._names:
            raise InvalidInputError(f"{name!r} is not one of {', '.join(self._names)}")
        return name

    def get_policy(self, target: str, name: str, *, applied: bool = False) -> Any:
        """The setting ``name`` of ``target`` (``None``: not set there); ``applied=True`` (topics):
        the value in force."""
        params = {"applied": "true"} if applied else None
        return self._http.call("GET", f"{_target(target)}/{self._check(name)}", params=params)

    def set_policy(self, target: str, name: str, value: Any) -> None:
        """Set ``name`` on ``target`` (a retention is ``{"retentionTimeInMinutes",
        "retentionSizeInMB"}``, deduplication a bool, a cap an int, 0 = none)."""
        self._http.call("POST", f"{_target(target)}/{self._check(name)}", body=value)

    def remove_policy(self, target: str, name: str) -> None:
        """Drop ``name`` from ``target`` (the next level's value applies)."""
        self._http.call("DELETE", f"{_target(target)}/{self._check(name)}")


class NamespaceCaps(PolicySettings):
    """The namespace caps (``maxProducersPerTopic``, ...)."""

    _names = NAMESPACE_POLICIES


class TopicOperations:
    """Inspect a persistent topic and move its subscriptions (``pulsar-admin topics``)."""

    _http: _Http

    def _path(self, topic: Any) -> str:
        raise NotImplementedError  # provided by :class:`braid.admin.client_topics.Topics`

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's ``PersistentTopicInternalStats``: ledgers and cursors of the topic."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(topic)}/internalStats")
        return result

    def _messages(self, path: str, params: Mapping[str, str] | None = None) -> list[PeekedMessage]:
        response = self._http.send("GET", path, params=params)
        return [message_of(response.content, response.headers)]

    def peek_messages(self, topic: str, subscription: str, count: int = 1) -> list[PeekedMessage]:
        """The first ``count`` entries the subscription has not acknowledged (fewer when the
        backlog is shorter)."""
        out: list[PeekedMessage] = []
        for position in range(1, count + 1):
            path = f"{self._path(topic)}/subscription/{_q(subscription)}/position/{position}"
            try:
                out.extend(self._messages(path))
            except AdminNotFoundError:
                if not out:
                    raise
                break  # the backlog is shorter than asked for
        return out

    def examine_message(
        self, topic: str, initial_position: str = "latest", position: int = 1
    ) -> list[PeekedMessage]:
        """The ``position``-th entry from the ``earliest`` or the ``latest``."""
        params = {"initialPosition": initial_position, "messagePosition": str(position)}
        return self._messages(f"{self._path(topic)}/examinemessage", params)

    def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> list[PeekedMessage]:
        """The entry at ``ledger_id:entry_id``."""
        return self._messages(f"{self._path(topic)}/ledger/{ledger_id}/entry/{entry_id}")

    def reset_cursor(
        self,
        topic: str,
        subscription: str,
        *,
        timestamp_ms: int | None = None,
        message_id: tuple[int, int] | None = None,
        excluded: bool = False,
    ) -> None:
        """Move the subscription back or forward: to the first message published at or after
        ``timestamp_ms``, or to ``message_id`` (``(ledger, entry)``; after it when ``excluded``);
        on a partitioned topic, every partition."""
        base = f"{self._path(topic)}/subscription/{_q(subscription)}/resetcursor"
        if (timestamp_ms is None) == (message_id is None):
            raise InvalidInputError("give exactly one of timestamp_ms and message_id")
        if message_id is None:
            self._http.call("POST", f"{base}/{timestamp_ms}")
            return
        body = {"ledgerId": message_id[0], "entryId": message_id[1]}
        params = {"isExcluded": "true"} if excluded else None
        self._http.call("POST", base, body=body, params=params)

    def skip(self, topic: str, subscription: str, count: int) -> None:
        """Acknowledge the subscription's next ``count`` messages (entries)."""
        self._http.call("POST", f"{self._path(topic)}/subscription/{_q(subscription)}/skip/{count}")

    def clear_backlog(self, topic: str, subscription: str) -> None:
        """Acknowledge everything on the subscription (every partition of a partitioned topic)."""
        self._http.call("POST", f"{self._path(topic)}/subscription/{_q(subscription)}/skip_all")

    def expire_messages(self, topic: str, subscription: str | None, seconds: int) -> None:
        """Acknowledge the messages older than ``seconds`` on one subscription (all: ``None``)."""
        if subscription is None:
            path = f"{self._path(topic)}/all_subscription/expireMessages/{seconds}"
        else:
            path = f"{self._path(topic)}/subscription/{_q(subscription)}/expireMessages/{seconds}"
        self._http.call("POST", path)


__all__ = [
    "NAMESPACE_POLICIES",
    "TOPIC_POLICIES",
    "NamespaceCaps",
    "PeekedMessage",
    "PolicySettings",
    "TopicOperations",
    "message_of",
]
