"""Where a segment's published keys hash: a sampled, decayed histogram (ADR 0023).

Each ``segment://`` topic served here carries a :class:`KeyHashSampler` over the segment's own hash
range (the range in its name's descriptor), split into
:data:`~braid.core.split_point.KEY_HASH_BUCKETS` equal buckets. The SEND path offers every entry
(:meth:`KeyHashSampler.offer`: one countdown decrement); one entry in :attr:`KeyHashSampler.every`
is looked at: its
``MessageMetadata`` is parsed for ``partition_key`` or, for a batch entry, the keys of up to
:data:`MAX_BATCH_KEYS` of its messages are read from the (decompressed) batch payload, each weighted
so the batch counts as all its messages. Keyless messages and keys outside the range add nothing.
The load reporter decays the weights with the rate window at every report and sends them with the
segment's load record; the controller's auto-scaler turns them into a split hash
(:func:`braid.core.split_point.balanced_split_hash`).

Sampling never fails a publish: an entry that does not parse is skipped.
"""

from __future__ import annotations

import logging
import struct

from braid.core.hashing import hash16
from braid.core.names import InvalidTopicName, SegmentTopicName
from braid.core.ranges import HashRange
from braid.core.split_point import KEY_HASH_BUCKETS
from braid.protocol.batch import decompress
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: One entry in this many is sampled.
SAMPLE_EVERY = 8
#: At most this many messages of a sampled batch entry are read for their keys.
MAX_BATCH_KEYS = 16

_U32 = struct.Struct(">I")
_NONE = pb.NONE


class KeyHashSampler:
    """The sampled key-hash histogram of one segment topic."""

    __slots__ = ("_buckets", "_countdown", "_size", "_start", "every", "hash_range", "weights")

    def __init__(
        self,
        hash_range: HashRange,
        *,
        every: int = SAMPLE_EVERY,
        buckets: int = KEY_HASH_BUCKETS,
    ) -> None:
        if every < 1 or buckets < 1:
            raise ValueError("sampling stride and bucket count must be positive")
        self.hash_range = hash_range
        self.every = every
        # Entries left until the next sampled one (counted down by offer, reset by sample).
        self._countdown = every
        self.weights = [0.0] * buckets
        self._start = hash_range.start
        self._size = hash_range.size
        self._buckets = buckets

    @classmethod
    def for_segment(cls, topic_name: str, *, every: int = SAMPLE_EVERY) -> KeyHashSampler | None:
        """A sampler over the range of ``segment://...`` topic ``topic_name`` (None if the name
        carries no valid descriptor)."""
        try:
            return cls(SegmentTopicName.parse(topic_name).hash_range, every=every)
        except InvalidTopicName:
            return None

    def offer(self, data: bytes, meta: pb.MessageMetadata | None = None) -> None:
        """One entry published: every :attr:`every`-th offered entry is sampled (for the others
        the SEND path pays this call and one decrement)."""
        self._countdown -= 1
        if self._countdown <= 0:
            self.sample(data, meta)

    def sample(self, data: bytes, meta: pb.MessageMetadata | None = None) -> None:
        """Add the keys of one stored entry (``[u32 size][MessageMetadata][payload]``); ``meta``
        is its metadata when the caller parsed it already (not parsed again then)."""
        self._countdown = self.every
        try:
            size = _U32.unpack_from(data, 0)[0]
            if meta is None:
                meta = pb.MessageMetadata.FromString(data[4 : 4 + size])
            if not meta.HasField("num_messages_in_batch"):
                if meta.HasField("partition_key"):
                    self._add(hash16(meta.partition_key), 1.0)
                return
            # A view's slices do not copy the (possibly large) batch payload.
            self._sample_batch(meta, memoryview(data)[4 + size :])
        except Exception as exc:  # a malformed entry is stored as sent; it just is not sampled
            log.debug("key sampling skipped an entry: %s", exc)

    def _sample_batch(self, meta: pb.MessageMetadata, payload: memoryview) -> None:
        total = meta.num_messages_in_batch
        if total <= 0:
            return
        if meta.compression != _NONE:
            inflated = decompress(meta.compression, bytes(payload), meta.uncompressed_size)
            payload = memoryview(inflated)
        reading = min(total, MAX_BATCH_KEYS)
        hashes = []
        pos = 0
        for _ in range(reading):
            meta_size = _U32.unpack_from(payload, pos)[0]
            pos += 4
            single = pb.SingleMessageMetadata.FromString(
                payload[pos : pos + meta_size]  # type: ignore[arg-type]  # upb takes any buffer
            )
            pos += meta_size + single.payload_size
            if single.HasField("partition_key"):
                hashes.append(hash16(single.partition_key))
        weight = total / reading
        for value in hashes:
            self._add(value, weight)

    def _add(self, value: int, weight: float) -> None:
        offset = value - self._start
        if 0 <= offset < self._size:
            self.weights[offset * self._buckets // self._size] += weight

    def decay(self, factor: float) -> None:
        """Multiply every weight by ``factor`` (``exp(-elapsed / window)`` at a report)."""
        self.weights = [w * factor for w in self.weights]

    def snapshot(self, digits: int = 2) -> tuple[float, ...]:
        """The weights rounded for a load record; empty when nothing was sampled."""
        if not any(self.weights):
            return ()
        return tuple(round(w, digits) for w in self.weights)


__all__ = ["MAX_BATCH_KEYS", "SAMPLE_EVERY", "KeyHashSampler"]
