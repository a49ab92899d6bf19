"""A real pipeline on Spark: a per-key running aggregation from a Braid topic to Parquet and back
to a Braid topic, against a fresh ``braid standalone``. Run it with one command::

    make spark-example            # or: .venv/bin/python examples/spark_pipeline.py

What it does:

1. starts ``braid standalone`` on free 127.0.0.1 ports (data in a temporary directory), creates
   the scalable topic ``topic://public/shop/orders`` (2 segments) and ``.../totals``, and turns on
   deduplication for ``public/shop`` (the sink's exactly-once needs it);
2. publishes 3 000 orders (key = customer, value = amount), splitting and merging the topic on
   the way, as an elastic topic does under changing load;
3. a streaming query ``orders`` -> Parquet (``orders.parquet``): every order exactly once (the
   file sink's log + the source's replayable offsets), parent segments before children;
4. a batch job Parquet -> per-customer running totals (a window in publish order) -> the
   ``totals`` topic, keyed by customer, each customer's totals published in order;
5. reads ``totals`` back and checks each customer's last total against the orders it published.

The streaming query uses ``Trigger.AvailableNow`` so the script ends by itself; with a
``processingTime`` trigger it runs forever and resumes from its checkpoint after a restart.
(Spark's Python data sources accept append-mode streams only, so a stateful update-mode
aggregation cannot stream into the braid sink directly; see docs/spark.md.)
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

import braid
import braid.spark
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess

ORDERS = "topic://public/shop/orders"
TOTALS = "topic://public/shop/totals"


def publish_orders(service_url: str, admin: AdminClient) -> dict[str, int]:
    rng = random.Random(7)
    expected: dict[str, int] = {}
    with braid.Client(service_url) as client:
        producer = client.create_producer(ORDERS)
        for step in range(3):
            keys, values = [], []
            for _ in range(1000):
                customer = f"customer-{rng.randrange(50)}"
                amount = rng.randrange(1, 100)
                expected[customer] = expected.get(customer, 0) + amount
                keys.append(customer)
                values.append(str(amount).encode())
            producer.send_many(values, keys=keys)
            if step == 0:
                admin.scalable_topics.split(ORDERS, 1)  # segment 1 runs hot
            elif step == 1:
                admin.scalable_topics.merge(ORDERS, [0, 2])  # 0 and 2 went cold
        producer.close()
    return expected


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="braid-spark-example-"))
    process = StandaloneProcess.start_on_free_ports(work / "data", log_path=work / "braid.log")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("braid-example")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(braid.spark.BraidDataSource)
    braid_opts = {"service.url": process.service_url, "admin.url": process.web_url}
    try:
        with AdminClient(process.web_url) as admin:
            admin.namespaces.create("public/shop")
            admin.namespaces.set_deduplication("public/shop", True)
            admin.scalable_topics.create(ORDERS, segments=2)
            admin.scalable_topics.create(TOTALS, segments=2)
            expected = publish_orders(process.service_url, admin)

        orders = (
            spark.readStream.format("braid")
            .options(**braid_opts, topic=ORDERS, startingPosition="earliest")
            .load()
            .select(
                F.col("key").alias("customer"),
                F.col("value").cast("string").cast("int").alias("amount"),
                "publish_time",
                F.col("message_id").alias("order_id"),
            )
        )
        to_parquet = (
            orders.writeStream.format("parquet")
            .option("path", str(work / "orders.parquet"))
            .option("checkpointLocation", str(work / "cp-parquet"))
            .trigger(availableNow=True)
            .start()
        )
        to_parquet.awaitTermination()

        # Stage 2: Parquet -> per-customer running totals, in publish order -> Braid.
        running = Window.partitionBy("customer").orderBy("publish_time", "order_id")
        totals = (
            spark.read.parquet(str(work / "orders.parquet"))
            .withColumn("total", F.sum("amount").over(running))
            .withColumn("orders", F.count("*").over(running))
            .repartition("customer")
            .sortWithinPartitions("customer", "publish_time", "order_id")
            .select(
                F.col("customer").alias("key"),
                F.to_json(F.struct("customer", "total", "orders")).alias("value"),
            )
        )
        totals.write.format("braid").options(**braid_opts, topic=TOTALS).mode("append").save()

        stored = spark.read.parquet(str(work / "orders.parquet"))
        print(f"orders.parquet: {stored.count()} orders")
        updates = spark.read.format("braid").options(**braid_opts, topic=TOTALS).load().collect()
        last: dict[str, int] = {}
        for row in updates:  # a key's updates are in publish order: the last is the total
            last[row.key] = int(json.loads(row.value)["total"])
        wrong = {c: (last.get(c), t) for c, t in expected.items() if last.get(c) != t}
        print(f"{TOTALS}: {len(updates)} updates for {len(last)} customers")
        if wrong:
            print(f"MISMATCH: {wrong}")
            return 1
        print("every customer's last running total matches the orders published: OK")
        return 0
    finally:
        spark.stop()
        process.stop()


if __name__ == "__main__":
    sys.exit(main())
