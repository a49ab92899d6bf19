"""Where to split a hot segment: the hash that halves its observed load (Braid, beyond PIP-483).

PIP-483 always splits a segment at the midpoint of its hash range. When the load is skewed - one
key range much hotter than the rest - a midpoint split leaves one hot child and one idle one, and
the hot child splits again a minute later. Braid's segment-owning broker therefore keeps a small
histogram of the ``hash16`` of the keys published to each segment (:data:`KEY_HASH_BUCKETS` equal
buckets over the **segment's own** range, sampled and decayed on the broker) and reports it with
the load record; :func:`balanced_split_hash` turns it into the split hash. The rule (ADR 0023):

* the candidates are the bucket boundaries strictly inside the range (``start < h <= end``, ``h``
  being the first hash of the upper child, as :meth:`~braid.core.ranges.HashRange.split` takes it);
* the midpoint is kept when the histogram is too thin (fewer than :data:`MIN_SAMPLE_WEIGHT`
  sampled messages: no keys, keyless traffic, a fresh segment) or already balanced (the lower half
  holds within :data:`MIDPOINT_TOLERANCE` of half the load), so uniform keys still split cleanly at
  the midpoint;
* otherwise the boundary whose lower side holds closest to half the observed load wins (the
  weighted median at bucket resolution); ties go to the boundary nearest the midpoint, then to the
  lower one. A single hot key cannot be divided: every boundary is then equally unbalanced and the
  one nearest the midpoint is taken.

The reporter rewrites a load record when its rates change materially; the histogram adds one more
reason, :func:`split_point_moved`: the split hash it gives moved by more than
:data:`SPLIT_POINT_MOVE` of the range (a histogram that filled up, or keys whose load shifted), so
a steady segment with steady keys still writes once and stays silent.

Pure: no I/O, no clock. Bucket ``i`` of ``n`` over a range of ``size`` positions covers the
offsets ``ceil(i * size / n) .. ceil((i + 1) * size / n) - 1`` from ``start`` (so
:func:`bucket_index` is ``offset * n // size``); with fewer positions than buckets some buckets
are empty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from braid.core.errors import InvalidInputError
from braid.core.ranges import HashRange

#: Buckets of the key-hash histogram a broker keeps per segment.
KEY_HASH_BUCKETS = 64
#: Below this many sampled messages (decayed) the histogram says nothing: split at the midpoint.
MIN_SAMPLE_WEIGHT = 64.0
#: The midpoint stays when its lower side holds within this fraction of half the load (0.5 +- 0.1).
MIDPOINT_TOLERANCE = 0.1
#: A load record is rewritten when its split hash moved by more than this share of the range.
SPLIT_POINT_MOVE = 1 / 16
#: Largest histogram accepted in a load record.
MAX_BUCKETS = 1024


class InvalidKeyHistogram(InvalidInputError):
    """A key-hash histogram is malformed (wrong length, a negative or non-finite weight)."""


def bucket_index(hash_range: HashRange, buckets: int, hash_value: int) -> int:
    """The bucket of ``hash_value`` (which must lie in ``hash_range``) among ``buckets``."""
    return (hash_value - hash_range.start) * buckets // hash_range.size


def bucket_start(hash_range: HashRange, buckets: int, index: int) -> int:
    """The first hash of bucket ``index`` (``index == buckets`` gives ``end + 1``)."""
    return hash_range.start + -(-index * hash_range.size // buckets)


def check_histogram(weights: Sequence[float]) -> tuple[float, ...]:
    """``weights`` as a tuple of floats if it is a valid histogram.

    Raises:
        InvalidKeyHistogram: empty, longer than :data:`MAX_BUCKETS`, or a weight that is not a
            finite number >= 0.
    """
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
        raise InvalidKeyHistogram(f"a key-hash histogram is a list of numbers, got {weights!r}")
    if not 1 <= len(weights) <= MAX_BUCKETS:
        raise InvalidKeyHistogram(
            f"a key-hash histogram has 1..{MAX_BUCKETS} buckets, got {len(weights)}"
        )
    out = []
    for weight in weights:
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise InvalidKeyHistogram(f"a key-hash bucket weight must be a number, got {weight!r}")
        value = float(weight)
        if not math.isfinite(value) or value < 0:
            raise InvalidKeyHistogram(f"a key-hash bucket weight must be >= 0, got {weight!r}")
        out.append(value)
    return tuple(out)


def midpoint_split_hash(hash_range: HashRange) -> int:
    """PIP-468's midpoint split: the first hash of the upper half.

    Raises:
        InvalidKeyHistogram: the range covers a single position (nothing to split).
    """
    if hash_range.size < 2:
        raise InvalidKeyHistogram(f"cannot split {hash_range}: it covers a single hash position")
    return hash_range.start + (hash_range.end - hash_range.start) // 2 + 1


def _weight_below(hash_range: HashRange, weights: Sequence[float], at: int) -> float:
    """Load below hash ``at``: whole buckets below it plus a linear share of the one it cuts."""
    n = len(weights)
    total = 0.0
    for index, weight in enumerate(weights):
        first, after = bucket_start(hash_range, n, index), bucket_start(hash_range, n, index + 1)
        if after <= at:
            total += weight
        elif first < at:
            total += weight * (at - first) / (after - first)
    return total


def balanced_split_hash(hash_range: HashRange, weights: Sequence[float] | None) -> int:
    """The split hash (first hash of the upper child) that halves the observed load.

    Args:
        hash_range: the segment's range (the histogram's buckets divide it equally).
        weights: the decayed sampled-message count per bucket, or ``None``/empty when the
            broker reported no histogram.

    Returns:
        A hash ``h`` with ``start < h <= end``: the midpoint when the histogram is missing, thin
        or already balanced at the midpoint, else the bucket boundary whose lower side holds
        closest to half the load (see the module docstring).

    Raises:
        InvalidKeyHistogram: the range covers a single position, or the histogram is malformed.
    """
    midpoint = midpoint_split_hash(hash_range)
    if not weights:
        return midpoint
    values = check_histogram(weights)
    total = sum(values)
    if total < MIN_SAMPLE_WEIGHT:
        return midpoint
    if abs(_weight_below(hash_range, values, midpoint) / total - 0.5) <= MIDPOINT_TOLERANCE:
        return midpoint
    n = len(values)
    best: tuple[float, int, int] | None = None
    below = 0.0
    for index in range(1, n):
        below += values[index - 1]
        at = bucket_start(hash_range, n, index)
        if not hash_range.start < at <= hash_range.end:
            continue
        score = (abs(2.0 * below - total), abs(at - midpoint), at)
        if best is None or score < best:
            best = score
    return midpoint if best is None else best[2]


def split_point_moved(
    hash_range: HashRange, old: Sequence[float] | None, new: Sequence[float] | None
) -> bool:
    """Whether the split hash of ``new`` moved by more than :data:`SPLIT_POINT_MOVE` of the
    range from that of ``old`` (always False for a range too small to split).

    Raises:
        InvalidKeyHistogram: a histogram is malformed.
    """
    if hash_range.size < 2:
        return False
    before = balanced_split_hash(hash_range, old)
    after = balanced_split_hash(hash_range, new)
    return abs(after - before) > hash_range.size * SPLIT_POINT_MOVE


__all__ = [
    "KEY_HASH_BUCKETS",
    "MAX_BUCKETS",
    "MIDPOINT_TOLERANCE",
    "MIN_SAMPLE_WEIGHT",
    "SPLIT_POINT_MOVE",
    "InvalidKeyHistogram",
    "balanced_split_hash",
    "bucket_index",
    "bucket_start",
    "check_histogram",
    "midpoint_split_hash",
    "split_point_moved",
]
