"""The ``braid`` command line: ``braid standalone``, ``broker``, ``initialize-cluster-metadata``,
``bookie``, ``cluster``, ``admin`` and ``demo``.

Argument parsing and dispatch only; the commands live in :mod:`braid.cli.standalone`,
:mod:`braid.cli.broker`, :mod:`braid.cli.bookie`, :mod:`braid.cli.cluster`,
:mod:`braid.cli.admin` and :mod:`braid.cli.demo`, each imported only when it runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from braid.broker.config import InvalidConfig, config_keys, load_config
from braid.cli.logs import LEVELS, configure_logging

log = logging.getLogger(__name__)

_DESCRIPTION = """\
Braid: elastic, key-ordered messaging that speaks the Apache Pulsar binary protocol.

commands:
  standalone  run a complete Braid (metadata store, bookie, broker, admin REST API) in one
              process on one data directory; data and cursors survive restarts
  broker      run one broker of a cluster: brokers share a ZooKeeper metadata store and the
              `braid bookie` processes, and each topic is served by the broker owning its
              namespace bundle (lookups send clients there)
  initialize-cluster-metadata
              prepare a metadata store for a cluster of brokers (once, before the brokers)
  bookie      run a bookie (storage node) that brokers reach over TCP; bookies register in
              the metadata store, and a broker replicates its ledgers across them
  admin       manage a running broker through its admin REST API: scalable topics (create,
              split, merge, subscriptions, stats), segments, tenants, namespaces, topics
  cluster     up|down|status: ZooKeeper, bookies and brokers on this machine, each a separate
              process, started and stopped with one command (try a cluster)
  tokens      create secret keys, key pairs and JWTs for token authentication, with the flags
              of `pulsar tokens` (docs/security.md)
  demo        start a throw-away standalone broker and walk through producing and consuming
              with the official pulsar-client, then the scalable-topic auto-scaler

Run `braid <command> --help` for the options of a command.
"""

_KEYS_TEXT = textwrap.fill(
    "keys: " + ", ".join(config_keys()) + "; plus the PIP-483 scalableTopic* auto-scale keys.",
    width=96,
    initial_indent="  ",
    subsequent_indent="    ",
)

_STANDALONE_EPILOG = f"""\
configuration:
  Settings come from (lowest to highest precedence) built-in defaults, the --config file
  (Pulsar broker.conf syntax: key=value, '#' comments), environment variables BRAID_<key>, and
  the flags above. See conf/broker.conf and docs/standalone.md.
{_KEYS_TEXT}

examples:
  braid standalone
      data in ./data, broker on pulsar://127.0.0.1:6650, admin on http://127.0.0.1:8080
  braid standalone --data-dir /var/lib/braid --port 6651 --web-port 8081
  braid standalone --config conf/broker.conf --log-level DEBUG
  braid standalone --bookies 3
      three bookies in the process, reached over TCP on 127.0.0.1 (try replication)
  braid standalone --bookies 0 --config conf/broker.conf
      no bookie of its own: the `braid bookie` processes registered in the metadata store
  BRAID_brokerDeduplicationEnabled=true braid standalone
  curl http://127.0.0.1:8080/admin/v2/tenants

Stop with Ctrl+C or SIGTERM: the broker closes connections, flushes cursors, closes storage
and exits 0. Starting again on the same --data-dir resumes with every message and cursor.
One standalone per metadata store: its bookie lives in its process, so a second one pointed at
the same metadataStoreUrl exits 1 naming the first one's address and data directory.
"""

_DEMO_EPILOG = """\
The demo needs nothing running: it starts `braid standalone` on free 127.0.0.1 ports with a
temporary data directory, produces and consumes with the official pulsar-client, restarts the
broker to show that data and cursors survive, prints what happens at each step, then shows the
auto-scaler evolving a scalable topic's segment layout, and cleans up. It ends by printing the
console URL of the scalable topic it built (http://127.0.0.1:PORT/console/topic/...); with --keep
the broker stays up until Ctrl+C so you can open it in a browser.

examples:
  braid demo
  braid demo --keep
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``braid`` argument parser (exposed for tests and documentation)."""
    parser = argparse.ArgumentParser(
        prog="braid",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=None,
        type=str.upper,
        help="log verbosity; logs are one logfmt line per event on stderr "
        "(default INFO; WARNING for demo)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    standalone = commands.add_parser(
        "standalone",
        help="run metadata store, bookie, broker and admin API in one process",
        description="Run a complete Braid in one process: SQLite metadata store, in-process "
        "bookie, broker (Pulsar binary protocol) and admin REST API.",
        epilog=_STANDALONE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    standalone.add_argument(
        "--data-dir", type=Path, help="where metadata, journal and ledgers live (default ./data)"
    )
    standalone.add_argument("--config", type=Path, help="a broker.conf file (key=value lines)")
    standalone.add_argument(
        "--port",
        type=int,
        help="broker service port, Pulsar binary protocol (default 6650; 0 = a free port)",
    )
    standalone.add_argument(
        "--web-port", type=int, help="admin REST API port (default 8080; 0 = a free port)"
    )
    standalone.add_argument("--bind", help="address to listen on (default 127.0.0.1)")
    standalone.add_argument(
        "--advertised-address", help="host name given to clients (default: the bind address)"
    )
    standalone.add_argument(
        "--bookies",
        "--num-bookies",
        type=int,
        dest="bookies",
        help="standaloneBookies: 1 embedded bookie (default); N > 1 bookies in this process "
        "reached over loopback TCP, to try replication; 0 = use the `braid bookie` processes "
        "registered in bookkeeperMetadataServiceUri",
    )
    _add_log_level(standalone)

    _add_broker_parsers(commands)

    from braid.cli.admin import add_admin_parser  # argparse only; the client loads on use
    from braid.cli.bookie import add_bookie_parser
    from braid.cli.cluster import add_cluster_parser
    from braid.cli.tokens import add_tokens_parser

    add_admin_parser(commands)
    add_bookie_parser(commands)
    add_cluster_parser(commands)
    add_tokens_parser(commands)

    demo = commands.add_parser(
        "demo",
        help="watch a scripted produce/consume and auto-scale scenario",
        description="Start a throw-away standalone broker and run a short scenario with the "
        "official pulsar-client.",
        epilog=_DEMO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--keep",
        action="store_true",
        help="keep the broker running after the demo (until Ctrl+C) to look at it in the console",
    )
    _add_log_level(demo)
    return parser


_BROKER_EPILOG = """\
A cluster: a ZooKeeper, `braid bookie` processes and several `braid broker` processes sharing
it. Run `braid initialize-cluster-metadata` once first; a broker refuses to start on a store that
was not initialized for its clusterName. Each broker needs in broker.conf (Pulsar's keys):
  clusterName=NAME  metadataStoreUrl=zk:HOST:2181/CHROOT  configurationMetadataStoreUrl=(same)
  advertisedAddress=HOST  brokerServicePort=6650  webServicePort=8080
  managedLedgerDefaultEnsembleSize/WriteQuorum/AckQuorum (e.g. 3/2/2 over 3 bookies)
  defaultNumberOfNamespaceBundles (namespaces whose policies name no bundles; default 4)
  metadataStoreSessionTimeoutMillis (a dead broker's bundles move after this; default 10000)
Topics are spread over the brokers by namespace bundle (a hash range of topic names); clients
may connect to any broker: LOOKUP redirects them to the owner. The leader broker places bundles
on the least-loaded broker, sheds load and splits hot bundles (Pulsar's loadBalancer* keys:
loadBalancerSheddingEnabled, loadBalancerBrokerThresholdShedderPercentage, ...). SIGTERM hands
the broker's bundles over to the others (clients follow) and exits 0 within
brokerShutdownTimeoutMs. See docs/deploy.md.

examples:
  braid initialize-cluster-metadata --cluster c1 --metadata-store zk:zk1:2181/braid \\
      --configuration-metadata-store zk:zk1:2181/braid \\
      --web-service-url http://b1:8080 --broker-service-url pulsar://b1:6650
  braid broker --config conf/broker.conf
"""


def _add_broker_parsers(commands: Any) -> None:
    broker = commands.add_parser(
        "broker",
        help="run one broker of a cluster (ZooKeeper + bookie processes)",
        description="Run one broker of a Braid cluster: no storage in the process; topics are "
        "owned by namespace bundle, one broker each.",
        epilog=_BROKER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    broker.add_argument("--config", type=Path, help="a broker.conf file (key=value lines)")
    broker.add_argument("--data-dir", type=Path, help="scratch directory (default ./data)")
    _add_log_level(broker)

    init = commands.add_parser(
        "initialize-cluster-metadata",
        help="prepare a metadata store for a cluster of brokers",
        description="Write a cluster's metadata as Pulsar's initialize-cluster-metadata does: "
        "the cluster's URLs, the public and pulsar tenants, the public/default and pulsar/system "
        "namespaces cut into bundles, the transaction coordinators' assign topic, and the roots "
        "brokers use. Safe to run again (nothing it "
        "wrote before changes).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("--cluster", "-c", required=True, help="the cluster name (clusterName)")
    init.add_argument(
        "--metadata-store", "-md", required=True, help="metadataStoreUrl, e.g. zk:host:2181/braid"
    )
    init.add_argument(
        "--configuration-metadata-store",
        "-cms",
        help="configurationMetadataStoreUrl (default: the metadata store)",
    )
    init.add_argument("--web-service-url", "-uw", required=True, help="http://HOST:8080")
    init.add_argument("--broker-service-url", "-ub", required=True, help="pulsar://HOST:6650")
    init.add_argument(
        "--default-namespace-bundle-number",
        type=int,
        default=16,
        help="bundles of public/default and pulsar/system (default 16, as Pulsar)",
    )
    init.add_argument(
        "--num-transaction-coordinators",
        type=int,
        default=16,
        help="partitions of persistent://pulsar/system/transaction_coordinator_assign, one per "
        "transaction coordinator (default 16, as Pulsar)",
    )
    _add_log_level(init)


def _add_log_level(parser: argparse.ArgumentParser) -> None:
    # Accepted after the command too (`braid standalone --log-level DEBUG`).
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        type=str.upper,
        default=argparse.SUPPRESS,
        help="log verbosity (one logfmt line per event on stderr)",
    )


def _standalone_overrides(args: argparse.Namespace) -> dict[str, str]:
    flags = {
        "dataDir": args.data_dir,
        "brokerServicePort": args.port,
        "webServicePort": args.web_port,
        "bindAddress": args.bind,
        "advertisedAddress": args.advertised_address,
        "standaloneBookies": args.bookies,
    }
    return {key: str(value) for key, value in flags.items() if value is not None}


def _broker_overrides(args: argparse.Namespace) -> dict[str, str]:
    return {} if args.data_dir is None else {"dataDir": str(args.data_dir)}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``braid`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # The demo's narration and admin's answers are the point; logs would drown them unless
    # asked for.
    quiet = args.command in ("demo", "admin", "tokens", "cluster")
    configure_logging(args.log_level or ("WARNING" if quiet else "INFO"))
    if args.command == "standalone":
        from braid.cli.standalone import run_standalone

        try:
            config = load_config(args.config, _standalone_overrides(args), os.environ)
        except InvalidConfig as exc:
            print(f"braid standalone: {exc}", file=sys.stderr)
            return 2
        return run_standalone(config)
    if args.command == "broker":
        from braid.cli.broker import run_broker

        try:
            config = load_config(args.config, _broker_overrides(args), os.environ)
        except InvalidConfig as exc:
            print(f"braid broker: {exc}", file=sys.stderr)
            return 2
        return run_broker(config)
    if args.command == "initialize-cluster-metadata":
        from braid.cli.broker import run_initialize

        return run_initialize(args)
    if args.command == "bookie":
        from braid.cli.bookie import run_bookie

        return run_bookie(args)
    if args.command == "cluster":
        from braid.cli.cluster import run_cluster

        return run_cluster(args)
    if args.command == "admin":
        from braid.cli.admin import run_admin

        return run_admin(args)
    if args.command == "tokens":
        from braid.cli.tokens import run_tokens

        return run_tokens(args)
    if args.command == "demo":
        from braid.cli.demo import run_demo

        return run_demo(keep=args.keep)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
