"""Delayed delivery on the producer side: ``deliver_after`` / ``deliver_at`` become the entry's
``MessageMetadata.deliver_at_time`` (wall-clock milliseconds since the epoch), as the official
clients stamp it.

A delayed message is never batched with others (it travels alone in its entry, as the official
clients send it), so the broker's delayed-delivery tracker holds exactly that message. It is
routed like any message - by key to the segment covering the key's hash now - and keeps its
``deliver_at_time`` when a split or merge makes the producer re-route it, so it lands in the
segment that covers its key when it is stored and is delivered there, by that segment's
dispatcher, once the time has come. Shared (Queue) subscriptions honour it; Stream (Failover)
subscriptions deliver at once, as the broker does for Pulsar's Failover and Exclusive.
"""

from __future__ import annotations

import datetime
import math
import time

from braid.core.errors import InvalidInputError


def delivery_time(
    deliver_after: datetime.timedelta | float | None,
    deliver_at: int | None,
    now_ms: int | None = None,
) -> int | None:
    """The ``deliver_at_time`` for a send, or ``None`` for an immediate message.

    ``deliver_after`` is a :class:`datetime.timedelta` or seconds (``>= 0``); ``deliver_at``
    milliseconds since the epoch. At most one may be given.

    Raises:
        InvalidInputError: both given, or a value of the wrong type or sign.
    """
    if deliver_after is None and deliver_at is None:
        return None
    if deliver_after is not None and deliver_at is not None:
        raise InvalidInputError("give deliver_after or deliver_at, not both")
    if deliver_at is not None:
        if isinstance(deliver_at, bool) or not isinstance(deliver_at, int) or deliver_at < 0:
            raise InvalidInputError(
                f"deliver_at must be milliseconds since the epoch: {deliver_at!r}"
            )
        return deliver_at
    if isinstance(deliver_after, datetime.timedelta):
        seconds = deliver_after.total_seconds()
    elif isinstance(deliver_after, int | float) and not isinstance(deliver_after, bool):
        seconds = float(deliver_after)
    else:
        raise InvalidInputError(
            f"deliver_after must be a timedelta or seconds: {type(deliver_after).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInputError(f"deliver_after must be >= 0 seconds: {deliver_after!r}")
    base = int(time.time() * 1000) if now_ms is None else now_ms
    return base + round(seconds * 1000)


__all__ = ["delivery_time"]
