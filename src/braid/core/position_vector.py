"""The Stream consumer's position vector (``docs/client.md#how-the-client-works-inside``).

A cumulative acknowledgment of message *m* must advance **every** segment, not just *m*'s: it
acknowledges everything delivered to the application up to and including *m*, in whichever segment
it came from. The upstream client specification phrases this as a vector — for each delivered
message, the latest delivered id of every segment at that moment.

:class:`PositionVector` stores the same information without copying a vector per message: each
delivery gets a monotonically increasing *token*, and each segment keeps its deliveries as
``(token, position)`` in token order. Acknowledging up to token *t* yields, per segment, the last
position delivered with a token ``<= t`` — exactly the vector entry — and forgets what it covered.
Tokens are taken at delivery to the application (not at arrival), so a message the client dropped
from its queue before delivering it (e.g. on a reconnect, after which the broker redelivers it)
never enters a vector and can never be acknowledged by a later message's cumulative ack.

Positions are opaque to this class (any ordered value); segments are keyed by id. Pure, no I/O.
"""

from __future__ import annotations

import bisect
from typing import Any, Generic, Protocol, TypeVar


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


P = TypeVar("P", bound=_Ordered)


class PositionVector(Generic[P]):
    """Per-segment delivered positions, indexed by a global delivery token."""

    __slots__ = ("_next_token", "_positions", "_tokens")

    def __init__(self) -> None:
        self._next_token = 0
        self._tokens: dict[int, list[int]] = {}
        self._positions: dict[int, list[P]] = {}

    def delivered(self, segment_id: int, position: P) -> int:
        """Record that ``position`` of ``segment_id`` was delivered; return its token."""
        token = self._next_token
        self._next_token = token + 1
        tokens = self._tokens.get(segment_id)
        if tokens is None:
            self._tokens[segment_id] = [token]
            self._positions[segment_id] = [position]
        else:
            tokens.append(token)
            self._positions[segment_id].append(position)
        return token

    def ack_up_to(self, token: int) -> dict[int, P]:
        """The position to acknowledge cumulatively in each segment for a cumulative ack of the
        message delivered with ``token``; the covered deliveries are forgotten.

        Segments with nothing delivered at or before ``token`` (or already covered by an earlier
        ack) are absent from the result.
        """
        return {sid: covered[-1] for sid, covered in self.take_up_to(token).items()}

    def take_up_to(self, token: int) -> dict[int, list[P]]:
        """Every delivered position with a token ``<= token``, per segment, in delivery order.

        For segments that must be acknowledged individually (a bucket-shared segment forbids
        cumulative acks, ``docs/protocol.md#entry-buckets``). The covered deliveries are forgotten.
        """
        result: dict[int, list[P]] = {}
        for segment_id, tokens in self._tokens.items():
            index = bisect.bisect_right(tokens, token)
            if index == 0:
                continue
            positions = self._positions[segment_id]
            result[segment_id] = positions[:index]
            del tokens[:index]
            del positions[:index]
        return result

    def last_up_to(self, token: int) -> dict[int, P]:
        """Like :meth:`ack_up_to` without forgetting anything: the last position delivered at
        or before ``token`` in each segment (an acknowledgment inside a transaction, applied
        only if the transaction commits)."""
        result: dict[int, P] = {}
        for segment_id, tokens in self._tokens.items():
            index = bisect.bisect_right(tokens, token)
            if index:
                result[segment_id] = self._positions[segment_id][index - 1]
        return result

    def token_of(self, segment_id: int, position: P) -> int | None:
        """The token of a delivered, not yet covered ``position`` of ``segment_id`` (``None``
        if it is not pending). Positions must compare in delivery order (they do within a
        segment), so this is a binary search."""
        positions = self._positions.get(segment_id)
        if not positions:
            return None
        index = bisect.bisect_left(positions, position)
        if index < len(positions) and positions[index] == position:
            return self._tokens[segment_id][index]
        return None

    def forget_segment(self, segment_id: int) -> None:
        """Drop a detached segment's deliveries (its later acks skip it)."""
        self._tokens.pop(segment_id, None)
        self._positions.pop(segment_id, None)

    def pending(self, segment_id: int) -> int:
        """How many delivered positions of ``segment_id`` no cumulative ack has covered yet."""
        return len(self._tokens.get(segment_id, ()))


__all__ = ["PositionVector"]
