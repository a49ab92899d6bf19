"""The ``braid`` data source class that users register: Spark ships it to its Python workers *by
value*, so a worker that cannot import Braid gets Braid's own error, not a worker traceback.

``spark.dataSource.register(braid.spark.BraidDataSource)`` pickles the class. A class pickled by
reference makes the worker ``import braid...`` before any Braid code runs, and a worker whose
interpreter lacks Braid (``PYSPARK_PYTHON`` not set to the environment Braid is installed in, a
cluster whose executors were not given Braid) fails with ``ModuleNotFoundError: No module named
'braid'`` wrapped in ``PYTHON_DATA_SOURCE_ERROR``. This module is registered with PySpark's
cloudpickle as *pickled by value* (:func:`pyspark.cloudpickle.register_pickle_by_value`), so
the class travels as code and loads in any worker; its methods import the implementation
(:mod:`braid.spark.source`, :mod:`braid.spark.sink`) when Spark calls them, and an import
failure there raises :class:`BraidNotInstalledError` naming the worker's interpreter, the
missing module and the fix. ``load()`` asks the worker for the schema, so the error shows at
``load()``.

Invariants: nothing here refers to another Braid module at import or pickling time (only
PySpark and the standard library), so unpickling the class never needs Braid; the methods only
delegate, so the behaviour is the implementation's.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from pyspark import cloudpickle
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: Where the guide explains how to give Spark's Python workers Braid (named in the error).
SETUP_GUIDE = "docs/spark.md, 'Giving Spark's Python workers Braid'"


class BraidNotInstalledError(ImportError):
    """A Spark Python worker cannot import Braid or one of its dependencies.

    Raised inside the worker (at ``load()`` for the driver-side planning worker); Spark reports
    it with its message: the interpreter, the missing module, and how to fix the setup.
    """


def _find_job_py_files() -> bool:
    """Put the job's py-files on the path where Spark pointed this process at a directory that
    does not exist; whether any was added.

    Spark 4's per-query planning process of a streaming Python data source
    (``python_streaming_source_runner``) puts the job's ``--py-files`` on its path under a job
    artifact directory, ``<SparkFiles root>/streaming_job/<file>``, that only Spark Connect
    sessions create; for a ``spark-submit`` job the files are in the root,
    ``<SparkFiles root>/<file>``. Only files Spark itself named are added.
    """
    added = False
    for entry in list(sys.path):
        path = Path(entry)
        if path.suffix.lower() not in (".zip", ".egg") or path.exists():
            continue
        shipped = path.parent.parent / path.name
        if shipped.is_file() and str(shipped) not in sys.path:
            sys.path.insert(sys.path.index(entry) + 1, str(shipped))
            added = True
    if added:
        importlib.invalidate_caches()
    return added


def _implementation(module: str) -> ModuleType:
    """``module`` of Braid, imported; a failed import becomes :class:`BraidNotInstalledError`."""
    try:
        return importlib.import_module(module)
    except ImportError as first:
        if not _find_job_py_files():
            _not_installed(first)
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            _not_installed(exc)


def _not_installed(exc: ImportError) -> NoReturn:
    missing = exc.name or str(exc)
    what = (
        "Braid is not installed in it"
        if missing.split(".")[0] == "braid"
        else f"Braid's dependency {missing!r} is not installed in it"
    )
    raise BraidNotInstalledError(
        f"the braid data source cannot run in this Spark Python worker: {what} "
        f"({type(exc).__name__}: {exc}; worker interpreter: {sys.executable}). Fix: run "
        "Spark's Python workers with the interpreter of the environment Braid is installed "
        "in (set PYSPARK_PYTHON, or spark.pyspark.python, to it - e.g. the venv's "
        "bin/python), or ship Braid to the workers: a packed virtual environment through "
        "spark.archives, or Braid's wheel, named .zip, through spark.submit.pyFiles / "
        f"--py-files when the workers already have its dependencies. See {SETUP_GUIDE}."
    ) from exc


class BraidDataSource(DataSource):
    """The ``braid`` format: read and write Braid topics (``topic://`` and ``persistent://``).

    Options and behaviour: docs/spark.md (readers in :mod:`braid.spark.source`, writers in
    :mod:`braid.spark.sink`)."""

    @classmethod
    def name(cls) -> str:
        return "braid"

    def schema(self) -> StructType:
        # Called by load(): the options are checked now, so a mistake fails there.
        schema: StructType = _implementation("braid.spark.source").source_schema(self.options)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        reader: DataSourceReader = _implementation("braid.spark.source").batch_reader(
            self.options, schema
        )
        return reader

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        reader: DataSourceStreamReader = _implementation("braid.spark.source").stream_reader(
            self.options, schema
        )
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        writer: DataSourceWriter = _implementation("braid.spark.sink").batch_writer(
            self.options, schema
        )
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        writer: DataSourceStreamWriter = _implementation("braid.spark.sink").stream_writer(
            self.options, schema
        )
        return writer


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

__all__ = ["SETUP_GUIDE", "BraidDataSource", "BraidNotInstalledError"]
