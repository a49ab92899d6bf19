"""An ``http://`` service URL with the official client against ``braid standalone``: lookup,
partition metadata, topic lists and schemas all go over HTTP, then the client produces and
consumes on the broker URL it was given; and advertised listeners answer a LOOKUP that names one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import _pulsar
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess, free_port
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.raw_client import RawClient, request
from tests.support.standalone import standalone_process  # noqa: F401 - pytest fixture

TOPIC = "persistent://public/default/over-http"


class Reading(Record):
    sensor = String()
    value = Integer()


@pytest.fixture
def http_client(standalone_process: StandaloneProcess) -> Iterator[pulsar.Client]:  # noqa: F811
    client = pulsar.Client(
        standalone_process.web_url,
        operation_timeout_seconds=15,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        yield client
    finally:
        client.close()


@pytest.mark.interop
def test_http_service_url_produces_and_consumes(http_client: pulsar.Client) -> None:
    consumer = http_client.subscribe(TOPIC, "sub")
    producer = http_client.create_producer(TOPIC)
    for i in range(10):
        producer.send(b"m-%d" % i)
    for i in range(10):
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"m-%d" % i
        consumer.acknowledge(msg)


@pytest.mark.interop
def test_http_lookup_serves_partitions_schemas_and_topic_lists(
    http_client: pulsar.Client,
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    with AdminClient(standalone_process.web_url) as admin:
        admin.topics.create_partitioned(TOPIC, 3)
    assert http_client.get_topic_partitions(TOPIC) == [f"{TOPIC}-partition-{i}" for i in range(3)]
    consumer = http_client.subscribe(TOPIC, "sub", schema=AvroSchema(Reading))
    producer = http_client.create_producer(
        TOPIC, schema=AvroSchema(Reading), batching_enabled=False
    )
    for i in range(6):
        producer.send(Reading(sensor=f"s{i}", value=i))
    got = sorted(consumer.receive(timeout_millis=10_000).value().value for _ in range(6))
    assert got == list(range(6))

    # A regex consumer over HTTP lists the namespace's topics (GET .../namespaces/.../topics).
    conf = _pulsar.ConsumerConfiguration()
    conf.subscription_initial_position(pulsar.InitialPosition.Earliest)
    regex = http_client._client.subscribe_pattern(f"{TOPIC}.*", "regex", conf)
    topics = {regex.receive(10_000).topic_name() for _ in range(6)}
    assert topics == {f"{TOPIC}-partition-{i}" for i in range(3)}
    regex.close()


@pytest.mark.interop
def test_lookup_answers_the_named_advertised_listener(tmp_path: Path) -> None:
    port = free_port()
    listeners = (
        f"internal:pulsar://127.0.0.1:{port}",
        f"external:pulsar://broker.example.com:{port}",
    )
    broker = BackgroundBroker(
        tmp_path / "broker", broker_service_port=port, advertised_listeners=listeners
    ).start()
    try:

        async def lookups() -> dict[str, pb.CommandLookupTopicResponse]:
            raw = await RawClient.open("127.0.0.1", port)
            answers = {}
            try:
                for request_id, name in enumerate(("internal", "external", "", "nope"), 1):
                    cmd = commands.lookup(TOPIC, request_id)
                    if name:
                        cmd.lookupTopic.advertised_listener_name = name
                    answers[name] = (await request(raw, cmd, request_id)).lookupTopicResponse
            finally:
                await raw.close()
            return answers

        answers = broker.call(lookups())
        assert answers["internal"].brokerServiceUrl == f"pulsar://127.0.0.1:{port}"
        assert answers["external"].brokerServiceUrl == f"pulsar://broker.example.com:{port}"
        assert answers[""].brokerServiceUrl == f"pulsar://127.0.0.1:{port}"  # the first listener
        assert answers["nope"].response == pb.CommandLookupTopicResponse.Failed
        assert "nope" in answers["nope"].message

        client = pulsar.Client(
            f"pulsar://127.0.0.1:{port}",
            listener_name="internal",
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            consumer = client.subscribe(TOPIC, "sub")
            client.create_producer(TOPIC).send(b"via internal")
            assert consumer.receive(timeout_millis=10_000).data() == b"via internal"
        finally:
            client.close()
    finally:
        broker.stop()
