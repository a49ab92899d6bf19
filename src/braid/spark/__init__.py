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


def _import_httpx_without_its_cli() -> None:
    """Import httpx (the admin client's transport) without its command-line module.

    Spark starts a fresh Python process to plan every streaming query, and ``import httpx``
    imports ``httpx._main`` (click, rich, pygments: ~60 ms of that start-up) for the ``httpx``
    console command only. A ``None`` in ``sys.modules`` makes that import fail, which httpx
    handles by defining a stub ``httpx.main`` (it says to install ``httpx[cli]``); the entry is
    removed afterwards, so an explicit ``import httpx._main`` still works. Nothing else changes:
    the ``httpx`` command runs in its own process.
    """
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401
    except ImportError:  # httpx missing: the admin client reports it where it is used
        pass
    finally:
        if sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]


_import_httpx_without_its_cli()

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
