"""Spark benchmark: the braid streaming source against the fastest a Python data source can be
here (an in-memory Arrow source, the *ceiling*) and against Spark's own Parquet reader, same run,
same query shape.

It starts ``braid standalone`` as a child process, publishes ``--rows`` messages (``--size``
bytes, 64 keys) to a ``topic://`` topic of ``--segments`` segments with ``send_many``, and then,
in one local[2] SparkSession, times three streaming reads of the same rows, each
``Trigger.AvailableNow`` into the ``noop`` sink:

1. **braid**: ``readStream.format("braid")`` from ``earliest``;
2. **ceiling**: a minimal Python streaming source (defined here) with the same schema, one
   partition per segment, that yields one pre-built 4,096-row Arrow batch over and over: no
   broker, no decoding, no imports beyond pyarrow. No Python data source can read faster; it is
   the target (docs/benchmarks.md);
3. **parquet**: ``readStream.format("parquet")`` of the same rows written once by Spark (the
   source's own columns).

Each round runs the three queries, the first round in that order and each later one starting with
the next kind (no kind always runs after the same one); ``--repeat`` rounds, the best query of each
kind counts (the first pays Python-worker start-up), and the median over rounds of each round's
braid / ceiling ratio and of its start-up difference are printed beside them (steadier when the
machine's speed drifts). Per query it reports the wall time split into **start-up** (everything but
reading: starting Spark's per-query Python planning process, offsets, planning, commits; wall time
minus the ``addBatch`` phases) and the **read** phase (the ``addBatch`` phases: the tasks reading
the rows into the sink), and with ``--verbose`` the CPU seconds of the Spark JVM, its Python
processes and the broker (steadier than wall time on a shared machine). ``--event-times`` gives
every message its own event time (no two metadata alike); ``--installed-pyspark`` runs Spark's
Python processes without ``pyspark.zip`` on their path. Results go to docs/benchmarks.md.

Run: ``.venv/bin/python bench/spark_bench.py [--rows 200000] [--size 100] [--segments 2]
[--repeat 3] [--event-times] [--verbose] [--installed-pyspark] [--probe]
[--receiver-queue-size N]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

import braid.spark
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.client import Client
from braid.spark.rows import SCHEMA

TOPIC = "topic://public/default/spark-bench"
#: Rows per Arrow batch of the ceiling source (the braid source's batch size).
BATCH_ROWS = 4096


def publish(service_url: str, rows: int, size: int, event_times: bool = False) -> None:
    value = b"x" * size
    keys = [f"key-{i % 64}" for i in range(1000)]
    with Client(service_url) as client:
        producer = client.create_producer(TOPIC)
        for n in range(rows // 1000):
            times = [1_700_000_000_000 + n * 1000 + i for i in range(1000)] if event_times else None
            producer.send_many([value] * 1000, keys=keys, event_times=times)
        producer.close()


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_ticks(jvm: int, broker: int | None) -> dict[str, int]:
    """CPU ticks used so far by the Spark JVM itself (``jvm``), by its Python processes
    (``python``: the live ones below it, plus the children it already reaped - Spark's per-query
    planning processes end within the query) and by the broker with its children (``broker``)."""
    parent: dict[int, int] = {}
    ticks: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])
        own = int(fields[11]) + int(fields[12])
        ticks[pid] = (own, int(fields[13]) + int(fields[14]))
    out = {"jvm": 0, "python": 0, "broker": 0}
    for pid, (own, reaped) in ticks.items():
        if pid == jvm:
            out["jvm"] += own
            out["python"] += reaped
            continue
        if pid == broker:
            out["broker"] += own + reaped
            continue
        p = parent.get(pid, 1)
        while p > 1 and p not in (jvm, broker):
            p = parent.get(p, 1)
        if p == jvm:
            out["python"] += own
        elif p == broker:
            out["broker"] += own
    return out


@dataclass(frozen=True)
class Run:
    """One timed streaming query."""

    kind: str
    rows: int
    wall: float  # start() -> termination, seconds
    read: float  # the addBatch phases (tasks reading into the sink), seconds
    cpu: float | None  # CPU seconds of the JVM, its Python processes and the broker
    cpu_parts: dict[str, float] | None = None  # the same by part: jvm, python, broker

    @property
    def startup(self) -> float:
        """Everything but reading: the per-query planning process, offsets, planning, commits."""
        return self.wall - self.read

    @property
    def rate(self) -> float:
        return self.rows / self.wall


def timed_stream(
    kind: str,
    reader: object,
    checkpoint: Path,
    verbose: bool = False,
    cpu_roots: list[int] | None = None,
    probe_log: Path | None = None,
) -> Run:
    """One AvailableNow query into ``noop``: its wall time, read phase and (with ``verbose``)
    CPU seconds; ``verbose`` also prints Spark's phase times per batch."""
    roots = cpu_roots or []
    jvm, broker = roots[0], (roots[1] if len(roots) > 1 else None)
    cpu_before = _cpu_ticks(jvm, broker) if verbose else {}
    window_start = time.time()
    started = time.perf_counter()
    query = (
        reader.writeStream.format("noop")  # type: ignore[attr-defined]
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if probe_log is not None:
        _print_probe(kind, probe_log, window_start, time.time())
    parts = None
    if verbose:
        after = _cpu_ticks(jvm, broker)
        parts = {k: (after[k] - cpu_before[k]) / _TICK for k in after}
    cpu = sum(parts.values()) if parts else None
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    read = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
    run = Run(kind, rows, elapsed, read, cpu, parts)
    if verbose:
        for p in progress:
            source = p["sources"][0]
            print(
                f"  {kind} batch {p['batchId']}: {source['numInputRows']} rows, "
                f"{source['startOffset']} -> {source['endOffset']}"
            )
    if verbose:
        phases = [dict(p["durationMs"]) for p in progress]
        print(
            f"  {kind:<8} {rows} rows in {elapsed:.2f} s (start-up {run.startup:.2f} s, "
            f"read {read:.3f} s), {cpu:.2f} CPU s "
            f"({', '.join(f'{k} {v:.2f}' for k, v in (parts or {}).items())}); "
            f"batches (ms): {phases}"
        )
    return run


class CeilingSource(DataSource):
    """The in-memory ceiling: a minimal Python streaming source with the braid source's schema
    that yields one pre-built Arrow batch per 4,096 rows (options ``rows``, ``partitions``).

    Defined in ``__main__``, so Spark's Python processes receive it by value (cloudpickle) and
    import nothing of Braid's."""

    @classmethod
    def name(cls) -> str:
        return "braid_ceiling"

    def schema(self) -> StructType:
        from pyspark.sql.types import (
            BinaryType,
            LongType,
            MapType,
            StringType,
            StructField,
            TimestampType,
        )

        return StructType(
            [
                StructField("key", StringType(), True),
                StructField("value", BinaryType(), False),
                StructField("topic", StringType(), False),
                StructField("message_id", BinaryType(), False),
                StructField("publish_time", TimestampType(), False),
                StructField("event_time", TimestampType(), True),
                StructField("properties", MapType(StringType(), StringType(), False), False),
                StructField("producer_name", StringType(), False),
                StructField("sequence_id", LongType(), False),
            ]
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CeilingStreamReader(
            schema, int(self.options["rows"]), int(self.options.get("partitions", "2"))
        )


class CeilingStreamReader(DataSourceStreamReader):
    def __init__(self, schema: StructType, rows: int, partitions: int) -> None:
        self.schema = schema
        self.rows = rows
        self.parts = partitions

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def latestOffset(self, start: dict[str, int], limit: object) -> dict[str, int]:
        return {"rows": self.rows}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        total = end["rows"] - start["rows"]
        share = -(-total // self.parts)
        return [
            InputPartition(min(share, total - i * share))
            for i in range(self.parts)
            if total - i * share > 0
        ]

    def read(self, partition: InputPartition) -> Iterator[object]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        count: int = partition.value  # type: ignore[attr-defined]
        size = BATCH_ROWS
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([f"key-{i % 64}" for i in range(size)], pa.string()),
                pa.array([b"x" * 100] * size, pa.binary()),
                pa.array(["topic://public/default/spark-bench"] * size, pa.string()),
                pa.array([bytes(range(16))] * size, pa.binary()),
                pa.array([1_700_000_000_000_000 + i for i in range(size)], pa.int64()).cast(
                    arrow_schema.field("publish_time").type
                ),
                pa.nulls(size, arrow_schema.field("event_time").type),
                pa.array([[]] * size, arrow_schema.field("properties").type),
                pa.array(["standalone-0-1"] * size, pa.string()),
                pa.array(range(size), pa.int64()),
            ],
            schema=arrow_schema,
        )
        while count >= size:
            yield batch
            count -= size
        if count:
            yield batch.slice(0, count)

    def commit(self, end: dict[str, int]) -> None:
        pass


def _print_probe(kind: str, log: Path, since: float, until: float) -> None:
    """What ``--probe`` saw of Spark's Python processes during one query
    (bench/spark_probe/sitecustomize.py): the processes started, and the planner's calls."""
    events = []
    if log.exists():
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if since <= event["t"] <= until:
                events.append(event)
    for e in events:
        if e["ev"] == "start":
            module = e["argv"][1] if e["argv"][:1] == ["-m"] else " ".join(e["argv"])
            print(
                f"  probe {kind}: process {e['pid']} {module}: started "
                f"+{e['started'] - since:.3f} s, interpreter up after {e['t'] - e['started']:.3f} s"
            )
    starts = {e["pid"]: e for e in events if e["ev"] == "start"}
    for e in events:
        if e["ev"] != "call":
            continue
        begun = e["t"] - e["wall"]
        origin = starts.get(e["pid"])
        age = f", process age {begun - origin['started']:.3f} s" if origin else ""
        print(
            f"  probe {kind}: {e['name']:<30} at +{begun - since:.3f} s: "
            f"wall {e['wall'] * 1000:7.1f} ms, cpu {e['cpu'] * 1000:6.1f} ms "
            f"(process cpu {e['process_cpu']:.2f} s, "
            f"{e['modules']} modules{age})"
        )


def _probe_python(work: Path, base: str) -> tuple[str, Path]:
    """A ``python`` wrapper that runs ``base`` with bench/spark_probe first on ``PYTHONPATH``
    (its sitecustomize logs what Spark's Python processes do), and the log it writes."""
    log = work / "probe.jsonl"
    probe_dir = Path(__file__).resolve().parent / "spark_probe"
    wrapper = work / "python-probe"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{probe_dir}:$PYTHONPATH"\n'
        f'BRAID_SPARK_PROBE_LOG="{log}"\n'
        "export PYTHONPATH BRAID_SPARK_PROBE_LOG\n"
        f'exec "{base}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper), log


def _python_without_pyspark_zip(work: Path) -> str:
    """A ``python`` wrapper that drops Spark's ``pyspark.zip`` from ``PYTHONPATH``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process
    it starts; the zip holds no bytecode, so each new process (one per streaming query on the
    driver for a Python data source) compiles the pyspark modules it imports (~0.5 s of CPU).
    """
    wrapper = work / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | grep -v '/pyspark.zip$' "
        "| paste -sd: -)\n"
        "export PYTHONPATH\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def _report(runs: list[Run], args: argparse.Namespace) -> None:
    best = {kind: min((r for r in runs if r.kind == kind), key=lambda r: r.wall) for kind in KINDS}
    print(
        f"\nrows={args.rows} size={args.size}B segments={args.segments} local[2], "
        f"event times={'per message' if args.event_times else 'none'}, "
        f"{'installed pyspark, ' if args.installed_pyspark else ''}"
        f"best of {args.repeat} (by wall time)\n"
    )
    cpu = args.verbose
    print(
        f"{'read (streaming, AvailableNow -> noop)':<40}{'rows/s':>10}{'wall s':>8}"
        f"{'start-up s':>11}{'read s':>8}" + (f"{'CPU s':>7}" if cpu else "")
    )
    for kind, label in KINDS.items():
        r = best[kind]
        print(
            f"{label:<40}{r.rate:>10,.0f}{r.wall:>8.2f}{r.startup:>11.2f}{r.read:>8.3f}"
            + (f"{r.cpu:>7.2f}" if cpu and r.cpu is not None else "")
        )
    b, c, q = best["braid"], best["ceiling"], best["parquet"]
    print(f"\n{'braid / ceiling (wall)':<40}{b.rate / c.rate:>10.1%}")
    paired = _round_ratios(runs)
    if len(paired) > 1:
        # Each round's braid query against the same round's ceiling query: steadier than the
        # best of each kind when the machine's speed drifts (docs/benchmarks.md, "Spark").
        spread = f"{min(paired):.1%} .. {max(paired):.1%}"
        print(
            f"{'braid / ceiling (wall), round median':<40}{statistics.median(paired):>10.1%}"
            f"   ({len(paired)} rounds: {spread})"
        )
    print(f"{'braid - ceiling start-up':<40}{b.startup - c.startup:>+10.2f} s")
    startups = _round_startups(runs)
    if len(startups) > 1:
        print(
            f"{'braid - ceiling start-up, round median':<40}"
            f"{statistics.median(startups):>+10.2f} s"
            f"   ({min(startups):+.2f} .. {max(startups):+.2f})"
        )
    print(f"{'braid / ceiling read phase':<40}{b.read / max(c.read, 1e-9):>10.2f}x")
    print(f"{'ceiling / parquet (wall)':<40}{c.rate / q.rate:>10.1%}")
    print(f"{'braid / parquet (wall)':<40}{b.rate / q.rate:>10.1%}")
    if cpu and b.cpu and c.cpu and q.cpu:
        print(f"{'braid / ceiling (CPU)':<40}{c.cpu / b.cpu:>10.1%}")
        print(f"{'ceiling / parquet (CPU)':<40}{q.cpu / c.cpu:>10.1%}")


def _rounds(runs: list[Run]) -> list[dict[str, Run]]:
    """The runs in the order they ran, grouped by round (one query of each kind per round)."""
    per_round = len(KINDS)
    return [
        {r.kind: r for r in runs[start : start + per_round]}
        for start in range(0, len(runs) - per_round + 1, per_round)
    ]


def _round_ratios(runs: list[Run]) -> list[float]:
    """braid / ceiling by wall time within each round."""
    return [kinds["braid"].rate / kinds["ceiling"].rate for kinds in _rounds(runs)]


def _round_startups(runs: list[Run]) -> list[float]:
    """braid's start-up minus the ceiling's within each round (seconds)."""
    return [kinds["braid"].startup - kinds["ceiling"].startup for kinds in _rounds(runs)]


KINDS = {
    "braid": "braid source",
    "ceiling": "in-memory Arrow source (ceiling)",
    "parquet": "parquet (same rows, same query)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--segments", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--event-times",
        action="store_true",
        help="give every message its own event time (no two message metadata alike)",
    )
    parser.add_argument(
        "--installed-pyspark",
        action="store_true",
        help="start Spark's Python processes without pyspark.zip on PYTHONPATH, so they import "
        "the installed pyspark (same version, with bytecode caches) instead of compiling the "
        "zip's sources in every new process (a deployment setting, not the connector's)",
    )
    parser.add_argument(
        "--receiver-queue-size",
        type=int,
        default=None,
        help="the braid source's receiverQueueSize option (default: the connector's)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="print each run's time, CPU seconds and phase times"
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="log what Spark's Python processes do per query (bench/spark_probe): the processes "
        "started, and every stream-reader call of the planning process with its wall and CPU "
        "time (measurement: adds a little start-up to every process)",
    )
    args = parser.parse_args()
    # SIGTERM (a `kill`, a timeout) ends the run through the `finally` below, which stops the
    # standalone and Spark: by default Python dies on it and the broker child stays up.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = Path(tempfile.mkdtemp(prefix="braid-spark-bench-"))
    process = StandaloneProcess.start_on_free_ports(work / "data", log_path=work / "braid.log")
    python = _python_without_pyspark_zip(work) if args.installed_pyspark else sys.executable
    probe_log = None
    if args.probe:
        python, probe_log = _probe_python(work, python)
    os.environ["PYSPARK_PYTHON"] = python
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(braid.spark.BraidDataSource)
    spark.dataSource.register(CeilingSource)
    try:
        with AdminClient(process.web_url) as admin:
            admin.scalable_topics.create(TOPIC, segments=args.segments)
        t0 = time.perf_counter()
        publish(process.service_url, args.rows, args.size, args.event_times)
        publish_rate = args.rows / (time.perf_counter() - t0)
        jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
        roots = [jvm_pid] + ([process.pid] if process.pid is not None else [])
        opts = {"service.url": process.service_url, "admin.url": process.web_url, "topic": TOPIC}
        if args.receiver_queue_size is not None:
            opts["receiverQueueSize"] = str(args.receiver_queue_size)
        parquet = work / "rows.parquet"
        spark.read.format("braid").options(**opts).load().write.parquet(str(parquet))
        assert spark.read.format("braid_ceiling").option("rows", "0").load().schema == SCHEMA
        sources = {
            "braid": lambda: (
                spark.readStream.format("braid").options(**opts, startingPosition="earliest").load()
            ),
            "ceiling": lambda: (
                spark.readStream.format("braid_ceiling")
                .option("rows", str(args.rows))
                .option("partitions", str(args.segments))
                .load()
            ),
            "parquet": lambda: spark.readStream.schema(SCHEMA).parquet(str(parquet)),
        }
        runs = []
        kinds = list(sources)
        for i in range(args.repeat):
            # Each round starts with another kind (braid, ceiling, parquet, braid, ...): the
            # query after another pays for what that one left behind (JVM garbage, busy cores).
            for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
                load = sources[kind]
                run = timed_stream(
                    kind, load(), work / f"cp-{kind}-{i}", args.verbose, roots, probe_log
                )
                if run.rows != args.rows:
                    raise RuntimeError(f"{kind} read {run.rows} rows, expected {args.rows}")
                runs.append(run)
        _report(runs, args)
        print(f"{'(publish with send_many, for scale)':<40}{publish_rate:>10,.0f} rows/s")
    finally:
        spark.stop()
        process.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
