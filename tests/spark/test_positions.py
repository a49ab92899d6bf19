"""Where a read starts and ends: classic persistent:// topics, a braid.Checkpoint taken by a
client, a timestamp."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import SparkSession

from braid.admin.client import AdminClient
from braid.client import Client
from braid.core.checkpoint import Checkpoint
from tests.spark.helpers import Publisher, options
from tests.support.standalone import StandaloneProcess

pytestmark = pytest.mark.timeout(240)


def test_a_classic_topic_reads_in_batch_and_stream(
    spark: SparkSession, standalone: StandaloneProcess
) -> None:
    topic = "persistent://public/default/classic"
    pub = Publisher(standalone, topic)
    pub.publish(500)
    pub.close()
    rows = spark.read.format("braid").options(**options(standalone, topic)).load().collect()
    assert {r.value for r in rows} == pub.expected() and len(rows) == 500
    assert {r.topic for r in rows} == {topic}
    query = (
        spark.readStream.format("braid")
        .options(**options(standalone, topic, startingPosition="earliest"))
        .load()
        .writeStream.format("memory")
        .queryName("classic")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.sql("select count(*) from classic").collect()[0][0] == 500


def test_reading_resumes_after_a_client_checkpoint_and_from_a_timestamp(
    spark: SparkSession, standalone: StandaloneProcess
) -> None:
    topic = "topic://public/default/resume"
    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
    pub = Publisher(standalone, topic)
    pub.publish(300)
    with Client(standalone.service_url) as client:
        reader = client.create_checkpoint_consumer(topic, start=Checkpoint.earliest())
        taken = []
        while len(taken) < 120:
            taken += reader.receive_many(120 - len(taken), timeout=5.0)
        saved = reader.checkpoint().to_bytes().hex()
        reader.close()
    cutoff = int(time.time() * 1000) + 1
    while int(time.time() * 1000) <= cutoff:  # publish times of later messages exceed cutoff
        time.sleep(0.001)
    pub.publish(100)
    pub.close()
    rest = (
        spark.read.format("braid")
        .options(**options(standalone, topic, startingPosition=saved))
        .load()
        .collect()
    )
    assert {r.value for r in rest} == pub.expected() - {m.value for m in taken}
    assert len(rest) == 280
    recent = (
        spark.read.format("braid")
        .options(**options(standalone, topic, startingPosition=str(cutoff)))
        .load()
        .collect()
    )
    assert len(recent) == 100
    assert all(r.publish_time.timestamp() * 1000 >= cutoff for r in recent)
