"""The official asyncio client (``pulsar.asyncio``, pulsar-client >= 3.7) produces, consumes and
acknowledges on Braid, with and without a schema."""

from __future__ import annotations

import asyncio

import pulsar
import pulsar.asyncio
import pytest
from pulsar.schema import JsonSchema, Record, String

from tests.support.broker_stack import BackgroundBroker


class Greeting(Record):
    text = String()


async def _round_trip(service_url: str, topic: str) -> None:
    client = pulsar.asyncio.Client(
        service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        consumer = await client.subscribe(topic, "sub", schema=JsonSchema(Greeting))
        producer = await client.create_producer(topic, schema=JsonSchema(Greeting))
        sent = await asyncio.gather(
            *(producer.send(Greeting(text=f"hello-{i}")) for i in range(50))
        )
        assert len(sent) == 50
        texts = []
        for _ in range(50):
            msg = await consumer.receive()
            texts.append(msg.value().text)
            await consumer.acknowledge(msg)
        assert texts == [f"hello-{i}" for i in range(50)]
        await consumer.acknowledge_cumulative(msg)
        await producer.close()
        await consumer.close()
        # Everything was acknowledged: a new consumer on the subscription gets nothing.
        again = await client.subscribe(topic, "sub", schema=JsonSchema(Greeting))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(again.receive(), 0.5)
        await again.close()
    finally:
        await client.close()


@pytest.mark.interop
def test_asyncio_client_produces_consumes_and_acknowledges(
    broker: BackgroundBroker, topic: str
) -> None:
    asyncio.run(asyncio.wait_for(_round_trip(broker.service_url, topic), 60))
