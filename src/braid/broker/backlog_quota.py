"""Backlog quotas (Pulsar's ``BacklogQuota``): the model, the broker defaults and the pure maths.

A backlog quota caps what the slowest subscription of a topic may leave unacknowledged, by size
(``destination_storage``: ``limitSize`` bytes) and by age (``message_age``: ``limitTime``
seconds since the oldest unacknowledged message was published); ``-1`` disables a limit. When a
topic is over a quota its ``policy`` applies:

* ``producer_request_hold``: producers are disconnected and new ones refused with
  ``ProducerBlockedQuotaExceededError`` (the official client keeps retrying, holding its sends
  until they time out);
* ``producer_exception``: the same with ``ProducerBlockedQuotaExceededException`` (the client
  fails its pending and new sends at once);
* ``consumer_backlog_eviction``: the slowest subscriptions are moved forward (their oldest
  messages acknowledged) until the topic is back under the quota.

The JSON shape and key names are Pulsar's (``BacklogQuotaImpl``: ``limitSize``, ``limitTime``,
``policy``; the map is keyed by quota type), so documents written by ``pulsar-admin`` parse here.
Resolution: a topic-level quota of a type wins over the namespace's ``backlog_quota_map``, which
wins over the broker's ``backlogQuotaDefault*`` keys.

Everything here is immutable and free of I/O; :mod:`braid.broker.backlog_quota_manager` enforces.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from braid.broker.errors import BrokerError, ServerError
from braid.core.errors import IllegalStateError, InvalidInputError
from braid.ledger.api import LedgerInfo, Position


class InvalidBacklogQuota(InvalidInputError):
    """A backlog quota document or value Braid cannot accept (the admin API answers 412)."""


_E = TypeVar("_E", bound=enum.Enum)


def _member(cls: type[_E], text: object, key: str) -> _E:
    for member in cls:
        if member.value == text:
            return member
    raise InvalidBacklogQuota(f"{key} must be one of {[m.value for m in cls]}, got {text!r}")


class BacklogQuotaType(enum.Enum):
    """What a quota limits (Pulsar's ``BacklogQuotaType``)."""

    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"

    @classmethod
    def parse(cls, text: object) -> BacklogQuotaType:
        return _member(cls, text, "backlogQuotaType")


class RetentionPolicy(enum.Enum):
    """What happens to a topic over its quota (Pulsar's ``BacklogQuota.RetentionPolicy``)."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"

    @classmethod
    def parse(cls, text: object) -> RetentionPolicy:
        return _member(cls, text, "policy")

    @property
    def blocks_producers(self) -> bool:
        return self is not RetentionPolicy.CONSUMER_BACKLOG_EVICTION


def _limit(doc: Mapping[str, Any], key: str) -> int:
    value = doc.get(key, -1)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise InvalidBacklogQuota(f"{key} must be an integer >= -1, got {value!r}")
    return value


@dataclass(frozen=True)
class BacklogQuota:
    """One quota: a size limit in bytes and an age limit in seconds (``-1``: none) and a policy."""

    limit_size: int = -1
    limit_time: int = -1
    policy: RetentionPolicy = RetentionPolicy.PRODUCER_REQUEST_HOLD

    def __post_init__(self) -> None:
        if self.limit_size < -1 or self.limit_time < -1:
            raise InvalidBacklogQuota(
                f"limits must be -1 (none) or more: limitSize={self.limit_size}, "
                f"limitTime={self.limit_time}"
            )

    def to_json(self) -> dict[str, Any]:
        # ``limit`` is Pulsar's deprecated alias of ``limitSize``; written for older readers.
        return {
            "limit": self.limit_size,
            "limitSize": self.limit_size,
            "limitTime": self.limit_time,
            "policy": self.policy.value,
        }

    @classmethod
    def from_json(cls, doc: object) -> BacklogQuota:
        if not isinstance(doc, dict):
            raise InvalidBacklogQuota(f"a backlog quota must be a JSON object, got {doc!r}")
        size = _limit(doc, "limitSize") if "limitSize" in doc else _limit(doc, "limit")
        return cls(size, _limit(doc, "limitTime"), RetentionPolicy.parse(doc.get("policy")))


#: A quota per type, as stored (``backlog_quota_map``).
QuotaMap = Mapping[BacklogQuotaType, BacklogQuota]


def quota_map_to_json(quotas: QuotaMap) -> dict[str, Any]:
    return {kind.value: quota.to_json() for kind, quota in quotas.items()}


def quota_map_from_json(doc: object) -> QuotaMap:
    if not isinstance(doc, dict):
        raise InvalidBacklogQuota(f"backlog_quota_map must be a JSON object, got {doc!r}")
    return MappingProxyType(
        {BacklogQuotaType.parse(k): BacklogQuota.from_json(v) for k, v in doc.items()}
    )


def check_ttl(value: object) -> int:
    """A message TTL in seconds: an integer, 0 (never expire) or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidBacklogQuota(f"messageTTL must be an integer >= 0 seconds, got {value!r}")
    return value


@dataclass(frozen=True)
class BacklogQuotaDefaults:
    """The broker's ``backlogQuotaDefault*`` keys (``-1``: no limit)."""

    limit_bytes: int = -1
    limit_second: int = -1
    policy: RetentionPolicy = RetentionPolicy.PRODUCER_REQUEST_HOLD

    def quota(self, kind: BacklogQuotaType) -> BacklogQuota | None:
        if kind is BacklogQuotaType.DESTINATION_STORAGE and self.limit_bytes >= 0:
            return BacklogQuota(limit_size=self.limit_bytes, policy=self.policy)
        if kind is BacklogQuotaType.MESSAGE_AGE and self.limit_second >= 0:
            return BacklogQuota(limit_time=self.limit_second, policy=self.policy)
        return None


def resolve(
    kind: BacklogQuotaType,
    topic_level: QuotaMap | None,
    namespace_level: QuotaMap | None,
    defaults: BacklogQuotaDefaults,
) -> BacklogQuota | None:
    """The quota of ``kind`` in force: the topic's, else the namespace's, else the broker's."""
    for level in (topic_level, namespace_level):
        if level is not None and kind in level:
            return level[kind]
    return defaults.quota(kind)


class TopicBacklogQuotaExceeded(BrokerError, IllegalStateError):
    """A producer refused because its topic is over a backlog quota whose policy holds
    producers (Pulsar's ``ServerCnx`` answers ``ProducerBlockedQuotaExceededError``)."""

    code = ServerError.ProducerBlockedQuotaExceededError
    policy: RetentionPolicy = RetentionPolicy.PRODUCER_REQUEST_HOLD


class TopicBacklogQuotaExceededException(TopicBacklogQuotaExceeded):
    """The same under ``producer_exception``: ``ProducerBlockedQuotaExceededException``."""

    code = ServerError.ProducerBlockedQuotaExceededException
    policy = RetentionPolicy.PRODUCER_EXCEPTION


def quota_exceeded(message: str, policy: RetentionPolicy) -> TopicBacklogQuotaExceeded:
    """The refusal a producer gets under ``policy``."""
    if policy is RetentionPolicy.PRODUCER_EXCEPTION:
        return TopicBacklogQuotaExceededException(message)
    return TopicBacklogQuotaExceeded(message)


# -- backlog maths -----------------------------------------------------------------------------


def estimated_backlog_bytes(view: Sequence[LedgerInfo], mark_delete: Position) -> int:
    """Bytes stored after ``mark_delete`` (Pulsar's estimate: whole ledgers after it, and the
    share of its own ledger's bytes its remaining entries stand for)."""
    total = 0
    for info in view:
        if info.ledger_id > mark_delete.ledger_id:
            total += info.size
        elif info.ledger_id == mark_delete.ledger_id and info.entries > 0:
            remaining = info.entries - (mark_delete.entry_id + 1)
            if remaining > 0:
                total += info.size * remaining // info.entries
    return total


def eviction_target(
    view: Sequence[LedgerInfo], mark_delete: Position, limit_bytes: int
) -> Position | None:
    """The mark-delete position that leaves at most ``limit_bytes`` after it (whole entries,
    sized as their ledger's average), or ``None`` when the backlog is already within it."""
    backlog = estimated_backlog_bytes(view, mark_delete)
    excess = backlog - limit_bytes
    if excess <= 0:
        return None
    target = mark_delete
    for info in view:
        if info.ledger_id < mark_delete.ledger_id or info.entries <= 0:
            continue
        first = mark_delete.entry_id + 1 if info.ledger_id == mark_delete.ledger_id else 0
        if first >= info.entries:
            continue
        entry_size = max(1, info.size // info.entries)
        needed = -(-excess // entry_size)  # entries to drop from this ledger, rounded up
        take = min(needed, info.entries - first)
        target = Position(info.ledger_id, first + take - 1)
        excess -= take * entry_size
        if excess <= 0:
            break
    return target


__all__ = [
    "BacklogQuota",
    "BacklogQuotaDefaults",
    "BacklogQuotaType",
    "InvalidBacklogQuota",
    "QuotaMap",
    "RetentionPolicy",
    "TopicBacklogQuotaExceeded",
    "TopicBacklogQuotaExceededException",
    "check_ttl",
    "estimated_backlog_bytes",
    "eviction_target",
    "quota_exceeded",
    "quota_map_from_json",
    "quota_map_to_json",
    "resolve",
]
