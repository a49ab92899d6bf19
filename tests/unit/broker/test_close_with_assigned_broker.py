"""A broker closing a producer or consumer because its topic moved names the new owner in
CLOSE_PRODUCER / CLOSE_CONSUMER (PulsarApi.proto's ``assignedBrokerServiceUrl[Tls]``), so the
client goes there without a lookup; without a new owner the fields stay unset."""

from __future__ import annotations

from typing import Any, cast

from braid.broker.handlers import TopicCommands
from braid.broker.ownership import AssignedBroker
from braid.broker.send_validation import SendValidator
from braid.protocol.generated import PulsarApi_pb2 as pb


class Channel:
    client_version = "Pulsar-CPP-v3.7.0"
    remote_address = "127.0.0.1:1"
    closed = False

    def __init__(self) -> None:
        self.sent: list[pb.BaseCommand] = []

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        self.sent.append(cmd)


def _commands() -> tuple[TopicCommands, Channel]:
    channel = Channel()
    return TopicCommands(cast(Any, channel), cast(Any, None), SendValidator(1 << 20)), channel


def test_close_producer_and_consumer_name_the_new_owner() -> None:
    commands, channel = _commands()
    moved = AssignedBroker("pulsar://b2:6650", "pulsar+ssl://b2:6651")
    commands.send_close_producer(3, moved)
    commands.send_close_consumer(4, moved)
    producer, consumer = channel.sent
    assert producer.type == pb.BaseCommand.CLOSE_PRODUCER
    assert producer.close_producer.producer_id == 3
    assert producer.close_producer.assignedBrokerServiceUrl == "pulsar://b2:6650"
    assert producer.close_producer.assignedBrokerServiceUrlTls == "pulsar+ssl://b2:6651"
    assert consumer.type == pb.BaseCommand.CLOSE_CONSUMER
    assert consumer.close_consumer.consumer_id == 4
    assert consumer.close_consumer.assignedBrokerServiceUrl == "pulsar://b2:6650"


def test_without_a_new_owner_the_fields_stay_unset() -> None:
    commands, channel = _commands()
    commands.send_close_producer(3)
    commands.send_close_consumer(4, AssignedBroker("pulsar://b2:6650"))
    producer, consumer = channel.sent
    assert not producer.close_producer.HasField("assignedBrokerServiceUrl")
    assert not consumer.close_consumer.HasField("assignedBrokerServiceUrlTls")
