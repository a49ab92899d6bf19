"""The official client producing while another writer takes the topic's managed ledger over
(ADR 0040).

The other writer is a second managed-ledger factory on the broker's own metadata store and bookie,
opening the topic's log as a new owner does (recovery fences the broker's ledger on the bookie).
The broker's adds are then refused by the bookie: those sends get no receipt - the broker closes
the producer and gives the topic up - and the client reconnects and resends them to the topic,
which the broker loads again. Pinned: every send the client saw acknowledged is stored at exactly
the message id its receipt named, in send order; nothing was acknowledged that is not there.
"""

from __future__ import annotations

import threading

import pulsar

from braid.ledger import DefaultManagedLedgerFactory
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

COUNT = 400


def _ledger_name(topic: str) -> str:
    return "public/default/persistent/" + topic.rsplit("/", 1)[1]


def test_sends_racing_a_takeover_are_receipted_only_once_stored(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
    producer.send(b"warm-up")
    results: dict[int, tuple[pulsar.Result, pulsar.MessageId]] = {}
    lock = threading.Lock()

    def sent(index: int) -> object:
        def callback(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
            with lock:
                results[index] = (result, message_id)

        return callback

    intruder = DefaultManagedLedgerFactory(broker.stack.metadata, broker.stack.factory.storage)
    for i in range(COUNT):
        producer.send_async(f"m{i}".encode(), sent(i))
        if i == COUNT // 4:
            broker.call(intruder.open(_ledger_name(topic)))  # fences the broker's ledger
    wait_for(lambda: len(results) == COUNT, within=60, message="every send to be answered")
    broker.call(intruder.close())

    assert all(result == pulsar.Result.Ok for result, _ in results.values()), {
        i: r for i, (r, _) in results.items() if r != pulsar.Result.Ok
    }
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    stored: list[tuple[bytes, tuple[int, int]]] = []
    while reader.has_message_available():
        message = reader.read_next(timeout_millis=10_000)
        stored.append(
            (message.data(), (message.message_id().ledger_id(), message.message_id().entry_id()))
        )
    receipted = [
        (f"m{i}".encode(), (mid.ledger_id(), mid.entry_id()))
        for i, (_, mid) in sorted(results.items())
    ]
    # No acknowledgement without the message at the id it named, in send order.
    assert set(receipted) <= set(stored)
    assert [position for _, position in receipted] == sorted(position for _, position in receipted)
    # And nothing else: the bookie stores every add queued before the fence and refuses every
    # later one, so a refused send was not stored and its resend is the only copy.
    assert stored == [stored[0], *receipted]
    assert stored[0][0] == b"warm-up"
    # The takeover did happen: the messages span the broker's ledger, and the one it reopened.
    assert len({position[0] for _, position in stored}) >= 2
