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


async def _key_shared_round_trip(service_url: str, topic: str) -> None:
    client = pulsar.asyncio.Client(
        service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        consumers = [
            await client.subscribe(
                topic,
                "ks",
                consumer_type=pulsar.ConsumerType.KeyShared,
                consumer_name=f"c{i}",
                initial_position=pulsar.InitialPosition.Earliest,
                batch_index_ack_enabled=True,
            )
            for i in range(2)
        ]
        producer = await client.create_producer(topic, batching_type=pulsar.BatchingType.KeyBased)
        keys = [f"k{i}" for i in range(10)]
        await asyncio.gather(
            *(producer.send(f"{k}:{n}".encode(), partition_key=k) for n in range(5) for k in keys)
        )
        seen: dict[str, list[int]] = {}
        owner: dict[str, str] = {}
        all_in = asyncio.Event()

        async def drain(consumer: pulsar.asyncio.Consumer) -> None:
            # No timeout on receive: a cancelled receive could swallow a message.
            while True:
                msg = await consumer.receive()
                key, n = msg.data().decode().split(":")
                assert owner.setdefault(key, consumer.consumer_name()) == consumer.consumer_name()
                seen.setdefault(key, []).append(int(n))
                await consumer.acknowledge(msg)
                if sum(len(v) for v in seen.values()) == 50:
                    all_in.set()

        tasks = [asyncio.create_task(drain(c)) for c in consumers]
        done, _ = await asyncio.wait(
            [asyncio.create_task(all_in.wait()), *tasks], return_when=asyncio.FIRST_COMPLETED
        )
        for task in tasks:
            if task in done:
                task.result()  # a failed assertion inside a drain loop
            task.cancel()
        assert seen == {k: list(range(5)) for k in keys}
        for consumer in consumers:
            await consumer.close()
        await producer.close()
    finally:
        await client.close()


@pytest.mark.interop
def test_asyncio_client_on_a_key_shared_subscription(broker: BackgroundBroker, topic: str) -> None:
    asyncio.run(asyncio.wait_for(_key_shared_round_trip(broker.service_url, topic), 60))
