"""Definitions of the Spark Declarative Pipeline in ``examples/spark_declarative_pipeline.py``:
a Braid topic as a streaming table, a per-key materialized view, and a sink publishing the view's
rows to another Braid topic. ``spark-pipelines`` runs this file with ``spark`` defined; the
Braid URLs and topic names come from the pipeline file's ``configuration`` (as ``spark.braid.*``:
Spark passes on only settings named ``spark.*``)."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import braid.spark

spark = globals()["spark"]  # provided by spark-pipelines
spark.dataSource.register(braid.spark.BraidDataSource)
_conf = spark.conf
_braid = {
    "service.url": _conf.get("spark.braid.service.url"),
    "admin.url": _conf.get("spark.braid.admin.url"),
}


@dp.table
def orders() -> DataFrame:
    """Every order published to the orders topic (key = customer, value = amount)."""
    return (
        spark.readStream.format("braid")
        .options(**_braid, topic=_conf.get("spark.braid.orders"), startingPosition="earliest")
        .load()
        .select("key", F.col("value").cast("string").cast("long").alias("amount"))
    )


@dp.materialized_view
def customer_totals() -> DataFrame:
    """Per customer: the number of orders and their total amount."""
    return (
        spark.read.table("orders")
        .groupBy("key")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
    )


dp.create_sink(
    "totals_topic", format="braid", options={**_braid, "topic": _conf.get("spark.braid.totals")}
)


@dp.append_flow(target="totals_topic")
def publish_totals() -> DataFrame:
    """The view's rows as messages: key = customer, value = "<orders>:<total>"."""
    return spark.readStream.table("customer_totals").select(
        "key", F.concat_ws(":", "orders", "total").cast("binary").alias("value")
    )
