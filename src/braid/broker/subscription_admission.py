"""Who may join or leave a subscription, stored or not (Pulsar's rules, one place for both kinds of
topic): consumers of one subscription share its type, an Exclusive subscription has one consumer,
and a consumer unsubscribes only when it is the last one attached.

Pure checks: they raise :class:`~braid.broker.errors.ConsumerBusy` naming the reason, and change
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from braid.broker.consumer import Consumer, SubType
from braid.broker.errors import ConsumerBusy


def check_joins(
    subscription: str, topic: str, current: SubType.ValueType, consumer: Consumer
) -> None:
    """Whether ``consumer`` may join a subscription of type ``current`` that has consumers."""
    if current != consumer.sub_type:
        raise ConsumerBusy(
            f"subscription {subscription!r} on {topic} is of type {SubType.Name(current)}; "
            f"a consumer of type {SubType.Name(consumer.sub_type)} cannot attach"
        )
    if current == SubType.Exclusive:
        raise ConsumerBusy(
            f"Exclusive consumer is already connected to subscription {subscription!r}"
        )


def check_unsubscribe(
    subscription: str, consumers: Sequence[Consumer], consumer: Consumer | None
) -> None:
    """Whether ``consumer`` (``None``: an operator) may delete the subscription: no other
    consumer may be attached."""
    others = [c for c in consumers if c is not consumer]
    if others:
        raise ConsumerBusy(
            f"subscription {subscription!r} has {len(others)} other connected consumer(s); "
            "unsubscribe refused"
        )


__all__ = ["check_joins", "check_unsubscribe"]
