"""A Spark whose Python workers cannot import Braid: ``load()`` fails with Braid's own error,
naming the cause and the fix, instead of a ``ModuleNotFoundError`` traceback from a worker."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import braid.spark
from tests.spark.helpers import python_without_braid

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def workers_without_braid(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """The session, with the ``braid`` format registered to run in workers started from an
    interpreter without Braid (what ``PYSPARK_PYTHON`` unset gives on a machine where Braid is
    in a venv); the tier's registration is restored afterwards."""
    context = spark.sparkContext
    context.pythonExec = str(python_without_braid(tmp_path))
    try:
        spark.dataSource.register(braid.spark.BraidDataSource)
        yield spark
    finally:
        context.pythonExec = sys.executable
        spark.dataSource.register(braid.spark.BraidDataSource)


def test_load_names_the_missing_braid_and_the_fix_when_workers_cannot_import_it(
    workers_without_braid: SparkSession,
) -> None:
    reader = (
        workers_without_braid.readStream.format("braid")
        .option("service.url", "pulsar://127.0.0.1:6650")
        .option("topic", "topic://public/default/anything")
    )
    with pytest.raises(AnalysisException) as failure:
        reader.load()
    message = str(failure.value)
    assert "BraidNotInstalledError" in message
    assert "Braid is not installed in it" in message
    assert "No module named 'braid'" in message
    assert "PYSPARK_PYTHON" in message and "spark.archives" in message
    assert "docs/spark.md" in message
    # The batch reader and the sink are asked for their schema the same way.
    with pytest.raises(AnalysisException, match="BraidNotInstalledError"):
        workers_without_braid.read.format("braid").option(
            "service.url", "pulsar://127.0.0.1:6650"
        ).option("topic", "topic://public/default/anything").load()


def test_a_worker_with_braid_loads_the_source_as_before(spark: SparkSession) -> None:
    df = (
        spark.readStream.format("braid")
        .option("service.url", "pulsar://127.0.0.1:6650")
        .option("topic", "topic://public/default/anything")
        .load()
    )
    assert df.isStreaming and "message_id" in df.columns
