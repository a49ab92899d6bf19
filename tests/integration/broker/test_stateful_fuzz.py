"""The fuzz tier's stateful mode: hypothesis drives valid and hostile clients against a live
broker, and after every step a well-behaved client still round-trips a message.

The state machine keeps several raw connections (:mod:`tests.support.raw_client`) and their
producers and consumers, and interleaves ordinary commands (producers, subscriptions, sends,
flows, acks, seeks, closes) with corrupted ones: poison SENDs (metadata that does not parse, a lying
batch count, a payload over ``maxMessageSize``), checksum failures, garbage bytes, oversize frame
headers, half-sent frames dropped mid-way, and connections that never say CONNECT. After each step
a separate, well-behaved connection produces a fresh message and receives it back byte for byte,
and a new connection completes its handshake; at the end nothing was logged at ERROR (a bug). When
hypothesis finds a failing sequence it shrinks it to the shortest one that still breaks the broker.

When each sequence ends, every entry stored on the attacked topics must read back as a consumer
reads it (the poison never reached storage). Bounded for CI: 60 sequences of up to 30 steps,
10-30 s on a shared 2-core machine.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from braid.protocol import commands, encode_payload_command
from braid.protocol.batch import read_entry
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.poison import poison_bodies
from tests.support.raw_client import RawClient, message_body, request

T = TypeVar("T")

TOPICS = ("persistent://public/default/fuzz-a", "persistent://public/default/fuzz-b")
PROBE_TOPIC = "persistent://public/default/fuzz-probe"
SUB_TYPES = (
    pb.CommandSubscribe.Exclusive,
    pb.CommandSubscribe.Shared,
    pb.CommandSubscribe.Failover,
)


class _Errors(logging.Handler):
    """Collects what the broker logs at ERROR: an unexpected exception somewhere."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Attacker:
    """One raw connection of the state machine, with the ids it has used."""

    def __init__(self, raw: RawClient, number: int) -> None:
        self.raw = raw
        self.number = number
        self.producers: list[int] = []
        self.consumers: list[int] = []
        self.next_id = 1
        self.sequence = 0
        self.alive = True

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


class BrokerUnderAttack(RuleBasedStateMachine):
    """Hostile and ordinary clients; a well-behaved probe must always be served."""

    broker: BackgroundBroker  # set by the test before the machine runs
    connections = Bundle("connections")

    def __init__(self) -> None:
        super().__init__()
        self.attackers: list[Attacker] = []
        self.probe: RawClient | None = None
        self.probe_sequence = 0
        self.probe_consumer_ready = False

    # -- plumbing -------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.broker.call(coro, timeout=30)

    def _quietly(self, attacker: Attacker, coro: Coroutine[Any, Any, Any]) -> None:
        """Run an attacker's step; the broker closing that connection is a fine outcome."""

        async def guarded() -> None:
            try:
                await coro
            except (ConnectionError, OSError, TimeoutError):
                attacker.alive = False

        self._run(guarded())

    @property
    def port(self) -> int:
        return self.broker.service.port

    # -- setup ----------------------------------------------------------------------------------

    @initialize()
    def start_probe(self) -> None:
        async def open_probe() -> RawClient:
            probe = await RawClient.open("127.0.0.1", self.port)
            ready = await request(
                probe, commands.producer(PROBE_TOPIC, 1, 1, producer_name="probe"), 1
            )
            assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS, ready
            subscribe = commands.subscribe(
                PROBE_TOPIC,
                "probe",
                pb.CommandSubscribe.Exclusive,
                1,
                2,
                initial_position=pb.CommandSubscribe.Latest,
            )
            assert (await request(probe, subscribe, 2)).type == pb.BaseCommand.SUCCESS
            await probe.send(commands.flow(1, 1000))
            return probe

        self.probe = self._run(open_probe())

    # -- connections ----------------------------------------------------------------------------

    @rule(target=connections, handshake=st.booleans())
    def connect(self, handshake: bool) -> Attacker:
        raw = self._run(RawClient.open("127.0.0.1", self.port, handshake=handshake))
        attacker = Attacker(raw, len(self.attackers))
        attacker.alive = handshake  # one that never says CONNECT only waits for its deadline
        self.attackers.append(attacker)
        return attacker

    @rule(attacker=consumes(connections))
    def disconnect(self, attacker: Attacker) -> None:
        self._run(attacker.raw.close())
        attacker.alive = False

    # -- ordinary commands ----------------------------------------------------------------------

    @rule(attacker=connections, topic=st.sampled_from(TOPICS))
    def create_producer(self, attacker: Attacker, topic: str) -> None:
        if not attacker.alive:
            return
        producer_id = attacker.new_id()
        name = f"fuzz-{attacker.number}-{producer_id}"
        attacker.producers.append(producer_id)
        self._quietly(
            attacker,
            attacker.raw.send(
                commands.producer(topic, producer_id, producer_id, producer_name=name)
            ),
        )

    @rule(attacker=connections, payload=st.binary(max_size=2000))
    def send_message(self, attacker: Attacker, payload: bytes) -> None:
        if not attacker.alive or not attacker.producers:
            return
        producer_id = attacker.producers[-1]
        attacker.sequence += 1
        body = message_body(f"fuzz-{attacker.number}-{producer_id}", attacker.sequence, payload)
        self._quietly(
            attacker, attacker.raw.send(commands.send(producer_id, attacker.sequence), body)
        )

    @rule(
        attacker=connections,
        topic=st.sampled_from(TOPICS),
        sub_type=st.sampled_from(SUB_TYPES),
        permits=st.integers(0, 2000),
    )
    def subscribe(self, attacker: Attacker, topic: str, sub_type: int, permits: int) -> None:
        if not attacker.alive:
            return
        consumer_id = attacker.new_id()
        attacker.consumers.append(consumer_id)
        cmd = commands.subscribe(
            topic,
            f"sub-{sub_type}",
            sub_type,
            consumer_id,
            consumer_id,  # type: ignore[arg-type]
        )

        async def go() -> None:
            await attacker.raw.send(cmd)
            await attacker.raw.send(commands.flow(consumer_id, permits))

        self._quietly(attacker, go())

    @rule(
        attacker=connections,
        ledger=st.integers(0, 2**64 - 1),
        entry=st.integers(0, 2**64 - 1),
        kind=st.sampled_from(["ack", "redeliver", "seek", "close"]),
    )
    def consumer_command(self, attacker: Attacker, ledger: int, entry: int, kind: str) -> None:
        if not attacker.alive or not attacker.consumers:
            return
        consumer_id = attacker.consumers[-1]
        message_id = commands.message_id(ledger, entry)
        if kind == "ack":
            ack = pb.CommandAck(consumer_id=consumer_id, ack_type=pb.CommandAck.Individual)
            ack.message_id.add().CopyFrom(message_id)
            cmd = commands.wrap(ack)
        elif kind == "redeliver":
            redeliver = pb.CommandRedeliverUnacknowledgedMessages(consumer_id=consumer_id)
            redeliver.message_ids.add().CopyFrom(message_id)
            cmd = commands.wrap(redeliver)
        elif kind == "seek":
            seek = pb.CommandSeek(consumer_id=consumer_id, request_id=attacker.new_id())
            seek.message_id.CopyFrom(message_id)
            cmd = commands.wrap(seek)
        else:
            cmd = commands.wrap(
                pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=attacker.new_id())
            )
        self._quietly(attacker, attacker.raw.send(cmd))

    # -- corrupted input ------------------------------------------------------------------------

    @rule(attacker=connections, kind=st.integers(0, 3))
    def send_poison(self, attacker: Attacker, kind: int) -> None:
        if not attacker.alive or not attacker.producers:
            return
        producer_id = attacker.producers[-1]
        attacker.sequence += 1
        limit = self.broker.stack.config.max_message_size
        body = poison_bodies(f"fuzz-{attacker.number}", attacker.sequence, limit)[kind]
        self._quietly(
            attacker, attacker.raw.send(commands.send(producer_id, attacker.sequence), body)
        )

    @rule(attacker=connections, flip=st.integers(0, 255))
    def send_corrupt_checksum(self, attacker: Attacker, flip: int) -> None:
        if not attacker.alive or not attacker.producers:
            return
        producer_id = attacker.producers[-1]
        attacker.sequence += 1
        body = message_body("fuzz", attacker.sequence, b"payload")
        frame = bytearray(
            encode_payload_command(commands.send(producer_id, attacker.sequence), body)
        )
        frame[-1] ^= flip or 1
        self._quietly(attacker, attacker.raw.send_raw(bytes(frame)))

    @rule(attacker=consumes(connections), garbage=st.binary(min_size=8, max_size=512))
    def send_garbage(self, attacker: Attacker, garbage: bytes) -> None:
        self._quietly(attacker, attacker.raw.send_raw(garbage))
        self._run(attacker.raw.close())

    @rule(attacker=consumes(connections), size=st.integers(1 << 20, 1 << 30))
    def send_oversize_header(self, attacker: Attacker, size: int) -> None:
        self._quietly(attacker, attacker.raw.send_raw(struct.pack(">II", size, 8)))
        self._run(attacker.raw.close())

    @rule(attacker=consumes(connections), sent=st.integers(1, 256 * 1024))
    def abandon_a_partial_frame(self, attacker: Attacker, sent: int) -> None:
        header = struct.pack(">II", 4 * 1024 * 1024 - 4, 64)
        self._quietly(attacker, attacker.raw.send_raw(header + bytes(sent)))
        self._run(attacker.raw.close())

    # -- what must hold after every step ---------------------------------------------------------

    @invariant()
    def a_well_behaved_client_round_trips_a_message(self) -> None:
        if self.probe is None:
            return
        probe = self.probe
        self.probe_sequence += 1
        payload = f"probe-{self.probe_sequence}".encode()

        async def round_trip() -> bytes:
            body = message_body("probe", self.probe_sequence, payload)
            await probe.send(commands.send(1, self.probe_sequence), body)
            receipt = await probe.next_command(
                lambda c: c.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
            )
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
            event = await probe.next_event(lambda c: c.type == pb.BaseCommand.MESSAGE)
            assert event.body is not None
            ack = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Individual)
            ack.message_id.add().CopyFrom(event.command.message.message_id)
            await probe.send(commands.wrap(ack))
            fresh = await RawClient.open("127.0.0.1", self.port)  # handshakes, or raises
            await fresh.close()
            return event.body

        assert self._run(round_trip()).endswith(payload)

    def teardown(self) -> None:
        async def every_stored_entry_is_readable() -> None:
            # What the broker stored is what every consumer will be sent: each entry must read
            # back as a consumer reads it (metadata, batch, compression), poison or not.
            for name in TOPICS:
                topic = self.broker.service.topics.get(name)
                if topic is None:
                    continue
                ledger = topic.ledger
                position = ledger.next_position(ledger.first_position_marker())
                while True:
                    entries = await ledger.read(position, 100)
                    if not entries:
                        break
                    for entry in entries:
                        read_entry(entry.data)
                    position = ledger.next_position(entries[-1].position)

        self._run(every_stored_entry_is_readable())

        async def close_all() -> None:
            for attacker in self.attackers:
                await attacker.raw.close()
            if self.probe is not None:
                await self.probe.close()

        self._run(close_all())


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    background = BackgroundBroker(tmp_path / "fuzz", handshake_timeout_seconds=2).start()
    try:
        yield background
    finally:
        background.stop()


def test_hostile_command_sequences_never_stop_a_well_behaved_client(
    broker: BackgroundBroker,
) -> None:
    errors = _Errors()
    logging.getLogger("braid").addHandler(errors)
    BrokerUnderAttack.broker = broker
    try:
        BrokerUnderAttack.TestCase.settings = settings(
            max_examples=60,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        BrokerUnderAttack.TestCase().runTest()
    finally:
        logging.getLogger("braid").removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]
    assert asyncio  # the machine's steps run on the broker's own loop (BackgroundBroker.call)
