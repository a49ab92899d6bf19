"""The connector on a real Spark standalone cluster (a master and 2 workers started from the
``pyspark`` package's ``spark-class``), with Braid shipped the way docs/spark.md tells users to:
Braid's wheel (named ``.zip``) through ``--py-files``, the interpreter of the driver and the
executors having Braid's dependencies but not Braid. ``examples/spark_copy_job.py`` copies a
topic to another with the streaming source and sink, exactly once; a second submission resumes
from the checkpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from braid.admin.client import AdminClient
from tests.spark.conftest import PYTHON_CONNECT_TIMEOUT
from tests.spark.helpers import Publisher, python_without_braid, read_topic, values_in_order
from tests.spark.processes import SPARK_HOME, StandaloneCluster, spark_env
from tests.support.standalone import StandaloneProcess

pytestmark = pytest.mark.timeout(1200)  # two Spark jobs; a loaded 2-core machine is slow

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "spark_copy_job.py"
SOURCE = "topic://public/cluster/orders"
TARGET = "topic://public/cluster/orders-copy"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    spark = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, memory="1g")
    spark.start()
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def braid_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Braid's wheel built from this checkout (``pip wheel --no-deps``) and named ``.zip``, as
    docs/spark.md says: Spark puts only ``.zip``, ``.egg`` and ``.jar`` py-files on its Python
    workers' path (a ``.whl`` reaches the driver's script, not the workers)."""
    out = tmp_path_factory.mktemp("wheel")
    build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)]
    subprocess.run(
        [sys.executable, "-m", "pip", *build],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("braid-*.whl")
    return wheel.rename(out / "braid.zip")


def submit(
    cluster: StandaloneCluster, wheel: Path, python: Path, process: StandaloneProcess, cp: Path
) -> dict[str, Any]:
    """``spark-submit`` the copy job to the cluster; its JSON summary."""
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        cluster.url,
        "--py-files",
        str(wheel),
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={python}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.log.level=WARN",
        "--conf",
        f"spark.python.authenticate.socketTimeout={PYTHON_CONNECT_TIMEOUT}",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        str(JOB),
        "--service-url",
        process.service_url,
        "--admin-url",
        process.web_url,
        "--source",
        SOURCE,
        "--target",
        TARGET,
        "--checkpoint",
        str(cp),
        "--max-records-per-trigger",
        "700",
    ]
    done = subprocess.run(
        command,
        env=spark_env(cluster.directory),
        capture_output=True,
        text=True,
        timeout=540,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def test_streaming_copy_on_a_standalone_cluster_resumes_from_its_checkpoint_exactly_once(
    cluster: StandaloneCluster, braid_wheel: Path, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    python = python_without_braid(tmp_path)
    with AdminClient(standalone.web_url) as admin:
        admin.namespaces.create("public/cluster")
        admin.namespaces.set_deduplication("public/cluster", True)
        admin.scalable_topics.create(SOURCE, segments=2)
        admin.scalable_topics.create(TARGET, segments=2)
    publisher = Publisher(standalone, SOURCE)
    publisher.publish(1500)
    cp = tmp_path / "checkpoint"

    first = submit(cluster, braid_wheel, python, standalone, cp)
    assert sum(b["rows"] for b in first["batches"]) == 1500
    assert len([b for b in first["batches"] if b["rows"]]) >= 3  # maxRecordsPerTrigger=700
    # Braid came from the shipped wheel on the driver and on both workers' executors.
    assert braid_wheel.name in first["driver_braid"]
    assert first["executor_braid"] and all(braid_wheel.name in p for p in first["executor_braid"])

    publisher.publish(900)
    publisher.close()
    second = submit(cluster, braid_wheel, python, standalone, cp)
    assert sum(b["rows"] for b in second["batches"]) == 900  # only what came after

    copied = read_topic(standalone, TARGET, 2400)
    assert len(copied) == 2400
    assert {m.value for m in copied} == publisher.expected()
    for key, counters in values_in_order(copied).items():  # each key's copies in order
        assert counters == sorted(counters), key
