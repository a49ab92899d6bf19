"""A broker consumer and producer keep their own books: what the dispatcher and the topic may ask
of them, and what they then send."""

from __future__ import annotations

from collections.abc import Sequence

from braid.broker.client_quirks import client_drops_connection_on_send_error
from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.errors import ChecksumMismatch, TopicTerminated
from braid.broker.producer import AccessMode, Producer
from braid.ledger.api import Entry, Position


class _Connection:
    """Records what a consumer or producer sends (the transport protocols of both)."""

    remote_address = "127.0.0.1:1"
    closed = False

    def __init__(self) -> None:
        self.sent: list[tuple[object, ...]] = []

    def send_messages(self, consumer_id: int, deliveries: Sequence[Delivery]) -> None:
        self.sent.append(("messages", [d.entry.position for d in deliveries]))

    def send_close_consumer(self, consumer_id: int, assigned: object = None) -> None:
        self.sent.append(("close_consumer",))

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self.sent.append(("active", is_active))

    def send_reached_end_of_topic(self, consumer_id: int) -> bool:
        self.sent.append(("end_of_topic",))
        return True

    def send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, position: Position
    ) -> None:
        self.sent.append(("receipt", sequence_id, position))

    def send_publish_error(self, producer_id: int, sequence_id: int, exc: BaseException) -> None:
        self.sent.append(("error", sequence_id))

    def send_close_producer(self, producer_id: int, assigned: object = None) -> None:
        self.sent.append(("close_producer",))


def _delivery(entry_id: int, messages: int) -> Delivery:
    return Delivery(Entry(Position(1, entry_id), b"x" * 10), 0, messages)


def test_a_consumer_books_deliveries_and_forgets_what_is_acknowledged() -> None:
    conn = _Connection()
    consumer = Consumer(1, "c", SubType.Shared, 0, conn)
    consumer.add_permits(10)
    consumer.deliver([_delivery(0, 3), _delivery(1, 1), _delivery(2, 2), _delivery(3, 1)])
    assert conn.sent == [("messages", [Position(1, i) for i in range(4)])]
    assert consumer.permits == 3 and consumer.unacked_messages == 7
    assert consumer.topic_counters.snapshot() == (0, 0, 7, 40)
    consumer.acknowledged([Position(1, 1), Position(1, 9)])  # 1:9 was never delivered here
    assert consumer.unacked_messages == 6
    consumer.acknowledged_up_to(Position(1, 0))
    assert consumer.unacked_messages == 3
    # A redelivery request naming an entry twice (once per message of a batch) takes it once.
    assert consumer.take_pending([Position(1, 3), Position(1, 1), Position(1, 3)]) == [
        Position(1, 3)
    ]
    assert consumer.take_pending() == [Position(1, 2)] and consumer.unacked_messages == 0
    consumer.deliver([_delivery(4, 1)])
    consumer.forget_pending()
    assert consumer.unacked_messages == 0 and consumer.stats()["unackedMessages"] == 0


def test_a_consumer_is_told_the_end_of_topic_once_and_nothing_after_it_is_detached() -> None:
    conn = _Connection()
    consumer = Consumer(1, "c", SubType.Exclusive, 0, conn)
    consumer.notify_end_of_topic()
    consumer.notify_end_of_topic()
    assert conn.sent == [("end_of_topic",)]
    consumer.add_permits(5)
    consumer.detach()
    consumer.deliver([_delivery(0, 1)])
    assert consumer.closed and consumer.unacked_messages == 0 and len(conn.sent) == 1


def test_a_producer_counts_what_it_published_and_refused() -> None:
    conn = _Connection()
    producer = Producer(7, "p", AccessMode.Shared, conn, user_provided_name=True)
    producer.count_in(3, 300)
    producer.count_in(1, 20)
    assert producer.count_refused() == 1 and producer.count_refused() == 2
    stats = producer.stats()
    assert (stats["msgInCounter"], stats["bytesInCounter"], stats["msgRefusedCounter"]) == (
        4,
        320,
        2,
    )


def test_a_detached_producer_sends_no_more_answers() -> None:
    conn = _Connection()
    producer = Producer(7, "p", AccessMode.Shared, conn, user_provided_name=True)
    first = producer.expect(0, 0, 0)
    second = producer.expect(1, 1, 1)
    producer.complete(first, Position(1, 0), None)
    producer.detach()
    producer.complete(second, Position(1, 1), None)
    assert conn.sent == [("receipt", 0, Position(1, 0))] and producer.pending == 0


def test_a_send_refused_by_a_terminated_topic_closes_the_producer_after_earlier_receipts() -> None:
    # Not a SEND error: the official C++ client drops its whole connection on one, losing the
    # receipts in flight of every other producer on it (stored messages then look refused).
    assert client_drops_connection_on_send_error("Pulsar-CPP-v3.7.0")
    conn = _Connection()
    producer = Producer(7, "p", AccessMode.Shared, conn, user_provided_name=True)
    producer.close_when_terminated = True
    released: list[Producer] = []
    producer.release = released.append
    stored = producer.expect(0, 0, 0)
    refused = producer.expect(1, 1, 1)
    later = producer.expect(2, 2, 2)
    producer.complete(refused, None, TopicTerminated("topic t is terminated"))
    assert conn.sent == []  # the earlier receipt goes first
    producer.complete(stored, Position(1, 0), None)
    producer.complete(later, None, TopicTerminated("topic t is terminated"))
    assert conn.sent == [("receipt", 0, Position(1, 0)), ("close_producer",)]
    assert released == [producer] and producer.closed and producer.pending == 0


def test_other_send_errors_and_other_clients_still_get_send_errors() -> None:
    conn = _Connection()
    producer = Producer(7, "p", AccessMode.Shared, conn, user_provided_name=True)
    producer.close_when_terminated = True
    producer.complete(producer.expect(0, 0, 0), None, ChecksumMismatch("bad checksum"))
    assert conn.sent == [("error", 0)] and not producer.closed
    # Braid's client re-routes on the SEND error at once (docs/protocol.md); so does Java's.
    assert not client_drops_connection_on_send_error("Braid-Python-0.1.0")
    assert not client_drops_connection_on_send_error("Pulsar-Java-v3.3.0")
    conn = _Connection()
    producer = Producer(8, "b", AccessMode.Shared, conn, user_provided_name=True)
    producer.complete(producer.expect(0, 0, 0), None, TopicTerminated("topic t is terminated"))
    assert conn.sent == [("error", 0)] and not producer.closed
