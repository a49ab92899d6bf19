"""Dead-letter and retry-letter topics of a Queue consumer (the official clients'
``DeadLetterPolicy``; ``docs/client.md#queue-parity-with-shared-subscriptions``).

* **Dead letter**: a message the application has been given ``max_redeliver_count`` times again
  (its ``redelivery_count`` reached the maximum) and negatively acknowledges - or lets its ack
  timeout pass - once more is not redelivered: it is published to the dead-letter topic (default
  ``<topic>-<subscription>-DLQ``) with its key, event time and properties plus ``REAL_TOPIC``
  and ``ORIGIN_MESSAGE_ID``, and acknowledged only once that publish is stored (a failed
  publish redelivers it instead: never lost). ``initial_subscription_name`` is created on the
  dead-letter topic before its first message, so nothing put there is missed.
* **Retry letter** (``retry_enable=True``): ``reconsume_later(message, delay)`` publishes the
  message to the retry-letter topic (default ``<topic>-<subscription>-RETRY``) with
  ``deliver_after=delay`` and ``RECONSUMETIMES`` + 1 (plus ``REAL_TOPIC``, ``ORIGIN_MESSAGE_ID``,
  ``DELAY_TIME``), then acknowledges the original; the consumer is subscribed to the retry topic
  too, so the message comes back after the delay. Once ``RECONSUMETIMES`` reached
  ``max_redeliver_count`` it goes to the dead-letter topic instead. The property names are the
  official clients' (``RetryMessageUtil``).

The names derive from the topic as the official clients derive them, so for a ``topic://`` topic
they are ``topic://`` topics too (created like any other topic: explicitly, or by the broker's
auto-creation).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from braid.client.errors import InvalidConfigurationError
from braid.client.message import Message

if TYPE_CHECKING:
    from braid.client.producer import AsyncProducer

log = logging.getLogger(__name__)

#: The official clients' property names (``RetryMessageUtil``).
REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DLQ_SUFFIX = "-DLQ"
#: Retries a ``retry_enable`` consumer without a policy allows (the official clients' 16).
DEFAULT_MAX_RECONSUME_TIMES = 16
RETRY_SUFFIX = "-RETRY"


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """Where messages that keep failing go (the official clients' fields).

    ``max_redeliver_count`` (>= 1): redeliveries before a message is dead-lettered;
    ``dead_letter_topic``: default ``<topic>-<subscription>-DLQ``; ``initial_subscription_name``:
    a subscription created on the dead-letter topic before its first message (none by default);
    ``retry_letter_topic`` (with ``retry_enable``): default ``<topic>-<subscription>-RETRY``.
    """

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    retry_letter_topic: str | None = None

    def __post_init__(self) -> None:
        count = self.max_redeliver_count
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidConfigurationError(
                f"max_redeliver_count must be an int greater than 0: {count!r}"
            )
        for name in ("dead_letter_topic", "initial_subscription_name", "retry_letter_topic"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidConfigurationError(f"{name} must be a non-empty str: {value!r}")

    def dead_letter_topic_for(self, topic: str, subscription: str) -> str:
        return self.dead_letter_topic or f"{topic}-{subscription}{DLQ_SUFFIX}"

    def retry_letter_topic_for(self, topic: str, subscription: str) -> str:
        return self.retry_letter_topic or f"{topic}-{subscription}{RETRY_SUFFIX}"


#: Opens a producer on a topic.
ProducerOpener = Callable[[str], Awaitable["AsyncProducer"]]
#: Creates subscription ``name`` on ``topic`` (from its earliest message) if it does not exist.
SubscriptionCreator = Callable[[str, str], Awaitable[None]]


def _letter_properties(message: Message, real_topic: str) -> dict[str, str]:
    properties = message.properties
    properties.setdefault(REAL_TOPIC, real_topic)
    properties.setdefault(ORIGIN_MESSAGE_ID, str(message.message_id))
    return properties


class DeadLetters:
    """Publishes a Queue consumer's dead and retried messages (producers opened lazily)."""

    def __init__(
        self,
        policy: DeadLetterPolicy,
        topic: str,
        subscription: str,
        open_producer: ProducerOpener,
        create_subscription: SubscriptionCreator,
    ) -> None:
        self.policy = policy
        self.topic = topic
        self.dead_letter_topic = policy.dead_letter_topic_for(topic, subscription)
        self.retry_letter_topic = policy.retry_letter_topic_for(topic, subscription)
        self._open_producer = open_producer
        self._create_subscription = create_subscription
        self._producers: dict[str, AsyncProducer] = {}

    def exhausted(self, message: Message) -> bool:
        """The message was redelivered ``max_redeliver_count`` times: next stop, the DLQ."""
        return message.redelivery_count >= self.policy.max_redeliver_count

    async def _producer(self, topic: str) -> AsyncProducer:
        producer = self._producers.get(topic)
        if producer is None:
            if topic == self.dead_letter_topic and self.policy.initial_subscription_name:
                await self._create_subscription(topic, self.policy.initial_subscription_name)
            producer = await self._open_producer(topic)
            self._producers[topic] = producer
        return producer

    async def dead_letter(self, message: Message) -> None:
        """Store ``message`` on the dead-letter topic (raises the producer's error)."""
        producer = await self._producer(self.dead_letter_topic)
        await producer.send(
            message.data,
            key=message.key,
            properties=_letter_properties(message, self.topic),
            event_time=message.event_time,
        )
        log.info(
            "message %s of %s dead-lettered to %s after %d redeliveries",
            message.message_id,
            self.topic,
            self.dead_letter_topic,
            message.redelivery_count,
        )

    async def retry_later(self, message: Message, delay: float) -> bool:
        """Store ``message`` on the retry-letter topic for ``delay`` seconds; ``False`` when
        it was dead-lettered instead (``RECONSUMETIMES`` reached the maximum)."""
        properties = _letter_properties(message, self.topic)
        try:
            times = int(properties.get(RECONSUMETIMES, "0")) + 1
        except ValueError:
            times = 1
        if times > self.policy.max_redeliver_count:
            await self.dead_letter(message)
            return False
        properties[RECONSUMETIMES] = str(times)
        properties[DELAY_TIME] = str(round(delay * 1000))
        producer = await self._producer(self.retry_letter_topic)
        await producer.send(
            message.data,
            key=message.key,
            properties=properties,
            event_time=message.event_time,
            deliver_after=delay,
        )
        return True

    async def close(self) -> None:
        producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            await producer.close()


__all__ = [
    "DEFAULT_MAX_RECONSUME_TIMES",
    "DELAY_TIME",
    "ORIGIN_MESSAGE_ID",
    "REAL_TOPIC",
    "RECONSUMETIMES",
    "DeadLetterPolicy",
    "DeadLetters",
]
