"""PIP-483's ``SegmentLoadStats`` record and the ``SegmentLoadReporter``'s write rule.

:class:`SegmentLoad` is one segment's load record as the controller reads it: the four rates the
segment-owning broker writes at ``/topics/{tenant}/{ns}/{topic}/segments/{id}/load`` plus the
metadata store's last-modified time of the record, from which the merge window is measured.
:func:`is_material_change` is the reporter's rule for rewriting the record: only on a change
beyond ``scalableTopicLoadReportRateChangeThreshold``, so a steady segment writes once and goes
silent. A record may also carry Braid's key-hash histogram (``keyHashBuckets``, see
:mod:`braid.core.split_point`), which says where a split would halve the load; it never triggers a
write by itself. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from braid.core.autoscale_policy import (
    METRIC_JSON_KEYS,
    METRICS,
    InvalidAutoScalePolicy,
    check_rate,
)
from braid.core.split_point import InvalidKeyHistogram, check_histogram

#: JSON key of the optional key-hash histogram (Braid's addition to ``SegmentLoadStats``).
KEY_HASH_BUCKETS_JSON_KEY = "keyHashBuckets"


@dataclass(frozen=True)
class SegmentLoad:
    """One segment's ``SegmentLoadStats`` record plus the store's last-modified time of it.

    The JSON record (at ``/topics/{tenant}/{ns}/{topic}/segments/{id}/load``) carries only the
    four rates; ``modified_ms`` comes from the metadata store's ``Stat`` and is what the merge
    window is measured from (a record still "cold" that was last written at ``modified_ms`` proves
    the segment has been cold since then, because the reporter rewrites on material change).
    ``key_hash_buckets`` is the broker's decayed key-hash histogram over the segment's range
    (empty when it sent none), for :func:`braid.core.split_point.balanced_split_hash`.

    Raises:
        InvalidAutoScalePolicy: a rate is negative, not finite or not a number, ``modified_ms``
            is not an integer, or the histogram is malformed.
    """

    msg_rate_in: float
    bytes_rate_in: float
    msg_rate_out: float
    bytes_rate_out: float
    modified_ms: int
    key_hash_buckets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for attr, name in zip(METRICS, METRIC_JSON_KEYS, strict=True):
            object.__setattr__(self, attr, check_rate(f"load {name}", getattr(self, attr)))
        if self.key_hash_buckets:
            try:
                buckets = check_histogram(self.key_hash_buckets)
            except InvalidKeyHistogram as exc:
                raise InvalidAutoScalePolicy(f"load {KEY_HASH_BUCKETS_JSON_KEY}: {exc}") from None
            object.__setattr__(self, "key_hash_buckets", buckets)
        else:
            object.__setattr__(self, "key_hash_buckets", ())
        if isinstance(self.modified_ms, bool) or not isinstance(self.modified_ms, int):
            raise InvalidAutoScalePolicy(
                f"load modified time must be integer ms, got {self.modified_ms!r}"
            )

    @property
    def rates(self) -> tuple[float, float, float, float]:
        """The four rates in :data:`METRICS` order."""
        return (self.msg_rate_in, self.bytes_rate_in, self.msg_rate_out, self.bytes_rate_out)

    def to_json(self) -> dict[str, object]:
        """The ``SegmentLoadStats`` document (no timestamp: the store's Stat has it), with
        ``keyHashBuckets`` only when there is a histogram."""
        doc: dict[str, object] = dict(zip(METRIC_JSON_KEYS, self.rates, strict=True))
        if self.key_hash_buckets:
            doc[KEY_HASH_BUCKETS_JSON_KEY] = list(self.key_hash_buckets)
        return doc

    def encode(self) -> bytes:
        """The record as stored: compact UTF-8 JSON."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, doc: object, modified_ms: int) -> SegmentLoad:
        """Parse a decoded ``SegmentLoadStats`` object; ``modified_ms`` is the store's Stat time.

        All four rates are required; ``keyHashBuckets`` is optional. Unknown keys are ignored,
        so a newer broker may add fields.

        Raises:
            InvalidAutoScalePolicy: not an object, a rate missing, a rate of the wrong type, or a
                malformed histogram.
        """
        if not isinstance(doc, Mapping):
            raise InvalidAutoScalePolicy(
                f"a SegmentLoadStats record must be a JSON object, got {type(doc).__name__}"
            )
        missing = [name for name in METRIC_JSON_KEYS if name not in doc]
        if missing:
            raise InvalidAutoScalePolicy(f"SegmentLoadStats record lacks {', '.join(missing)}")
        msg_in, bytes_in, msg_out, bytes_out = (doc[name] for name in METRIC_JSON_KEYS)
        buckets = doc.get(KEY_HASH_BUCKETS_JSON_KEY)
        if buckets is not None and not isinstance(buckets, list):
            raise InvalidAutoScalePolicy(
                f"SegmentLoadStats {KEY_HASH_BUCKETS_JSON_KEY} must be a list, got {buckets!r}"
            )
        return cls(
            msg_in,
            bytes_in,
            msg_out,
            bytes_out,
            modified_ms=modified_ms,
            key_hash_buckets=tuple(buckets or ()),
        )

    @classmethod
    def decode(cls, data: bytes, modified_ms: int) -> SegmentLoad:
        """Parse the stored bytes of a ``SegmentLoadStats`` record.

        Raises:
            InvalidAutoScalePolicy: not UTF-8 JSON, or not a valid record.
        """
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidAutoScalePolicy(f"SegmentLoadStats record is not JSON: {exc}") from exc
        return cls.from_json(doc, modified_ms)


def is_material_change(
    last_written: SegmentLoad | None, current: SegmentLoad, threshold: float
) -> bool:
    """The load reporter's write rule: should ``current`` replace the last record written?

    True when nothing was written yet, or when any of the four rates moved by *more than*
    ``threshold`` relative to the last written value (``|new - old| / old > threshold``), or
    crossed from or to zero (a relative change from zero is undefined, and a segment going
    idle or waking up is always worth recording). Modified times are not compared.

    Raises:
        InvalidAutoScalePolicy: ``threshold`` is negative or not finite.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidAutoScalePolicy(f"rate change threshold must be a number, got {threshold!r}")
    if not math.isfinite(threshold) or threshold < 0:
        raise InvalidAutoScalePolicy(f"rate change threshold must be >= 0, got {threshold!r}")
    if last_written is None:
        return True
    for old, new in zip(last_written.rates, current.rates, strict=True):
        if old == 0.0 or new == 0.0:
            if old != new:
                return True
            continue
        if abs(new - old) / old > threshold:
            return True
    return False


__all__ = ["KEY_HASH_BUCKETS_JSON_KEY", "SegmentLoad", "is_material_change"]
