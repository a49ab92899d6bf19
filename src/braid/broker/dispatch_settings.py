"""The broker-wide settings every subscription's dispatcher follows (from ``broker.conf``).

One frozen value, built once by :meth:`braid.broker.config.BrokerConfig.dispatch_settings` and
handed down topic -> subscription -> dispatcher, so a dispatcher never reads the configuration
itself. The names in the comments are Pulsar's ``broker.conf`` keys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    """How dispatchers read, route and hold back entries."""

    #: ``dispatcherMaxReadBatchSize``: entries read from storage per round.
    read_batch: int = 100
    #: ``acknowledgmentAtBatchIndexLevelEnabled``: keep acks of single messages of a batch (PIP-54)
    #: and send the remaining ack set with a redelivered batch.
    batch_index_ack: bool = True
    #: ``delayedDeliveryEnabled``: hold messages with ``deliver_at_time`` (Shared, Key_Shared).
    delayed_delivery: bool = True
    #: ``delayedDeliveryTickTimeMillis`` in seconds: the delayed-delivery timer fires at most
    #: this often.
    delayed_tick_s: float = 1.0
    #: ``subscriptionKeySharedEnable``.
    key_shared_enabled: bool = True
    #: ``subscriptionKeySharedUseConsistentHashing``: AUTO_SPLIT on a consistent-hash ring (else
    #: Pulsar's classic halving of the largest hash range).
    key_shared_consistent_hashing: bool = True
    #: ``subscriptionKeySharedConsistentHashingReplicaPoints``: ring points per consumer.
    key_shared_replica_points: int = 100
    #: ``keySharedLookAheadMsgInReplayThresholdPerSubscription``: a Key_Shared dispatcher stops
    #: reading new entries while this many are held back for redelivery.
    key_shared_look_ahead: int = 20_000
