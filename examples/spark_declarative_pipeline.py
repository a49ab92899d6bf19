"""A Spark Declarative Pipeline over Braid topics, run with one command::

    make spark-pipeline           # or: .venv/bin/python examples/spark_declarative_pipeline.py

It starts ``braid standalone`` on free 127.0.0.1 ports, creates ``topic://public/shop/orders``
(2 segments) and ``.../customer-totals``, publishes 2 000 orders (key = customer, value =
amount), writes a pipeline spec beside ``declarative_pipeline/transformations/braid_totals.py``
(the definitions: the orders topic as a streaming table, a per-customer materialized view, a
sink publishing the view to the totals topic) and runs it with ``spark-pipelines run`` (the
``pyspark`` package's command). Then it reads the totals topic back and checks every customer's
order count and total against what it published.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.checkpoint import Checkpoint

ORDERS = "topic://public/shop/orders"
TOTALS = "topic://public/shop/customer-totals"
DEFINITIONS = Path(__file__).resolve().parent / "declarative_pipeline" / "transformations"


def publish_orders(service_url: str) -> dict[str, tuple[int, int]]:
    rng = random.Random(11)
    expected: dict[str, tuple[int, int]] = {}
    keys, values = [], []
    for _ in range(2000):
        customer = f"customer-{rng.randrange(40)}"
        amount = rng.randrange(1, 100)
        count, total = expected.get(customer, (0, 0))
        expected[customer] = (count + 1, total + amount)
        keys.append(customer)
        values.append(str(amount).encode())
    with braid.Client(service_url) as client:
        producer = client.create_producer(ORDERS)
        producer.send_many(values, keys=keys)
        producer.close()
    return expected


def read_totals(service_url: str) -> dict[str, tuple[int, int]]:
    got: dict[str, tuple[int, int]] = {}
    with (
        braid.Client(service_url) as client,
        client.create_checkpoint_consumer(TOTALS, start=Checkpoint.earliest()) as consumer,
    ):
        while batch := consumer.receive_many(1000, timeout=5.0):
            for message in batch:
                count, total = message.value.decode().split(":")
                got[message.key] = (int(count), int(total))
    return got


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="braid-sdp-example-"))
    process = StandaloneProcess.start_on_free_ports(work / "data", log_path=work / "braid.log")
    try:
        with AdminClient(process.web_url) as admin:
            admin.namespaces.create("public/shop")
            admin.namespaces.set_deduplication("public/shop", True)
            admin.scalable_topics.create(ORDERS, segments=2)
            admin.scalable_topics.create(TOTALS, segments=2)
        expected = publish_orders(process.service_url)
        pipeline = work / "pipeline"
        shutil.copytree(DEFINITIONS, pipeline / "transformations")
        spec = pipeline / "spark-pipeline.yml"
        spec.write_text(
            "name: braid_customer_totals\n"
            f"storage: file://{work / 'storage'}\n"
            "libraries:\n"
            "  - glob:\n"
            "      include: transformations/**\n"
            "configuration:\n"
            f"  spark.braid.service.url: {process.service_url}\n"
            f"  spark.braid.admin.url: {process.web_url}\n"
            f"  spark.braid.orders: {ORDERS}\n"
            f"  spark.braid.totals: {TOTALS}\n"
        )
        # Settings of the Spark that spark-pipelines starts (its local Connect server): on
        # 127.0.0.1 only, and patient with Python processes that start slowly on a busy machine.
        conf_dir = work / "spark-conf"
        conf_dir.mkdir()
        (conf_dir / "spark-defaults.conf").write_text(
            "spark.driver.host 127.0.0.1\n"
            "spark.driver.bindAddress 127.0.0.1\n"
            "spark.ui.enabled false\n"
            "spark.python.authenticate.socketTimeout 120s\n"
        )
        home = Path(pyspark.__file__).parent
        env = dict(
            os.environ,
            SPARK_HOME=str(home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_CONF_DIR=str(conf_dir),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        run = subprocess.run(
            [str(home / "bin" / "spark-pipelines"), "run", "--spec", str(spec)],
            env=env,
            cwd=pipeline,
            stdin=subprocess.DEVNULL,
        )
        if run.returncode != 0:
            print(f"spark-pipelines failed with exit code {run.returncode}", file=sys.stderr)
            return 1
        got = read_totals(process.service_url)
        if got != expected:
            wrong = sorted(k for k in expected if got.get(k) != expected[k])
            print(f"totals differ for {len(wrong)} customers: {wrong[:5]}", file=sys.stderr)
            return 1
        print(f"pipeline ok: {len(got)} customers, {sum(c for c, _ in got.values())} orders")
        return 0
    finally:
        process.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
