"""Broker benchmark: the broker's own publish rate and ack latency, not a Python client's.

It starts ``braid standalone`` as a child process and drives it with a *raw-protocol load
generator*: several worker processes, each with one connection and one producer, that write
pre-encoded SEND frames (built before the clock starts) and only count the SEND_RECEIPT frames
that come back (their type byte is checked, nothing is decoded), so a worker costs a few
microseconds per entry and the figure is the broker's. Rows:

* **limit**: the disk's fdatasync limit measured in the same run - one journal-framed ``write`` +
  ``fdatasync`` per entry (``bench/storage_bench.py``'s ``raw_slice``) for the small entry, and
  MB/s of 1.6 MB writes each followed by ``fdatasync`` for the batched entry;
* **1 msg/entry**: 100 B messages with batching off, at 100, 1,000 and 10,000 entries in flight
  in total (spread over ``--procs`` workers, one topic each): entries/s, ack latency p50/p99 (SEND
  written -> receipt read), broker CPU per entry (``/proc/<pid>/stat``, all threads) and the
  share of it spent in the garbage collector (``gc.callbacks``, ``GET
  /admin/v2/broker-stats/runtime``);
* **paced**: one producer, one 100 B message per entry at ``--paced-rate`` msg/s (open loop):
  the latency of an unsaturated broker;
* **1000 x 100 B/entry**: pre-built batches (as a batching client sends them), 32 in flight per
  worker: entries/s and MB/s of message payload;
* **redis**: when ``redis-server`` is installed, the same shapes against Redis Streams (``XADD``,
  pipelined, pre-encoded) with ``appendonly yes`` and ``appendfsync always`` on the same disk;
* **client**: the official ``pulsar-client`` with batching off, N = 1, 2, 4 producer processes
  (``send_async``, at most 1000 pending each): total msg/s.

``--segment`` runs the broker rows against ``segment://`` topics (each the one segment of a new
scalable topic) with a key on every message, so the segment topics' key-hash sampling
(``scalableTopicKeyHashSampleInterval``) is on the measured path; compare with
``--broker-env scalableTopicKeyHashSampleInterval=0`` for its cost.

``--repeat`` runs the whole set several times and prints, per row, the best run and the spread
(the machine is shared: figures move with its load, which is printed before and after).

Install Redis for the comparison (a Debian package; never needed by ``make test``):
``apt-get install -y redis-server``.

Run: ``.venv/bin/python bench/broker_bench.py [--seconds 4] [--repeat 3] [--procs 2]``
(``--broker-env pythonGcThresholds=700,10,10`` passes ``BRAID_<key>`` settings to the broker).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from braid.cli.process import StandaloneProcess, free_port
from braid.protocol import commands
from braid.protocol.batch import build_entry
from braid.protocol.connection import ClientConnection
from braid.protocol.events import CommandReceived, ServerConnected
from braid.protocol.frames import encode_message_body, encode_payload_command
from braid.protocol.generated import PulsarApi_pb2 as pb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_bench import Tally, raw_slice

MESSAGE = 100  # bytes per message
BATCH = 1000  # messages per batched entry
_U32 = struct.Struct(">I")
_RECEIPT = pb.BaseCommand.SEND_RECEIPT
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- what a worker is asked to do and what it reports -------------------------------------------


@dataclass(frozen=True)
class Job:
    kind: str  # "pulsar", "redis" or "client"
    host: str
    port: int
    topic: str
    window: int  # entries in flight (max) for this worker
    batched: bool
    keyed: bool = False  # every message carries a partition key (segment topics)
    paced_rate: float = 0.0  # > 0: open loop at this rate, window ignored
    warmup: float = 0.5
    seconds: float = 4.0


@dataclass
class Report:
    entries: int = 0
    messages: int = 0
    payload_bytes: int = 0
    latencies: list[float] = field(default_factory=list)
    error: str = ""


# -- pre-encoded load ---------------------------------------------------------------------------


def _payload(size: int) -> bytes:
    return bytes((i * 31 + 7) & 0xFF for i in range(size))


def _pulsar_frames(producer_name: str, count: int, batched: bool, keyed: bool) -> list[bytes]:
    """``count`` SEND frames with sequence ids 0..count-1 (reused round-robin: no dedup)."""
    payload = _payload(MESSAGE)
    frames = []
    now_ms = int(time.time() * 1000)
    single = pb.SingleMessageMetadata(payload_size=MESSAGE)
    singles = [
        pb.SingleMessageMetadata(payload_size=MESSAGE, partition_key=f"key-{i}")
        if keyed
        else single
        for i in range(BATCH)
    ]
    for seq in range(count):
        meta = pb.MessageMetadata(
            producer_name=producer_name, sequence_id=seq * BATCH, publish_time=now_ms
        )
        if keyed:
            meta.partition_key = f"key-{seq % 997}"
        if batched:
            body = build_entry(meta, [(one, payload) for one in singles])
            cmd = commands.send(1, seq * BATCH, num_messages=BATCH)
        else:
            body = encode_message_body(meta, payload)
            cmd = commands.send(1, seq * BATCH, num_messages=1)
        frames.append(encode_payload_command(cmd, body))
    return frames


def _redis_frames(stream: str, count: int, batched: bool) -> list[bytes]:
    value = _payload(MESSAGE * BATCH if batched else MESSAGE)
    parts = [b"XADD", stream.encode(), b"MAXLEN", b"~", b"10000", b"*", b"m", value]
    frame = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
    return [frame] * count


class Ring:
    """Frames laid out back to back (a few MB at most) so a burst is one zero-copy slice."""

    def __init__(self, frames: Sequence[bytes]) -> None:
        self.blob = memoryview(b"".join(frames))
        self.offsets = [0]
        for f in frames:
            self.offsets.append(self.offsets[-1] + len(f))
        self.count = len(frames)
        self.next = 0

    def take(self, n: int) -> list[memoryview]:
        """The next ``n`` frames as at most two contiguous slices."""
        out = []
        while n > 0:
            end = min(self.count, self.next + n)
            out.append(self.blob[self.offsets[self.next] : self.offsets[end]])
            n -= end - self.next
            self.next = 0 if end == self.count else end
        return out


# -- workers ------------------------------------------------------------------------------------


def _pulsar_handshake(sock: socket.socket, topic: str, name: str) -> None:
    proto = ClientConnection("braid-broker-bench", created_at=0.0)
    sock.sendall(proto.data_to_send())
    connected = False
    sent_producer = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("broker closed the connection during the handshake")
        for event in proto.receive_data(data, 0.0):
            if isinstance(event, ServerConnected):
                connected = True
            elif isinstance(event, CommandReceived):
                cmd = event.command
                if (
                    cmd.type == pb.BaseCommand.PRODUCER_SUCCESS
                    and cmd.producer_success.producer_ready
                ):
                    return
                if cmd.type == pb.BaseCommand.ERROR:
                    raise RuntimeError(f"PRODUCER refused: {cmd.error.message}")
        if connected and not sent_producer:
            proto.send(commands.producer(topic, 1, 1, producer_name=name))
            sock.sendall(proto.data_to_send())
            sent_producer = True
    raise TimeoutError("no PRODUCER_SUCCESS within 30 s")


class _PulsarReceipts:
    """Counts complete SEND_RECEIPT frames in a byte stream (anything else is an error)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        pos = 0
        n = 0
        end = len(buf)
        while end - pos >= 4:
            total = _U32.unpack_from(buf, pos)[0]
            if end - pos - 4 < total:
                break
            # [total][cmdSize][BaseCommand: field 1 (type) = 0x08, then the type's varint]
            if buf[pos + 8] != 0x08 or buf[pos + 9] != _RECEIPT:
                raise RuntimeError(f"unexpected reply {bytes(buf[pos : pos + 4 + total])!r}")
            n += 1
            pos += 4 + total
        del buf[:pos]
        return n


class _RedisReplies:
    """Counts complete ``XADD`` replies (bulk strings: two CRLFs each)."""

    def __init__(self) -> None:
        self.crlf = 0
        self.last = b""

    def feed(self, data: bytes) -> int:
        if data.startswith(b"-") or b"\r\n-" in data:
            raise RuntimeError(f"redis error: {data[:200]!r}")
        joined = self.last[-1:] + data
        before = self.crlf // 2
        self.crlf += joined.count(b"\r\n")
        self.last = data
        return self.crlf // 2 - before


def _drive(
    sock: socket.socket, ring: Ring, counter: Any, job: Job, report: Report, go: float
) -> None:
    """Send frames (closed loop with ``job.window`` in flight, or paced) and count replies."""
    sock.setblocking(False)
    sent_at: deque[float] = deque()
    pending: list[memoryview] = []
    start = go + job.warmup
    stop = start + job.seconds
    interval = 1.0 / job.paced_rate if job.paced_rate > 0 else 0.0
    next_send = go
    perf = time.perf_counter
    lat = report.latencies
    per_entry_msgs = BATCH if job.batched else 1
    while True:
        now = perf()
        if now >= stop:
            break
        if not pending:
            if interval:
                if now >= next_send and len(sent_at) < 1000:
                    pending = ring.take(1)
                    sent_at.append(now)
                    next_send += interval
            elif len(sent_at) < job.window:
                n = job.window - len(sent_at)
                pending = ring.take(n)
                sent_at.extend([now] * n)
        while pending:
            try:
                written = sock.send(pending[0])
            except BlockingIOError:
                break
            if written == len(pending[0]):
                pending.pop(0)
            else:
                pending[0] = pending[0][written:]
                break
        timeout = max(0.0, next_send - perf()) if interval else 0.05
        readable, _, _ = select.select([sock], [sock] if pending else [], [], timeout)
        if not readable:
            continue
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        got = counter.feed(data)
        if got:
            now = perf()
            # Counted by when the receipt arrives (within the window), whenever it was sent.
            for _ in range(got):
                t0 = sent_at.popleft()
                if now >= start:
                    report.entries += 1
                    lat.append(now - t0)
    report.messages = report.entries * per_entry_msgs
    report.payload_bytes = report.messages * MESSAGE


def _raw_worker(job: Job, index: int, ready: Connection, go_at: Any, out: Connection) -> None:
    report = Report()
    try:
        sock = socket.create_connection((job.host, job.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ring_size = max(64, min(8192, 2 * job.window)) if not job.batched else 64
        if job.kind == "pulsar":
            name = f"bench-{os.getpid()}-{index}"
            _pulsar_handshake(sock, job.topic, name)
            ring = Ring(_pulsar_frames(name, ring_size, job.batched, job.keyed))
            counter: Any = _PulsarReceipts()
        else:
            ring = Ring(_redis_frames(job.topic, ring_size, job.batched))
            counter = _RedisReplies()
        ready.send("ready")
        go = go_at.recv()
        _drive(sock, ring, counter, job, report, go)
        sock.close()
    except Exception as exc:  # reported to the parent, which prints it
        report.error = f"{type(exc).__name__}: {exc}"
        ready.send("failed")
    out.send(report)


def _client_worker(job: Job, index: int, ready: Connection, go_at: Any, out: Connection) -> None:
    import pulsar

    report = Report()
    try:
        client = pulsar.Client(f"pulsar://{job.host}:{job.port}", io_threads=1)
        producer = client.create_producer(
            job.topic,
            batching_enabled=False,
            max_pending_messages=job.window,
            block_if_queue_full=True,
        )
        payload = _payload(MESSAGE)
        ready.send("ready")
        go = go_at.recv()
        start = go + job.warmup
        stop = start + job.seconds
        perf = time.perf_counter
        lat = report.latencies

        def make_callback(t0: float) -> Callable[[Any, Any], None]:
            def done(res: Any, _msg_id: Any) -> None:
                now = perf()
                if start <= now < stop and res == pulsar.Result.Ok:
                    report.entries += 1
                    lat.append(now - t0)

            return done

        while perf() < go:
            pass
        while perf() < stop:
            producer.send_async(payload, make_callback(perf()))
        producer.flush()
        client.close()
        report.messages = report.entries
        report.payload_bytes = report.entries * MESSAGE
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        ready.send("failed")
    out.send(report)


# -- the parent: rows, measurements, table ------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime, all threads


def _gc_stats(web_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{web_url}/admin/v2/broker-stats/runtime", timeout=10) as r:
        return dict(json.loads(r.read())["gc"])


@dataclass
class Row:
    name: str
    entries_s: float = 0.0
    mb_s: float = 0.0
    msgs_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    cpu_us: float = 0.0  # server CPU per entry
    gc_share: float | None = None
    note: str = ""
    vs: str = ""  # ratio against the limit (or peer) of the same run


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


Pipes = list[tuple[Connection, Connection, Connection]]


def start_workers(
    name: str, target: Callable[..., None], jobs: list[Job]
) -> tuple[list[multiprocessing.process.BaseProcess], Pipes, float]:
    """Fork one ``target`` worker per job, wait until all are ready and tell them when to go;
    returns the processes, their (ready, go, report) pipes and the go time (perf_counter).

    Raises:
        RuntimeError: a worker could not start (its error is in the message).
    """
    ctx = multiprocessing.get_context("fork")
    procs: list[multiprocessing.process.BaseProcess] = []
    pipes: Pipes = []
    for i, job in enumerate(jobs):
        ready_r, ready_w = ctx.Pipe(duplex=False)
        go_r, go_w = ctx.Pipe(duplex=False)
        out_r, out_w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=target, args=(job, i, ready_w, go_r, out_w), daemon=True)
        p.start()
        procs.append(p)
        pipes.append((ready_r, go_w, out_r))
    errors = [r.recv() for r, _, _ in pipes]
    go = time.perf_counter() + 0.2
    for _, go_w, _ in pipes:
        go_w.send(go)
    if "failed" in errors:
        reports = [o.recv() for _, _, o in pipes]
        raise RuntimeError(f"{name}: " + "; ".join(r.error for r in reports if r.error))
    return procs, pipes, go


def run_load(
    name: str,
    jobs: list[Job],
    server_pid: int,
    web_url: str | None,
) -> Row:
    """Start one worker process per job, run them together, and measure the server."""
    target = _client_worker if jobs[0].kind == "client" else _raw_worker
    procs, pipes, go = start_workers(name, target, jobs)
    warm = jobs[0].warmup
    seconds = jobs[0].seconds
    time.sleep(max(0.0, go + warm - time.perf_counter()))
    cpu0 = _cpu_seconds(server_pid)
    gc0 = _gc_stats(web_url) if web_url else None
    time.sleep(max(0.0, go + warm + seconds - time.perf_counter()))
    cpu1 = _cpu_seconds(server_pid)
    gc1 = _gc_stats(web_url) if web_url else None
    reports: list[Report] = [o.recv() for _, _, o in pipes]
    for p in procs:
        p.join(30)
    failed = [r.error for r in reports if r.error]
    if failed:
        raise RuntimeError(f"{name}: " + "; ".join(failed))
    entries = sum(r.entries for r in reports)
    lats = [x for r in reports for x in r.latencies]
    row = Row(
        name,
        entries_s=entries / seconds,
        mb_s=sum(r.payload_bytes for r in reports) / seconds / 1e6,
        msgs_s=sum(r.messages for r in reports) / seconds,
        p50_ms=_percentile(lats, 0.50),
        p99_ms=_percentile(lats, 0.99),
        cpu_us=(cpu1 - cpu0) / entries * 1e6 if entries else 0.0,
    )
    if gc0 is not None and gc1 is not None:
        gc_s = gc1["totalSeconds"] - gc0["totalSeconds"]
        cpu_s = gc1["processCpuSeconds"] - gc0["processCpuSeconds"]
        row.gc_share = gc_s / cpu_s if cpu_s > 0 else 0.0
    return row


def limit_rows(data_dir: Path, seconds: float) -> list[Row]:
    """The disk's fdatasync limits, on the broker's disk, in the same run."""
    rows = []
    small = Tally()
    raw_slice(data_dir / "raw-small.jnl", MESSAGE + 60, 1, seconds, small)
    rows.append(
        Row(
            "limit: 1 fdatasync per 160 B entry",
            entries_s=small.entries_per_s(),
            p50_ms=small.percentile_ms(0.5),
            p99_ms=small.percentile_ms(0.99),
            note="raw write+fdatasync loop",
        )
    )
    big = Tally()
    entry = BATCH * (MESSAGE + 8) + 60
    raw_slice(data_dir / "raw-big.jnl", entry, 16, seconds, big)
    rows.append(
        Row(
            "limit: 16 x 108 kB per write+fdatasync",
            entries_s=big.entries_per_s(),
            mb_s=big.entries_per_s() * BATCH * MESSAGE / 1e6,
            p50_ms=big.percentile_ms(0.5),
            p99_ms=big.percentile_ms(0.99),
            note="MB/s of message payload",
        )
    )
    for path in data_dir.glob("raw-*.jnl"):
        path.unlink()
    return rows


def _jobs(kind: str, host: str, port: int, prefix: str, procs: int, **kw: Any) -> list[Job]:
    return [Job(kind, host, port, f"{prefix}-{i}", **kw) for i in range(procs)]


def broker_rows(args: argparse.Namespace, data_dir: Path, run_id: int) -> list[Row]:
    env = dict(os.environ)
    for setting in args.broker_env:
        key, _, value = setting.partition("=")
        env[f"BRAID_{key}"] = value
    broker = StandaloneProcess.start_on_free_ports(data_dir / f"braid-{run_id}", env=env)
    rows: list[Row] = []
    try:
        pid = broker.pid
        assert pid is not None
        host, port, web = broker.host, broker.port, broker.web_url
        topic = f"persistent://public/default/bench-{run_id}"
        s, p = args.seconds, args.procs
        plan: list[tuple[str, list[Job]]] = []
        for inflight in (100, 1000, 10000):
            plan.append(
                (
                    f"braid 1 msg/entry, {inflight} in flight",
                    _jobs(
                        "pulsar",
                        host,
                        port,
                        f"{topic}-s{inflight}",
                        p,
                        window=inflight // p,
                        batched=False,
                        seconds=s,
                    ),
                )
            )
        plan.append(
            (
                f"braid paced {args.paced_rate:.0f} msg/s, 1 msg/entry",
                _jobs(
                    "pulsar",
                    host,
                    port,
                    f"{topic}-paced",
                    1,
                    window=1,
                    batched=False,
                    paced_rate=args.paced_rate,
                    seconds=s,
                ),
            )
        )
        plan.append(
            (
                f"braid {BATCH} x {MESSAGE} B/entry, {32 * p} in flight",
                _jobs(
                    "pulsar", host, port, f"{topic}-batch", p, window=32, batched=True, seconds=s
                ),
            )
        )
        if not args.no_client and not args.segment:
            for n in (1, 2, 4):
                plan.append(
                    (
                        f"pulsar-client batching off, N={n}",
                        _jobs(
                            "client",
                            host,
                            port,
                            f"{topic}-client{n}",
                            n,
                            window=1000,
                            batched=False,
                            seconds=s,
                        ),
                    )
                )
        for name, jobs in plan:
            if args.only is None or args.only in name:
                if args.segment:
                    name, jobs = f"{name} (segment)", [_on_segment(job, web) for job in jobs]
                rows.append(run_load(name, jobs, pid, web))
    finally:
        broker.stop()
    return rows


def _on_segment(job: Job, web: str) -> Job:
    """The same job on the one segment of a new scalable topic named after its topic, keyed."""
    local = job.topic.rsplit("/", 1)[1]
    request = urllib.request.Request(
        f"{web}/admin/v2/scalable/public/default/{local}",
        data=json.dumps({"numInitialSegments": 1}).encode(),
        headers={"content-type": "application/json"},
        method="PUT",
    )
    urllib.request.urlopen(request, timeout=30).close()
    return replace(job, topic=f"segment://public/default/{local}/0000-ffff-0", keyed=True)


def redis_rows(args: argparse.Namespace, data_dir: Path, run_id: int) -> list[Row]:
    server = shutil.which("redis-server")
    if server is None or args.no_redis:
        return []
    rdir = data_dir / f"redis-{run_id}"
    rdir.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(rdir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows: list[Row] = []
    try:
        deadline = time.monotonic() + 10
        while True:  # poll the child with a deadline until it answers PING
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        s_, p = args.seconds, args.procs
        rows.append(
            run_load(
                "redis XADD 100 B, 1000 in flight",
                _jobs(
                    "redis",
                    "127.0.0.1",
                    port,
                    "bench-s",
                    p,
                    window=1000 // p,
                    batched=False,
                    seconds=s_,
                ),
                proc.pid,
                None,
            )
        )
        rows.append(
            run_load(
                f"redis paced {args.paced_rate:.0f}/s XADD 100 B",
                _jobs(
                    "redis",
                    "127.0.0.1",
                    port,
                    "bench-paced",
                    1,
                    window=1,
                    batched=False,
                    paced_rate=args.paced_rate,
                    seconds=s_,
                ),
                proc.pid,
                None,
            )
        )
        rows.append(
            run_load(
                f"redis XADD {BATCH * MESSAGE // 1000} kB, {32 * p} in flight",
                _jobs(
                    "redis",
                    "127.0.0.1",
                    port,
                    "bench-batch",
                    p,
                    window=32,
                    batched=True,
                    seconds=s_,
                ),
                proc.pid,
                None,
            )
        )
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(rdir, ignore_errors=True)
    return rows


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def add_ratios(rows: list[Row]) -> None:
    """Each row against its yardstick in the same run: rates against the disk's fdatasync
    limits, a paced row's p99 against Redis's paced p99."""
    small = next((r for r in rows if r.name.startswith("limit: 1 fdatasync")), None)
    big = next((r for r in rows if r.name.startswith("limit: 16 x")), None)
    redis_paced = next((r for r in rows if r.name.startswith("redis paced")), None)
    for r in rows:
        if r.name.startswith("limit"):
            r.vs = "1.00"
        elif "paced" in r.name:
            if redis_paced is not None and r is not redis_paced and redis_paced.p99_ms:
                r.vs = f"p99 {r.p99_ms / redis_paced.p99_ms:.2f} x redis"
        elif "B/entry" in r.name or "kB" in r.name:
            if big is not None and big.mb_s:
                r.vs = f"{r.mb_s / big.mb_s:.2f} x MB/s limit"
        elif small is not None and small.entries_s:
            r.vs = f"{r.entries_s / small.entries_s:.1f} x fsync/entry"


def print_table(runs: list[list[Row]]) -> None:
    names = [r.name for r in runs[0]]
    print()
    print(
        "| row | entries/s (best) | spread | msg/s | MB/s | p50 ms | p99 ms "
        "| server CPU µs/entry | GC % of broker CPU | vs limit |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        same = [r for run in runs for r in run if r.name == name]
        paced = "paced" in name
        # Best run: highest rate, or lowest median latency for a paced row.
        best = min(same, key=lambda r: r.p50_ms) if paced else max(same, key=lambda r: r.entries_s)
        rates = [r.entries_s for r in same]
        spread = f"{min(rates):.0f}-{max(rates):.0f}" if len(same) > 1 else ""
        if paced:
            p50s = [r.p50_ms for r in same]
            spread = f"p50 {min(p50s):.3f}-{max(p50s):.3f}" if len(same) > 1 else ""
        gc_share = "" if best.gc_share is None else f"{best.gc_share * 100:.1f}"
        cpu = f"{best.cpu_us:.1f}" if best.cpu_us else ""
        print(
            f"| {name} | {best.entries_s:.0f} | {spread} | {best.msgs_s:.0f} | {best.mb_s:.1f} "
            f"| {best.p50_ms:.3f} | {best.p99_ms:.3f} | {cpu} | {gc_share} | {best.vs} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per row")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the whole set")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes")
    parser.add_argument("--paced-rate", type=float, default=1000.0)
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where data dirs go")
    parser.add_argument("--only", help="run only the broker rows whose name contains this")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-client", action="store_true")
    parser.add_argument("--broker-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--segment", action="store_true", help="broker rows on keyed segment:// topics"
    )
    parser.add_argument("--json", type=Path, help="also write every run's rows here")
    args = parser.parse_args(argv)
    print(f"load average before: {_loadavg()}  ({os.cpu_count()} cores)", flush=True)
    base = Path(tempfile.mkdtemp(prefix="broker-bench-", dir=args.dir))
    runs: list[list[Row]] = []
    try:
        for run_id in range(args.repeat):
            rows = limit_rows(base, 1.0) if args.only is None else []
            rows += broker_rows(args, base, run_id)
            rows += redis_rows(args, base, run_id) if args.only is None else []
            add_ratios(rows)
            runs.append(rows)
            for r in rows:
                gc_share = "" if r.gc_share is None else f" gc {r.gc_share * 100:.1f}%"
                print(
                    f"run {run_id}: {r.name}: {r.entries_s:.0f} e/s {r.msgs_s:.0f} msg/s "
                    f"{r.mb_s:.1f} MB/s p50 {r.p50_ms:.3f} p99 {r.p99_ms:.3f} "
                    f"cpu {r.cpu_us:.1f} us/e{gc_share}",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"load average after: {_loadavg()}")
    print_table(runs)
    if args.json:
        args.json.write_text(json.dumps([[r.__dict__ for r in run] for run in runs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
