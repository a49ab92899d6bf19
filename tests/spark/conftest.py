"""The spark tier: real PySpark (local[2]) against a real ``braid standalone`` subprocess.

One SparkSession for the whole tier (a JVM start costs ~10 s on CI's 2 cores); a test that must
stop the session (restart from a checkpoint) uses :meth:`Spark.restart`, and every later test
gets the new one. One standalone per module, with sealed segments kept (retention -1) so a slow
query never loses data to the sealed-segment GC.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.standalone import StandaloneProcess

pyspark = pytest.importorskip("pyspark", reason="the spark extra (make test installs it)")

from pyspark.sql import SparkSession  # noqa: E402

import braid.spark  # noqa: E402

#: How long Spark waits for a Python process it started to connect back (default 15 s): a
#: loaded 2-core machine can take longer to start one, and the query then fails.
PYTHON_CONNECT_TIMEOUT = "120s"


class Spark:
    """Holds the tier's SparkSession; :meth:`restart` replaces it."""

    def __init__(self, warehouse: Path) -> None:
        self._warehouse = warehouse
        self._session: SparkSession | None = None

    @property
    def session(self) -> SparkSession:
        if self._session is None:
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
            session = (
                SparkSession.builder.master("local[2]")
                .appName("braid-spark-tier")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.sql.warehouse.dir", str(self._warehouse))
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
                .config("spark.python.authenticate.socketTimeout", PYTHON_CONNECT_TIMEOUT)
                .getOrCreate()
            )
            session.sparkContext.setLogLevel("ERROR")
            session.dataSource.register(braid.spark.BraidDataSource)
            self._session = session
        return self._session

    def restart(self) -> SparkSession:
        self.stop()
        return self.session

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None


@pytest.fixture(scope="session")
def spark_holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spark]:
    holder = Spark(tmp_path_factory.mktemp("spark-warehouse"))
    try:
        yield holder
    finally:
        holder.stop()


@pytest.fixture
def spark(spark_holder: Spark) -> SparkSession:
    return spark_holder.session


def start_standalone(data_dir: Path, **conf: str) -> StandaloneProcess:
    env = dict(os.environ)
    env.update({f"BRAID_{k}": v for k, v in conf.items()})
    return StandaloneProcess.start_on_free_ports(
        data_dir, log_path=data_dir.with_name(data_dir.name + ".log"), env=env
    )


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    process = start_standalone(
        tmp_path_factory.mktemp("braid") / "data", defaultRetentionTimeInMinutes="-1"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()
