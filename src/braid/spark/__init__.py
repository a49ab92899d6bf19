"""Braid topics in Apache Spark: a PySpark data source and sink (Spark 4 Python Data Source API).

Needs the ``spark`` extra (``pip install 'braid[spark]'``: ``pyspark`` 4.2+ and ``pyarrow``)::

    import braid.spark
    spark.dataSource.register(braid.spark.BraidDataSource)
    spark.readStream.format("braid").option("service.url", ...).option("topic", ...).load()

Module map: ``data_source`` (the registered class, shipped to workers by value), ``source``
(batch and stream readers), ``sink`` (writers),
``options`` (validation), ``offsets`` (the offset JSON), ``planning`` (micro-batch planning,
pure), ``topology`` (DAG and positions from the driver), ``segment_reader`` (bounded reads of
one segment), ``rows`` (schema, Arrow batches), ``clients`` (per-process client), ``errors``.
Guide: docs/spark.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from braid.spark.data_source import BraidDataSource, BraidNotInstalledError
    from braid.spark.errors import BraidDataLossError, DeduplicationDisabledError
    from braid.spark.options import BraidSparkOptionError


# Loaded on first use (PEP 562): the pure modules (offsets, planning, options) import without
# PySpark; ``BraidDataSource`` needs the ``spark`` extra.
_EXPORTS = {
    "BraidDataLossError": "braid.spark.errors",
    "BraidDataSource": "braid.spark.data_source",
    "BraidNotInstalledError": "braid.spark.data_source",
    "BraidSparkOptionError": "braid.spark.options",
    "DeduplicationDisabledError": "braid.spark.errors",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'braid.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "BraidDataLossError",
    "BraidDataSource",
    "BraidNotInstalledError",
    "BraidSparkOptionError",
    "DeduplicationDisabledError",
]
