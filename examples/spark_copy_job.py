"""A Spark job for a real cluster: copy one Braid topic to another, exactly once, with a streaming
query that resumes from its checkpoint. Submit it with Braid shipped to the executors
(docs/spark.md, "Running on a Spark cluster")::

    pip wheel --no-deps -w dist .          # Braid's wheel, from a checkout
    spark-submit --master spark://HOST:7077 \\
        --py-files dist/braid-0.1.0-*.whl \\
        --conf spark.pyspark.python=/path/to/python-with-braids-dependencies \\
        examples/spark_copy_job.py \\
        --service-url pulsar://BROKER:6650 --admin-url http://BROKER:8080 \\
        --source topic://public/shop/orders --target topic://public/shop/orders-copy \\
        --checkpoint hdfs:///checkpoints/orders-copy

Each run reads what was published since the previous run (``Trigger.AvailableNow``, from the
checkpoint; from the start on the first run) and publishes it to ``--target`` through the braid
sink (exactly once: the target's namespace needs deduplication on). With
``--processing-time 10s`` it runs until stopped instead. It prints one JSON line: the rows and
phase times of each micro-batch, the source's row count (a batch read), and where ``braid`` was
imported from on the driver and on the executors.

The same job runs from a Spark Connect client (``--remote sc://HOST:15002``; Braid installed on
the client and in the Python of the Connect server's workers, docs/spark.md "Spark Connect")::

    python examples/spark_copy_job.py --remote sc://HOST:15002 --service-url ... (as above)
"""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.sql import SparkSession

import braid
import braid.spark


def _module_origin(_: object) -> str:
    import braid as shipped  # on an executor: wherever Spark's Python worker found it

    return shipped.__file__ or ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-records-per-trigger", type=int, default=None)
    parser.add_argument(
        "--processing-time", default=None, help="run continuously with this trigger interval"
    )
    parser.add_argument(
        "--remote",
        default=None,
        help="a Spark Connect server (sc://host:15002) to run on, instead of spark-submit's",
    )
    args = parser.parse_args(argv)

    builder = SparkSession.builder.appName("braid-copy")
    if args.remote is not None:
        builder = builder.remote(args.remote)
    spark = builder.getOrCreate()
    spark.dataSource.register(braid.spark.BraidDataSource)
    source = (
        spark.readStream.format("braid")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topic", args.source)
        .option("startingPosition", "earliest")  # first run only: then the checkpoint rules
    )
    if args.max_records_per_trigger is not None:
        source = source.option("maxRecordsPerTrigger", str(args.max_records_per_trigger))
    writer = (
        source.load()
        .select("key", "value", "properties", "event_time")
        .writeStream.format("braid")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topic", args.target)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.processing_time is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.processing_time)
    query = writer.start()
    query.awaitTermination()
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", file=sys.stderr)
        return 1
    summary = {
        "batches": [
            # Attributes, not keys: over Spark Connect the per-query total is only an attribute.
            {"batchId": p.batchId, "rows": p.numInputRows, "durationMs": p.durationMs}
            for p in query.recentProgress
        ],
        "driver_braid": braid.__file__,
        # A batch read of the whole source, for scale.
        "source_rows": spark.read.format("braid")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topic", args.source)
        .load()
        .count(),
    }
    if args.remote is None:  # a Spark Connect client has no SparkContext
        executors = spark.sparkContext.parallelize(range(4), 4).map(_module_origin).distinct()
        summary["executor_braid"] = sorted(executors.collect())
    print(json.dumps(summary))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
