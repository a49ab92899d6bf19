"""The braid source on real Spark: batch == stream over a range, exactly once in key order while
the topic splits and merges, restart from the checkpoint, admission control, AvailableNow."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from braid.admin.client import AdminClient
from tests.spark.conftest import Spark, start_standalone
from tests.spark.helpers import (
    Publisher,
    end_offsets,
    merge_any,
    options,
    split_any,
    values_in_order,
)
from tests.support.polling import wait_for
from tests.support.standalone import StandaloneProcess

pytestmark = pytest.mark.timeout(240)


def test_batch_read_of_a_fixed_range_equals_the_streaming_read(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    topic = "topic://public/default/batch-vs-stream"
    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
        pub = Publisher(standalone, topic)
        pub.publish(600)
        split_any(admin, topic)
        pub.publish(600)
        merge_any(admin, topic)
        pub.publish(600)
        pub.close()
    batches: dict[int, list[Any]] = {}

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = df.select("key", "value", "message_id").collect()

    query = (
        spark.readStream.format("braid")
        .options(**options(standalone, topic, startingPosition="earliest"))
        .option("maxRecordsPerTrigger", "700")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    streamed = [r for b in sorted(batches) for r in batches[b]]
    assert len(streamed) == 1800
    whole = spark.read.format("braid").options(**options(standalone, topic)).load()
    assert Counter(whole.select("key", "value", "message_id").collect()) == Counter(streamed)
    # Every micro-batch's own (start, end] read again as a batch query gives the same rows.
    for batch_id, start, end, rows in end_offsets(query)[:3]:
        if not rows:
            continue
        opts = options(standalone, topic, endingPosition=end)
        if start not in (None, "null"):  # batch 0 starts at the initial offset: earliest
            opts["startingPosition"] = start
        again = spark.read.format("braid").options(**opts).load()
        assert Counter(again.select("key", "value", "message_id").collect()) == Counter(
            batches[batch_id]
        )


def test_stream_gets_every_message_once_in_key_order_while_the_topic_splits_and_merges(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    topic = "topic://public/default/elastic"
    seen: list[Any] = []

    def collect(df: Any, batch_id: int) -> None:
        seen.extend(df.select("key", "value").collect())

    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
        pub = Publisher(standalone, topic)
        query = (
            spark.readStream.format("braid")
            .options(**options(standalone, topic, startingPosition="earliest"))
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            for change in (split_any, split_any, merge_any, split_any, merge_any, merge_any):
                before = pub.total
                pub.publish(400)
                # Change the topology while the query is reading this round's messages.
                wait_for(lambda: len(seen) > before, within=60, message="rows of this round")  # noqa: B023
                change(admin, topic)
            pub.publish(400)
            wait_for(
                lambda: len(seen) >= pub.total or query.exception() is not None,
                within=120,
                message=lambda: f"{pub.total} rows, got {len(seen)}",
            )
        finally:
            query.stop()
        pub.close()
        layout = admin.scalable_topics.get(topic)
    assert query.exception() is None
    assert int(layout["epoch"]) == 6
    assert len(seen) == pub.total
    assert {r.value for r in seen} == pub.expected()
    for key, counters in values_in_order(seen).items():
        assert counters == list(range(pub.counts[key])), key


def test_restart_from_the_checkpoint_after_further_splits_loses_and_duplicates_nothing(
    spark_holder: Spark, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    topic = "topic://public/default/restart"
    out, cp = tmp_path / "out", tmp_path / "cp"

    def start(trigger: dict[str, Any]) -> Any:
        return (
            spark_holder.session.readStream.format("braid")
            .options(**options(standalone, topic, startingPosition="earliest"))
            .option("maxRecordsPerTrigger", "300")
            .load()
            .select("key", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(**trigger)
            .start()
        )

    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
        pub = Publisher(standalone, topic)
        pub.publish(900)
        query = start({"processingTime": "100 milliseconds"})
        wait_for(lambda: query.lastProgress is not None, within=60, message="a first batch")
        split_any(admin, topic)
        pub.publish(300)
        wait_for(
            lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 600,
            within=60,
            message="600 rows",
        )
        query.stop()  # mid-stream: the batch in flight, if any, is replayed after the restart
        spark_holder.stop()
        split_any(admin, topic)
        merge_any(admin, topic)
        pub.publish(600)
        pub.close()
        query = start({"availableNow": True})
        query.awaitTermination(180)
    assert query.exception() is None
    rows = spark_holder.session.read.parquet(str(out)).collect()
    values = Counter(r.value for r in rows)
    assert set(values) == pub.expected()
    assert max(values.values()) == 1


def test_a_batch_replayed_after_splits_and_merges_reads_the_same_rows(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    topic = "topic://public/default/replayed"
    cp = tmp_path / "cp"

    def run(into: dict[int, list[bytes]]) -> None:
        def collect(df: Any, batch_id: int) -> None:
            into[batch_id] = sorted(r.value for r in df.select("value").collect())

        query = (
            spark.readStream.format("braid")
            .options(**options(standalone, topic, startingPosition="earliest"))
            .option("maxRecordsPerTrigger", "250")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
        pub = Publisher(standalone, topic)
        pub.publish(600)
        split_any(admin, topic)
        pub.publish(300)
        first: dict[int, list[bytes]] = {}
        run(first)
        last = max(first)
        # The driver "died" after planning and running the last batch, before committing it;
        # meanwhile the topic changed shape and grew.
        (cp / "commits" / str(last)).unlink()
        (cp / "commits" / f".{last}.crc").unlink(missing_ok=True)
        split_any(admin, topic)
        merge_any(admin, topic)
        pub.publish(300)
        pub.close()
    again: dict[int, list[bytes]] = {}
    run(again)
    assert min(again) == last
    assert again[last] == first[last]  # same (start, end] -> same rows, whatever changed
    rows = [v for b in sorted(first) if b < last for v in first[b]]
    rows += [v for b in sorted(again) for v in again[b]]
    assert Counter(rows) == Counter(pub.expected())


def test_max_records_per_trigger_caps_every_batch_and_available_now_stops(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    topic = "topic://public/default/capped"
    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=3)
        pub = Publisher(standalone, topic)
        pub.publish(1000)
        split_any(admin, topic)
        pub.publish(500)
    sizes: list[int] = []
    query = (
        spark.readStream.format("braid")
        .options(**options(standalone, topic, startingPosition="earliest"))
        .option("maxRecordsPerTrigger", "400")
        .load()
        .writeStream.foreachBatch(lambda df, _: sizes.append(df.count()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180) is not False
    pub.publish(100)  # after the query stopped: AvailableNow read what was there at its start
    pub.close()
    assert query.exception() is None
    assert sum(sizes) == 1500
    assert max(sizes) <= 400
    assert len([s for s in sizes if s]) >= 4


def test_data_deleted_before_it_was_read_fails_the_query_or_is_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    process = start_standalone(
        tmp_path / "data", scalableTopicGcIntervalSeconds="1", defaultRetentionTimeInMinutes="0"
    )
    topic = "topic://public/default/lossy"
    try:
        with AdminClient(process.web_url) as admin:
            admin.scalable_topics.create(topic, segments=1)
            pub = Publisher(process, topic)
            pub.publish(100)
            start = json.dumps(
                {"version": 1, "topics": {topic: {"epoch": 0, "segments": {"0": {"after": None}}}}}
            )
            admin.scalable_topics.split(topic, 0)
            pub.publish(50)
            pub.close()
            wait_for(
                lambda: "0" not in admin.scalable_topics.get(topic)["segments"],
                within=30,
                message="the sealed segment 0 to be deleted",
            )

        def run(fail: str) -> Any:
            return (
                spark.readStream.format("braid")
                .options(**options(process, topic, startingPosition=start, failOnDataLoss=fail))
                .load()
                .writeStream.format("memory")
                .queryName(f"lossy_{fail}")
                .trigger(availableNow=True)
                .start()
            )

        failing = run("true")
        with pytest.raises(
            StreamingQueryException, match="data loss in topic://public/default/lossy"
        ):
            failing.awaitTermination(120)
        skipping = run("false")
        skipping.awaitTermination(120)
        assert skipping.exception() is None
        assert spark.sql("select count(*) from lossy_false").collect()[0][0] == 50
    finally:
        process.stop()


def test_bad_options_fail_fast_naming_the_option(
    spark: SparkSession, standalone: StandaloneProcess
) -> None:
    reader = spark.read.format("braid").options(**options(standalone, "topic://public/default/x"))
    with pytest.raises(Exception, match=r"(?i)unknown option .startingOffsets"):
        reader.option("startingOffsets", "earliest").load()
    # A stream-only option on a batch read is refused when Spark creates the batch reader.
    batch = spark.read.format("braid").options(**options(standalone, "t", maxRecordsPerTrigger="5"))
    with pytest.raises(Exception, match=r"maxRecordsPerTrigger.*streaming reads only"):
        batch.load().count()


def test_available_now_without_a_read_limit_reads_the_children_of_a_split_too(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    # Parents first, in the first batch; their children (which got the rest) in the next one.
    topic = "topic://public/default/available-now-split"
    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
        pub = Publisher(standalone, topic)
        pub.publish(900)
        split_any(admin, topic)
        pub.publish(900)
        pub.close()
    query = (
        spark.readStream.format("braid")
        .options(**options(standalone, topic, startingPosition="earliest"))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 1800 and len(batches) >= 2, batches
