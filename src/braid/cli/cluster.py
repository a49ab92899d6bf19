"""``braid cluster up|down|status``: a cluster of separate processes on this machine, one command.

Argument parsing and printing only; :mod:`braid.localcluster` starts, records and stops the
processes (ADR 0053).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import IO, Any

from braid.core.errors import BraidError
from braid.localcluster import ClusterStatus, NoCluster, cluster_down, cluster_status, cluster_up
from braid.localcluster.state import ClusterState

EPILOG = """\
what `up` starts (each a separate process, detached: they keep running after `up` returns):
  ZooKeeper     Debian's (apt-get install zookeeper), data in DIR/data/zookeeper
  N bookies     `braid bookie`, ledger storage (E/W/A = 3/2/2 with 3 or more bookies)
  N brokers     `braid broker`, each owning some namespace bundles; clients may use any broker
Everything lives under --dir: conf/ (every configuration file), data/ (every data directory),
logs/ (every process's output) and cluster.json (the state file: ports and process ids).
`up` prints the service and admin URLs. A directory keeps its ports: `up` after `down` brings
the same cluster back with its data.

ports (base ports; instance N listens on BASE+N-1; 0 = free ports chosen by the kernel):
  --zookeeper-port 2181   --bookie-port 3181   --broker-port 6650   --web-port 8080

`down` stops exactly the processes `up` recorded (process id and start time, never by name):
brokers first, then bookies, then ZooKeeper; SIGTERM, then SIGKILL after --timeout seconds.
`up` is idempotent: it starts only what does not run (nothing when the cluster is up, the dead
processes when it is partly up, everything after a reboot), with the directory's recorded ports.
`status` shows each process alive or dead, the brokers registered in ZooKeeper and the leader;
it exits 0 when every process runs, 1 otherwise.

examples:
  braid cluster up                          # 3 bookies, 3 brokers in ./braid-cluster
  braid cluster up --brokers 2 --bookies 3 --dir /tmp/c1 --broker-port 0 --web-port 0
  braid cluster up --broker-setting metadataStoreSessionTimeoutMillis=4000
  braid cluster up --bookie-setting journalSyncData=false    # no fsync: faster, not durable
  braid cluster status
  pulsar-client produce -s pulsar://127.0.0.1:6650,127.0.0.1:6651,127.0.0.1:6652 ...
  braid admin --url http://127.0.0.1:8080 brokers list
  braid cluster down                        # keeps the data; --delete-data removes DIR's files

See docs/deploy.md (one machine and many).
"""


def add_cluster_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``braid cluster`` sub-command's arguments."""
    parser = commands.add_parser(
        "cluster",
        help="run ZooKeeper, bookies and brokers on this machine as one cluster",
        description="Start, inspect and stop a whole Braid cluster on this machine: Debian's "
        "ZooKeeper, `braid bookie` and `braid broker` processes, each a separate process.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "action", choices=["up", "down", "status"], help="start, stop, or show the cluster"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("braid-cluster"),
        help="the cluster's directory: configuration, data, logs, state (default ./braid-cluster)",
    )
    parser.add_argument("--brokers", type=int, help="up: number of brokers (default 3)")
    parser.add_argument("--bookies", type=int, help="up: number of bookies (default 3)")
    parser.add_argument("--cluster-name", default="local", help="up: clusterName (default local)")
    for role, default in (("zookeeper", 2181), ("bookie", 3181), ("broker", 6650), ("web", 8080)):
        parser.add_argument(
            f"--{role}-port",
            type=int,
            default=default,
            help=f"up: base {role} port (default {default}; 0 = free ports)",
        )
    parser.add_argument(
        "--broker-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="up: a broker.conf line for every broker (repeatable)",
    )
    parser.add_argument(
        "--bookie-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="up: a bookkeeper.conf line for every bookie (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="up: seconds to wait for every process to be ready (default 120); "
        "down: seconds between SIGTERM and SIGKILL (default 30)",
    )
    parser.add_argument(
        "--delete-data",
        action="store_true",
        help="down: also delete DIR's conf/, data/, logs/ and cluster.json",
    )
    parser.add_argument(
        "--output", choices=["text", "json"], default="text", help="status: output format"
    )


def _settings(pairs: list[str], flag: str) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} takes KEY=VALUE, not {pair!r}")
        found[key.strip()] = value.strip()
    return found


def _print_up(state: ClusterState, out: IO[str]) -> None:
    layout = state.layout
    print(f"Braid cluster {layout.cluster!r} is up in {layout.directory}", file=out)
    for record in state.processes:
        urls = "  ".join(record.urls.values())
        print(f"  {record.name:<10} pid {record.pid:<7} {urls}", file=out)
        print(f"  {'':<10} data {record.data_dir}  log {record.log}", file=out)
    print(f"service URL (any broker): {layout.service_url}", file=out)
    print(f"admin:  braid admin --url {layout.web_urls[0]} brokers list", file=out)
    print(f"logs:   {layout.log_dir()}/", file=out)
    print(f"state:  {layout.state_path}", file=out)
    print(f"stop:   braid cluster down --dir {layout.directory}", file=out, flush=True)


def _status_json(status: ClusterStatus) -> dict[str, Any]:
    return {
        "directory": str(status.layout.directory),
        "serviceUrl": status.layout.service_url,
        "processes": [
            {
                **p.record.to_json(),
                "running": p.running,
                "cpuSeconds": p.cpu_s,
            }
            for p in status.processes
        ],
        "registeredBrokers": None if status.registered is None else list(status.registered),
        "leaderBroker": status.leader,
        "registryError": status.registry_error,
    }


def _print_status(status: ClusterStatus, out: IO[str]) -> None:
    print(f"cluster {status.layout.cluster!r} in {status.layout.directory}", file=out)
    if not status.processes:
        print("  no process runs (stopped by `braid cluster down`)", file=out)
    for p in status.processes:
        state = "alive" if p.running else "DEAD"
        cpu = "" if p.cpu_s is None else f" cpu {p.cpu_s:.1f}s"
        urls = "  ".join(p.record.urls.values())
        print(f"  {p.record.name:<10} pid {p.record.pid:<7} {state:<5}{cpu}  {urls}", file=out)
    if status.registered is None:
        print(f"brokers registry: unknown ({status.registry_error})", file=out)
    else:
        print(f"brokers registered: {', '.join(status.registered) or 'none'}", file=out)
        print(f"leader broker: {status.leader or 'none'}", file=out)


def run_cluster(args: argparse.Namespace, *, out: IO[str] | None = None) -> int:
    """The ``braid cluster`` command; returns the exit code."""
    out = out or sys.stdout
    # Closing the store's session makes kazoo warn that the connection dropped: not news here.
    logging.getLogger("kazoo").setLevel(logging.ERROR)

    def progress(line: str) -> None:
        print(f"  {line}", file=out, flush=True)

    try:
        if args.action == "up":
            ports = {
                r: getattr(args, f"{r}_port") for r in ("zookeeper", "bookie", "broker", "web")
            }
            result = cluster_up(
                args.dir,
                brokers=args.brokers,
                bookies=args.bookies,
                ports=ports,
                broker_settings=_settings(args.broker_setting, "--broker-setting"),
                bookie_settings=_settings(args.bookie_setting, "--bookie-setting"),
                cluster=args.cluster_name,
                timeout_s=120.0 if args.timeout is None else args.timeout,
                progress=progress,
            )
            if not result.started:
                print(
                    f"already up: every process of the cluster in {args.dir.resolve()} runs "
                    "(nothing started)",
                    file=out,
                )
            _print_up(result.state, out)
            return 0
        if args.action == "down":
            try:
                stopped = cluster_down(
                    args.dir,
                    timeout_s=30.0 if args.timeout is None else args.timeout,
                    delete_data=args.delete_data,
                )
            except NoCluster as exc:
                print(str(exc), file=out)
                return 0
            for item in stopped:
                print(f"{item.record.name} (pid {item.record.pid}): {item.how.value}", file=out)
            if not stopped:
                print(f"nothing was running in {args.dir.resolve()}", file=out)
            if args.delete_data:
                print(f"deleted the cluster's files in {args.dir.resolve()}", file=out)
            return 0
        status = cluster_status(args.dir)
        if args.output == "json":
            print(json.dumps(_status_json(status), indent=2), file=out)
        else:
            _print_status(status, out)
        return 0 if status.all_running else 1
    except (BraidError, ValueError, OSError) as exc:
        print(f"braid cluster {args.action}: error: {exc}", file=sys.stderr)
        return 1


__all__ = ["add_cluster_parser", "run_cluster"]
