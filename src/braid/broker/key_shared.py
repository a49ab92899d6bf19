"""The Key_Shared dispatcher: a shared subscription where each key goes to one consumer.

Every entry is routed, whole, by the hash of its sticky key (:mod:`braid.broker.sticky_keys`) to
the consumer the subscription's selector names. Per-key order holds because

* an entry is held back (into the replay queue) when its consumer has no permits, when its hash is
  *draining* - another consumer still has unacknowledged messages of that hash, delivered before
  the assignment changed (PIP-379) - or when an earlier entry of the same hash is already held;
* held entries are served first, in position order, and a newer entry of a hash never overtakes
  an older held one;
* a consumer that leaves hands its unacknowledged entries back to the replay queue, where they
  wait for the hash's new consumer in order.

``allowOutOfOrderDelivery`` (set by the subscription's first consumer; later ones must agree)
drops the two ordering rules: entries only wait for permits. Batches are routed by the outer
metadata's key, so producers batch by key (the official clients' ``KeyBased`` batching) to keep
keys apart. Cumulative acknowledgement is refused, as in Pulsar.

With PIP-486's ``entryBucketDispatch`` (Stream consumers sharing a segment of a scalable topic)
the "hash" is the entry's bucket and the consumers own buckets
(:mod:`braid.broker.entry_buckets`); every rule above applies unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.dispatcher import SharedDispatcher, _metadata
from braid.broker.entry_buckets import EntryBucketSelector, bucket_splits, entry_bucket
from braid.broker.errors import ConsumerBusy
from braid.broker.sticky_keys import (
    NONE_KEY,
    KeySharedPolicy,
    PendingHashes,
    StickyKeySelector,
    new_selector,
    sticky_hash_of,
)
from braid.clock import Clock
from braid.core.hashing import sticky_key_hash
from braid.ledger.api import Entry, ManagedCursor, ManagedLedger, Position
from braid.protocol.generated import PulsarApi_pb2 as pb

_NONE_KEY_HASH = sticky_key_hash(NONE_KEY)


class KeySharedDispatcher(SharedDispatcher):
    """Routes entries by sticky-key hash; see the module docstring for the ordering rules."""

    def __init__(
        self,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        policy: KeySharedPolicy,
        *,
        settings: DispatchSettings,
        clock: Clock,
        description: str = "",
    ) -> None:
        super().__init__(
            ledger,
            cursor,
            SubType.Key_Shared,
            settings=settings,
            clock=clock,
            description=description,
        )
        self.policy = policy
        self._buckets: tuple[int, ...] | None = None
        self._selector: StickyKeySelector[Consumer]
        if policy.entry_bucket_dispatch:
            self._buckets = bucket_splits(policy)
            self._selector = EntryBucketSelector(self._buckets)
        else:
            self._selector = new_selector(
                policy,
                consistent_hashing=settings.key_shared_consistent_hashing,
                replica_points=settings.key_shared_replica_points,
            )
        self._pending: PendingHashes[Consumer] = PendingHashes()

    @property
    def in_order(self) -> bool:
        return not self.policy.allow_out_of_order_delivery

    # -- consumers -----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        """Give ``consumer`` its hashes.

        Raises:
            ConsumerBusy: its Key_Shared policy differs from the subscription's.
            ConsumerAssignError: its STICKY ranges conflict with another consumer's.
        """
        policy = consumer.key_shared or KeySharedPolicy()
        if not policy.same_subscription_policy(self.policy):
            raise ConsumerBusy(
                "the consumer uses a different Key_Shared policy than the subscription "
                f"({policy.mode.name}, allowOutOfOrderDelivery={policy.allow_out_of_order_delivery}"
                f" vs {self.policy.mode.name}, "
                f"allowOutOfOrderDelivery={self.policy.allow_out_of_order_delivery})"
            )
        self._selector.add(consumer, policy)
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self._selector.remove(consumer)
        super().remove_consumer(consumer)

    # -- acknowledgements and redelivery --------------------------------------------------------

    def on_acked(self, positions: Sequence[Position]) -> None:
        super().on_acked(positions)
        if self._pending.release(positions):
            self.unblock()  # a draining hash may now go to its new consumer

    def _requeue(self, positions: Sequence[Position]) -> None:
        super()._requeue(positions)  # reads the hashes before they are released
        if self._pending.release(positions):
            self.unblock()

    def _hash_of_pending(self, position: Position) -> int | None:
        return self._pending.hash_of(position)

    def key_hash(self, entry: Entry) -> int:
        """The hash ``entry`` is routed by (its sticky key's, or its bucket's)."""
        return self._key_hash(entry, _metadata(entry))

    def _key_hash(self, entry: Entry, meta: pb.MessageMetadata | None) -> int:
        if self._buckets is not None:
            return entry_bucket(meta, self._buckets, entry.position)
        return sticky_hash_of(meta) if meta is not None else _NONE_KEY_HASH

    def reset_books(self) -> None:
        super().reset_books()
        self._pending.clear()

    def stats(self) -> dict[str, object]:
        stats = super().stats()
        stats["keySharedMode"] = self.policy.mode.name
        stats["allowOutOfOrderDelivery"] = self.policy.allow_out_of_order_delivery
        stats["entryBucketDispatch"] = self.policy.entry_bucket_dispatch
        stats["consumerKeyHashRanges"] = {
            c.consumer_name: [f"[{a}, {b}]" for a, b in ranges]
            for c, ranges in self._selector.ranges().items()
        }
        stats["drainingHashes"] = {
            c.consumer_name: self._pending.held_by(c) for c in self.consumers
        }
        return stats

    # -- routing -------------------------------------------------------------------------------

    def _spread(self, entries: Sequence[Entry], *, from_replay: bool) -> int:
        budgets = {id(c): c.permits for c in self.consumers if c.permits > 0 and not c.closed}
        batches: dict[int, tuple[Consumer, list[Delivery]]] = {}
        held: set[int] = set()
        delivered = 0
        for entry in entries:
            meta = _metadata(entry)
            if self._held_for_later(entry, meta):
                continue
            key_hash = self._key_hash(entry, meta)
            if self.in_order and (
                key_hash in held or (not from_replay and self.replay.holds_hash(key_hash))
            ):
                # An older entry of this key waits: this one waits behind it.
                self.replay.add(entry.position, key_hash)
                continue
            target = self._selector.select(key_hash)
            if (
                target is None
                or budgets.get(id(target), 0) <= 0
                or (self.in_order and self._pending.blocks(key_hash, target))
            ):
                self.replay.add(entry.position, key_hash)
                held.add(key_hash)
                continue
            delivery = self._delivery(entry, meta)
            budgets[id(target)] -= delivery.messages
            batches.setdefault(id(target), (target, []))[1].append(delivery)
            if self.in_order:
                self._pending.delivered(target, entry.position, key_hash)
            delivered += 1
        for target, deliveries in batches.values():
            target.deliver(deliveries)
        return delivered
