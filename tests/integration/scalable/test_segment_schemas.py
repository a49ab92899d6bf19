"""A scalable topic has one schema whatever its segments (``docs/client.md#schemas``): a ``segment://``
topic's schema is stored under its parent ``topic://`` name, so every segment - and a segment
created later by a split - shares the versions, and a schema one segment refuses every segment
refuses. Raw protocol, as a scalable-topic client speaks it."""

from __future__ import annotations

import json

import pytest

from braid.broker.schemas.model import version_from_bytes
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient, request
from tests.support.scalable_stack import ScalableStack

pytestmark = pytest.mark.integration

TOPIC = TopicName.parse("topic://public/default/readings")


def _avro(*fields: tuple[str, str]) -> pb.Schema:
    definition = {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": n, "type": t} for n, t in fields],
    }
    return pb.Schema(
        name="Reading", schema_data=json.dumps(definition).encode(), type=pb.Schema.Avro
    )


def _segments(layout: SegmentLayout) -> list[str]:
    return [
        str(SegmentTopicName.of(TOPIC, s.hash_range, s.segment_id)) for s in layout.active_segments
    ]


async def _producer(
    raw: RawClient, topic: str, producer_id: int, schema: pb.Schema
) -> pb.BaseCommand:
    cmd = commands.producer(topic, producer_id, 100 + producer_id, producer_name=f"p{producer_id}")
    cmd.producer.schema.CopyFrom(schema)
    return await request(raw, cmd, 100 + producer_id)


async def test_segments_share_one_topic_level_schema(stack: ScalableStack) -> None:
    layout = await stack.scalable.create_topic(TOPIC, 2)
    first, second = _segments(layout)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        v0 = _avro(("sensor", "string"), ("value", "int"))
        answer = await _producer(raw, first, 1, v0)
        assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS
        assert version_from_bytes(answer.producer_success.schema_version) == 0

        answer = await _producer(raw, second, 2, v0)
        assert version_from_bytes(answer.producer_success.schema_version) == 0

        # "value" as a string can neither read nor be read by the registered version (FULL).
        refused = await _producer(raw, second, 3, _avro(("sensor", "string"), ("value", "string")))
        assert refused.type == pb.BaseCommand.ERROR
        assert refused.error.error == pb.IncompatibleSchema

        # GET_SCHEMA by the segment's name or the scalable topic's: the same schema.
        for request_id, name in ((10, second), (11, str(TOPIC))):
            got = await request(
                raw,
                commands.wrap(pb.CommandGetSchema(request_id=request_id, topic=name)),
                request_id,
            )
            assert not got.getSchemaResponse.HasField("error_code")
            assert got.getSchemaResponse.schema.schema_data == v0.schema_data
            assert version_from_bytes(got.getSchemaResponse.schema_version) == 0

        # A child segment made by a split inherits the schema with the rest of the topic.
        after = await stack.scalable.split(TOPIC, layout.active_segments[0].segment_id)
        child = sorted(set(_segments(after)) - {first, second})[0]
        answer = await _producer(raw, child, 4, v0)
        assert version_from_bytes(answer.producer_success.schema_version) == 0
        refused = await _producer(raw, child, 5, _avro(("sensor", "string"), ("value", "string")))
        assert refused.error.error == pb.IncompatibleSchema
    finally:
        await raw.close()
