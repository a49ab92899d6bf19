"""Moving a subscription's cursor for an operator: Pulsar's ``reset-cursor``, ``skip``,
``clear-backlog`` and ``expire-messages``.

* :func:`reset_cursor_to_time` / :func:`reset_cursor_to_id`: the subscription's next message is
  the first published at or after a time, or the given message id (the one after it with
  ``excluded``); its consumers are closed and reconnect from there, as a client seek does.
* :func:`skip`: acknowledge the next ``n`` entries the subscription has not acknowledged (entries,
  as Pulsar's ``skipEntries`` counts them); :func:`clear_backlog`: acknowledge everything.
* :func:`expire_older_than`: acknowledge the messages published more than ``seconds`` ago, on one
  subscription or every durable one (message TTL run once, by hand).

Acknowledging on the broker's behalf goes through :meth:`Subscription.expire_up_to`, which keeps
the consumers attached and takes what it covers off their books; moving backwards goes through
:meth:`Subscription.reset_cursor`. Each returns whether anything moved.
"""

from __future__ import annotations

from braid.broker.backlog_quota_manager import position_before
from braid.broker.subscription import Subscription
from braid.broker.topic import PersistentTopic
from braid.broker.topic_inspection import before_first, nth_unacked, subscription_of
from braid.core.errors import InvalidInputError
from braid.ledger.api import LATEST, Position


class InvalidCursorRequest(InvalidInputError):
    """A skip count or expiry time that cannot be applied (HTTP 400 through the admin API)."""


async def reset_cursor_to_time(
    topic: PersistentTopic, subscription: str, timestamp_ms: int
) -> Position:
    """Make the first message published at or after ``timestamp_ms`` the subscription's next;
    returns that position (``LATEST`` when every message is older: nothing left to read)."""
    sub = subscription_of(topic, subscription)
    position = await topic.find_position_by_publish_time(timestamp_ms)
    if position == LATEST:
        position = topic.ledger.next_position(topic.ledger.last_confirmed_position)
    await sub.reset_cursor(position)
    return position


async def reset_cursor_to_id(
    topic: PersistentTopic, subscription: str, position: Position, *, excluded: bool = False
) -> Position:
    """Make the message at ``position`` (the one after it when ``excluded``) the next one."""
    sub = subscription_of(topic, subscription)
    if position.ledger_id < 0 or position.entry_id < 0:
        target = topic.ledger.next_position(before_first(topic))
    else:
        target = topic.ledger.next_position(position) if excluded else position
    await sub.reset_cursor(target)
    return target


async def skip(topic: PersistentTopic, subscription: str, n: int) -> bool:
    """Acknowledge the subscription's next ``n`` unacknowledged entries (all, when fewer)."""
    if n < 1:
        raise InvalidCursorRequest(f"the number of messages to skip must be 1 or more, got {n}")
    sub = subscription_of(topic, subscription)
    cursor = sub.cursor
    found = await nth_unacked(topic, cursor.mark_delete_position, cursor.is_deleted, n)
    target = topic.ledger.last_confirmed_position if found is None else found.position
    return await _ack_up_to(topic, sub, target)


async def clear_backlog(topic: PersistentTopic, subscription: str | None = None) -> int:
    """Acknowledge everything on one subscription (every durable one when ``None``); returns how
    many moved."""
    subs = [subscription_of(topic, subscription)] if subscription else _durable(topic)
    last = topic.ledger.last_confirmed_position
    moved = 0
    for sub in subs:
        moved += await _ack_up_to(topic, sub, last)
    return moved


async def expire_older_than(
    topic: PersistentTopic, now_ms: int, seconds: int, subscription: str | None = None
) -> int:
    """Acknowledge the messages published before ``now_ms - seconds`` on one subscription (every
    durable one when ``None``); returns how many moved."""
    if seconds < 0:
        raise InvalidCursorRequest(f"expireTimeInSeconds must be 0 or more, got {seconds}")
    subs = [subscription_of(topic, subscription)] if subscription else _durable(topic)
    first_kept = await topic.find_position_by_publish_time(now_ms - seconds * 1000)
    target = position_before(topic, first_kept)
    moved = 0
    for sub in subs:
        moved += await _ack_up_to(topic, sub, target)
    return moved


async def _ack_up_to(topic: PersistentTopic, sub: Subscription, target: Position) -> bool:
    if target.entry_id < 0 and target.ledger_id < 0:
        return False
    if target <= sub.cursor.mark_delete_position or not topic.ledger.is_acknowledgeable(target):
        return False
    return await sub.expire_up_to(target)


def _durable(topic: PersistentTopic) -> list[Subscription]:
    return [s for s in topic.subscriptions.values() if s.durable]


__all__ = [
    "InvalidCursorRequest",
    "clear_backlog",
    "expire_older_than",
    "reset_cursor_to_id",
    "reset_cursor_to_time",
    "skip",
]
