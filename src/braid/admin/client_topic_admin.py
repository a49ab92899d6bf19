"""``AdminClient.topics`` and ``AdminClient.namespaces``: topic-level settings and the operations
``pulsar-admin topics`` offers for inspecting and moving subscriptions (:mod:`braid.admin.client`).

* :class:`PolicySettings` (on ``topics`` and ``namespaces``): ``get_policy`` / ``set_policy`` /
  ``remove_policy`` by Pulsar's REST name - on a topic ``retention``, ``deduplicationEnabled``,
  ``maxProducers``, ``maxConsumers``, ``maxConsumersPerSubscription`` (``applied=True``: the value
  in force, its namespace's or the broker's when the topic has none); on a namespace
  ``maxProducersPerTopic``, ``maxConsumersPerTopic``, ``maxConsumersPerSubscription``.
* :class:`TopicOperations` (on ``topics``): ``internal_stats``, ``peek_messages``,
  ``examine_message``, ``get_message_by_id`` (each a list of :class:`PeekedMessage`, a batch split
  into its messages as Pulsar's admin client does), ``reset_cursor``, ``skip``, ``clear_backlog``
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
from braid.protocol.batch import decode_batch

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
    """One message as a peek / examine / get-by-id answer carries it."""

    message_id: str
    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    #: The ``X-Pulsar-*`` headers of the entry (publish time, producer, sequence id, ...).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The message's index in its batch (``None``: not batched).
    batch_index: int | None = None


def messages_of(payload: bytes, headers: Mapping[str, str]) -> list[PeekedMessage]:
    """The messages of one answer: the entry, or each message of its batch."""
    wanted = {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}
    message_id = wanted.get("x-pulsar-message-id", "")
    count = wanted.get("x-pulsar-num-batch-message")
    prefix = "x-pulsar-property-"
    if count is None:
        props = {k[len(prefix) :]: v for k, v in wanted.items() if k.startswith(prefix)}
        return [PeekedMessage(message_id, payload, props, wanted)]
    out = []
    for index, message in enumerate(decode_batch(payload, int(count))):
        single = message.single
        props = {p.key: p.value for p in single.properties} if single is not None else {}
        out.append(PeekedMessage(f"{message_id}:{index}", message.payload, props, wanted, index))
    return out


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
        return messages_of(response.content, response.headers)

    def peek_messages(self, topic: str, subscription: str, count: int = 1) -> list[PeekedMessage]:
        """The first ``count`` entries the subscription has not acknowledged (each batch split;
        fewer when the backlog is shorter)."""
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
    "messages_of",
]
