"""The braid sink on real Spark: exactly once under micro-batch replay (broker deduplication),
batch writes with every column, and the fail-fast checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from braid.admin.client import AdminClient
from tests.spark.helpers import Publisher, options
from tests.support.standalone import StandaloneProcess

pytestmark = pytest.mark.timeout(240)


def _copy_query(
    spark: SparkSession, process: StandaloneProcess, src: str, dst: str, cp: Path, **sink: str
) -> Any:
    return (
        spark.readStream.format("braid")
        .options(**options(process, src, startingPosition="earliest"))
        .option("maxRecordsPerTrigger", "300")
        .load()
        .select("key", "value", "properties")
        .writeStream.format("braid")
        .options(**options(process, dst, **sink))
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )


def _replay_last_batch(
    spark: SparkSession, process: StandaloneProcess, namespace: str, cp: Path, **sink: str
) -> tuple[int, int]:
    """Copy 900 messages, forget the last batch's commit, run again; (rows before, after)."""
    src, dst = f"topic://{namespace}/in", f"topic://{namespace}/out"
    with AdminClient(process.web_url) as admin:
        admin.scalable_topics.create(src, segments=2)
        admin.scalable_topics.create(dst, segments=2)
    pub = Publisher(process, src)
    pub.publish(900)
    pub.close()
    query = _copy_query(spark, process, src, dst, cp, **sink)
    query.awaitTermination(180)
    assert query.exception() is None

    def written() -> int:
        return spark.read.format("braid").options(**options(process, dst)).load().count()

    before = written()
    numbered = [p for p in (cp / "commits").iterdir() if p.name.isdigit()]
    last = max(numbered, key=lambda p: int(p.name))
    # As if the driver died after the sink wrote the batch, before it committed it.
    last.unlink()
    (cp / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    query = _copy_query(spark, process, src, dst, cp, **sink)
    query.awaitTermination(180)
    assert query.exception() is None
    assert (cp / "commits" / last.name).exists()  # the batch really ran again
    return before, written()


def test_replaying_a_micro_batch_writes_no_duplicates(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    with AdminClient(standalone.web_url) as admin:
        admin.namespaces.create("public/exactly-once")
        admin.namespaces.set_deduplication("public/exactly-once", True)
    before, after = _replay_last_batch(spark, standalone, "public/exactly-once", tmp_path / "cp")
    assert before == after == 900


def test_without_deduplication_the_same_replay_duplicates_the_batch(
    spark: SparkSession, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    # The control of the test above: the replay does publish the batch again.
    with AdminClient(standalone.web_url) as admin:
        admin.namespaces.create("public/at-least-once")
        admin.namespaces.set_deduplication("public/at-least-once", False)
    before, after = _replay_last_batch(
        spark, standalone, "public/at-least-once", tmp_path / "cp", exactlyOnce="false"
    )
    assert before == 900
    assert after == 1200


def test_batch_write_publishes_every_column(
    spark: SparkSession, standalone: StandaloneProcess
) -> None:
    topic = "topic://public/default/written"
    with AdminClient(standalone.web_url) as admin:
        admin.scalable_topics.create(topic, segments=2)
    df = spark.range(200).select(
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("event_time"),
    )
    df.write.format("braid").options(**options(standalone, topic)).mode("append").save()
    rows = spark.read.format("braid").options(**options(standalone, topic)).load().collect()
    assert len(rows) == 200
    for row in rows:
        n = int(row.value.decode()[1:])
        assert row.key == f"k{n % 7}"
        assert row.properties == {"n": str(n)}
        assert int(row.event_time.timestamp() * 1000) == 1_700_000_000_000 + n


def test_the_sink_refuses_what_it_cannot_write(
    spark: SparkSession, standalone: StandaloneProcess
) -> None:
    with AdminClient(standalone.web_url) as admin:
        admin.namespaces.create("public/no-dedup")
        admin.namespaces.set_deduplication("public/no-dedup", False)
    topic = "persistent://public/no-dedup/t"
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="set-deduplication public/no-dedup on"):
        df.write.format("braid").options(**options(standalone, topic)).mode("append").save()
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.range(3).write.format("braid").options(**options(standalone, topic)).mode(
            "append"
        ).save()
