"""Probe for ``bench/spark_bench.py --probe``: what Spark's Python processes do per query.

``--probe`` runs Spark's Python processes through a wrapper that puts this directory first on
``PYTHONPATH``, so Python imports this module at start-up (``sitecustomize``). It appends JSON
lines to ``$BRAID_SPARK_PROBE_LOG``: one ``start`` per process (its command line, when it was
started, how long the interpreter took to get here) and, for the streaming planner process
(``python_streaming_source_runner``), one ``call`` per data source method Spark calls on the
stream reader (wall and CPU seconds of the call, the process's CPU seconds so far). Nothing is
traced per call of anything else, so the read path runs at full speed.

Measurement only: not part of Braid, never imported by it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any

_LOG = os.environ.get("BRAID_SPARK_PROBE_LOG")
_METHODS = (
    "initialOffset",
    "latestOffset",
    "partitions",
    "commit",
    "prepareForTriggerAvailableNow",
    "getDefaultReadLimit",
    "reportLatestOffset",
    "stop",
)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _write(**fields: Any) -> None:
    if _LOG is None:
        return
    fields.setdefault("pid", os.getpid())
    fields.setdefault("t", time.time())
    with open(_LOG, "a") as f:
        f.write(json.dumps(fields) + "\n")


def _started_at() -> float:
    """Wall-clock time this process was started (from /proc, 10 ms resolution)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def _timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        w0, c0 = time.time(), _cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            _write(
                ev="call",
                name=name,
                wall=time.time() - w0,
                cpu=_cpu() - c0,
                process_cpu=_cpu(),
                modules=len(sys.modules),
            )

    return call


def _install_planner_probe() -> None:
    import pyspark.sql.datasource_internal as internal
    import pyspark.worker_util as worker_util

    # The runner's steps before the first data source call (imported by name when the runner
    # module loads, after this): receiving and unpickling the data source, the job's files.
    for name in ("check_python_version", "setup_spark_files", "read_command"):
        setattr(worker_util, name, _timed(name, getattr(worker_util, name)))

    original = internal._streamReader

    def stream_reader(datasource: Any, schema: Any) -> Any:
        w0, c0 = time.time(), _cpu()
        reader = original(datasource, schema)
        _write(
            ev="call",
            name="streamReader",
            source=type(datasource).__name__,
            wall=time.time() - w0,
            cpu=_cpu() - c0,
            process_cpu=_cpu(),
            modules=len(sys.modules),
        )
        for name in _METHODS:
            method = getattr(reader, name, None)
            if method is not None:
                setattr(reader, name, _timed(name, method))
        return reader

    internal._streamReader = stream_reader


if _LOG is not None:
    _write(
        ev="start",
        argv=sys.orig_argv[1:],
        started=_started_at(),
        process_cpu=_cpu(),
    )
    if "pyspark.sql.streaming.python_streaming_source_runner" in sys.orig_argv:
        _install_planner_probe()
