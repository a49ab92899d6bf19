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
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from braid.spark.data_source import BraidDataSource, BraidNotInstalledError
    from braid.spark.errors import BraidDataLossError, DeduplicationDisabledError
    from braid.spark.options import BraidSparkOptionError


def _import_httpx_lean() -> None:
    """Import httpx (the admin client's transport) without what the connector never uses.

    Spark starts a fresh Python process to plan every streaming query, so import time is paid
    per query (docs/benchmarks.md, the Spark section):

    * ``import httpx`` imports ``httpx._main`` (click, rich, pygments: ~60 ms) for the ``httpx``
      console command only. A ``None`` in ``sys.modules`` makes that import fail, which httpx
      handles by defining a stub ``httpx.main`` (it says to install ``httpx[cli]``).
    * in Spark's own Python processes (``pyspark.worker_util`` is loaded: the planning process
      and the executors' workers, which run the connector's synchronous HTTP calls only),
      ``httpcore`` is imported without ``trio``: httpcore imports trio, when it is installed,
      for async code running under trio (0.3-0.9 s), and handles its absence.

    The ``None`` entries are removed afterwards, so later explicit imports work as usual.
    """
    if "httpx" in sys.modules:
        return
    blocked = ["httpx._main"]
    if "pyspark.worker_util" in sys.modules and "httpcore" not in sys.modules:
        blocked.append("trio")
    blocked = [name for name in blocked if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401

        if "trio" in blocked:
            import httpcore  # noqa: F401
    except ImportError:  # httpx missing: the admin client reports it where it is used
        pass
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_httpx_lean()

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
