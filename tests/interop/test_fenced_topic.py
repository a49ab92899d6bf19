"""The official client producing while another writer takes the topic's managed ledger over
(ADR 0040).

The other writer is a second managed-ledger factory on the broker's own metadata store and bookie,
opening the topic's log as a new owner does (recovery fences the broker's ledger on the bookie).
The broker's adds are then refused by the bookie: those sends get no receipt - the broker closes
the producer and gives the topic up - and the client reconnects and resends them to the topic,
which the broker loads again. Pinned: every send the client saw acknowledged is stored at exactly
the message id its receipt named, in send order; nothing was acknowledged that is not there; the
only other entries are copies, at the fenced ledger's end, of sends that failed after the bookie
took them and were resent (at least once, as Pulsar without deduplication).
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
    # And nothing else but copies of resent messages: a send whose add the bookie took just
    # before the fence, but which failed with TopicFenced because the broker learnt of the
    # takeover first, is kept by the recovery and resent by the client - without deduplication
    # it is stored twice (ADR 0040, consequences). Such a copy ends the fenced ledger, and the
    # message it copies is receipted later, in another ledger.
    assert stored[0][0] == b"warm-up"
    copies = [entry for entry in stored[1:] if entry not in set(receipted)]
    assert [entry for entry in stored if entry not in copies] == [stored[0], *receipted]
    fenced = stored[0][1][0]
    receipt_of = dict(receipted)
    for payload, (ledger, entry) in copies:
        assert payload in receipt_of, f"{payload!r} stored but never receipted"
        assert ledger == fenced, f"{payload!r} stored twice outside the fenced ledger"
        assert receipt_of[payload][0] > fenced, f"{payload!r} copied, not resent elsewhere"
        later = [p for p, (lg, e) in stored if lg == fenced and e > entry]
        assert all(p not in receipt_of or receipt_of[p][0] > fenced for p in later), (
            f"{payload!r}: a copy is followed by a message receipted in the fenced ledger"
        )
    # The takeover did happen: the messages span the broker's ledger, and the one it reopened.
    assert len({position[0] for _, position in stored}) >= 2
