"""Batch-index ack sets: which messages of a batch entry are still to be delivered (PIP-54).

Pulsar carries the state of a batch entry's messages as the words of a ``java.util.BitSet``
(``MessageIdData.ack_set``, ``CommandMessage.ack_set``, the cursor's ``deleteSet``): bit ``i``
(word ``i // 64``, bit ``i % 64``) set means message ``i`` is *not yet acknowledged*. Words are
signed 64-bit integers on the wire; Python's integers apply ``&`` to them with two's complement
semantics, so the words are combined as they come, without converting them.

A consumer that acknowledges message ``k`` of a batch of ``n`` sends every bit ``0..n-1`` set
except the ones it acknowledged; a cursor keeps the AND of everything it was sent, and the entry is
acknowledged as a whole once no bit is left. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from braid.core.errors import InvalidInputError

_WORD_BITS = 64
_WORD_MASK = (1 << _WORD_BITS) - 1

#: A bit set as Pulsar's ``BitSet.toLongArray()`` words (signed 64-bit), lowest word first.
AckSet = tuple[int, ...]


def _signed(word: int) -> int:
    return word - (1 << _WORD_BITS) if word >= 1 << (_WORD_BITS - 1) else word


def _trimmed(words: Iterable[int]) -> AckSet:
    """Words without trailing zero words (``BitSet.toLongArray`` never ends with one)."""
    out = list(words)
    while out and out[-1] == 0:
        out.pop()
    return tuple(out)


def check_words(words: Sequence[int]) -> AckSet:
    """``words`` as an :data:`AckSet`; raises :class:`InvalidInputError` for a non-64-bit word."""
    for word in words:
        if isinstance(word, bool) or not isinstance(word, int) or not -(2**63) <= word < 2**63:
            raise InvalidInputError(f"ack set word {word!r} is not a signed 64-bit integer")
    return tuple(words)


def of_indexes(indexes: Iterable[int]) -> AckSet:
    """The bit set with exactly ``indexes`` set."""
    unsigned: list[int] = []
    for index in indexes:
        if index < 0:
            raise InvalidInputError(f"batch index {index} is negative")
        word, bit = divmod(index, _WORD_BITS)
        while len(unsigned) <= word:
            unsigned.append(0)
        unsigned[word] |= 1 << bit
    return _trimmed(_signed(w) for w in unsigned)


def all_set(count: int) -> AckSet:
    """Bits ``0..count-1`` set: every message of a batch of ``count`` still to be delivered."""
    return of_indexes(range(count))


def intersect(a: Sequence[int], b: Sequence[int]) -> AckSet:
    """The AND of two sets (a missing word counts as zero)."""
    return _trimmed(x & y for x, y in zip(a, b, strict=False))


def is_empty(words: Sequence[int]) -> bool:
    """True when no bit is set: every message is acknowledged."""
    return not any(words)


def is_set(words: Sequence[int], index: int) -> bool:
    """Whether bit ``index`` is set."""
    word, bit = divmod(index, _WORD_BITS)
    return word < len(words) and bool((words[word] & _WORD_MASK) >> bit & 1)


def indexes(words: Sequence[int], count: int | None = None) -> list[int]:
    """The set bits in increasing order (only those below ``count`` when given)."""
    out: list[int] = []
    for w, word in enumerate(words):
        unsigned = word & _WORD_MASK
        while unsigned:
            low = unsigned & -unsigned
            index = w * _WORD_BITS + low.bit_length() - 1
            if count is not None and index >= count:
                return out
            out.append(index)
            unsigned ^= low
    return out


def cardinality(words: Sequence[int], count: int | None = None) -> int:
    """How many bits are set (below ``count`` when given)."""
    if count is None:
        return sum((w & _WORD_MASK).bit_count() for w in words)
    return len(indexes(words, count))


__all__ = [
    "AckSet",
    "all_set",
    "cardinality",
    "check_words",
    "indexes",
    "intersect",
    "is_empty",
    "is_set",
    "of_indexes",
]
