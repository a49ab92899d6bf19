"""Caps on producers and consumers, per topic, per subscription and per connection.

Pulsar's ``maxProducersPerTopic``, ``maxConsumersPerTopic`` and ``maxConsumersPerSubscription``
(``0`` = no cap, Pulsar's defaults), plus Braid's ``maxProducersPerConnection`` and
``maxConsumersPerConnection`` (Pulsar has no per-connection cap; ``0`` = none by default, since
one client connection multiplexes every producer of an application on a broker). A producer over a
cap is refused with ``ProducerBusy`` and a consumer with ``ConsumerBusy``, as Pulsar refuses them -
non-retriable for the official clients - and the message names the key. :class:`ClientLimits` is
pure: the broker's command handlers give it the counts they own.
"""

from __future__ import annotations

from dataclasses import dataclass

from braid.broker.errors import ConsumerBusy, ProducerBusy


@dataclass(frozen=True)
class ClientLimits:
    """The five caps (``0`` = no cap)."""

    max_producers_per_topic: int = 0
    max_consumers_per_topic: int = 0
    max_consumers_per_subscription: int = 0
    max_producers_per_connection: int = 0
    max_consumers_per_connection: int = 0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 0:
                raise ValueError(f"{name} must be 0 (no cap) or positive, got {value}")

    def check_producer(self, topic: str, on_topic: int, on_connection: int) -> None:
        """Raise :class:`ProducerBusy` unless one more producer fits.

        Args:
            topic: the topic's name (for the message).
            on_topic: producers the topic has now.
            on_connection: producers the connection has now (open or being created).
        """
        if self.max_producers_per_topic and on_topic >= self.max_producers_per_topic:
            raise ProducerBusy(
                f"topic {topic} reached its maximum of {self.max_producers_per_topic} producers "
                "(maxProducersPerTopic)"
            )
        if self.max_producers_per_connection and on_connection >= self.max_producers_per_connection:
            raise ProducerBusy(
                f"this connection reached its maximum of {self.max_producers_per_connection} "
                "producers (maxProducersPerConnection)"
            )

    def check_consumer(
        self, topic: str, subscription: str, on_topic: int, on_subscription: int, on_connection: int
    ) -> None:
        """Raise :class:`ConsumerBusy` unless one more consumer fits (counts as now)."""
        if self.max_consumers_per_topic and on_topic >= self.max_consumers_per_topic:
            raise ConsumerBusy(
                f"topic {topic} reached its maximum of {self.max_consumers_per_topic} consumers "
                "(maxConsumersPerTopic)"
            )
        if (
            self.max_consumers_per_subscription
            and on_subscription >= self.max_consumers_per_subscription
        ):
            raise ConsumerBusy(
                f"subscription {subscription} of {topic} reached its maximum of "
                f"{self.max_consumers_per_subscription} consumers (maxConsumersPerSubscription)"
            )
        if self.max_consumers_per_connection and on_connection >= self.max_consumers_per_connection:
            raise ConsumerBusy(
                f"this connection reached its maximum of {self.max_consumers_per_connection} "
                "consumers (maxConsumersPerConnection)"
            )


__all__ = ["ClientLimits"]
