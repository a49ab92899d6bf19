"""``braid bookie``: one storage node (bookie) as its own process.

A thin entry point: it loads ``bookkeeper.conf`` (:mod:`braid.storage.bookie.config`), runs a
:class:`~braid.storage.bookie.service.BookieService` until SIGINT/SIGTERM (or until the bookie
stops by itself: metadata session lost, full disk without read-only mode), and closes it:
registration first, then the port, then the journal. Exit codes: 0 after a clean stop, 1 when
start-up failed or the bookie stopped by itself, 2 for a bad configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from braid.core.errors import BraidError
from braid.event_loop import choose_event_loop

if TYPE_CHECKING:
    from braid.storage.bookie.config import BookieConfig

log = logging.getLogger(__name__)

EPILOG = """\
configuration:
  conf/bookkeeper.conf (key=value lines, BookKeeper's key names; see docs/storage.md). Flags
  override the file. Unknown keys are named in one warning.

the bookie's directories:
  journalDirectories  where the journal goes (entries are acknowledged after its fsync)
  ledgerDirectories   entry and index files, the checkpoint, the COOKIE
  A COOKIE file in each, and one in the metadata store, tie the directories to the bookie id:
  a bookie whose directories were wiped refuses to start (its data is gone; rejoining would
  pass it off as a healthy replica) until started once with --format.

auto-recovery:
  autoRecoveryDaemonEnabled=true runs auto-recovery in this bookie: it contends for the cluster's
  one auditor election (with brokers and other bookies) and runs a replication worker that copies
  the fragments of lost bookies to others (lostBookieRecoveryDelay, auditorPeriodicCheckInterval).

TLS (docs/security.md "TLS inside the cluster"):
  tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory (or tlsCertificatePath)
  makes the bookie port TLS only: tlsCertificatePath and tlsKeyStore (PEM, tlsKeyStoreType=PEM)
  are the bookie's certificate and key, tlsTrustStore the CAs of client certificates, and
  tlsClientAuthentication=true requires one (brokers set bookkeeperTLS* keys to connect).

examples:
  braid bookie --config conf/bookkeeper.conf
  braid bookie --config conf/bookkeeper.conf --port 3182 --http-port 8001 \\
      --journal-dir data/bookie-2 --ledger-dir data/bookie-2
  braid bookie --metadata-service-uri zk://127.0.0.1:2181/braid --format

Stop with Ctrl+C or SIGTERM: the bookie leaves the writable list, closes its port, flushes
its journal and exits 0. Writers move their ledgers to other bookies (ensemble change).
"""


def add_bookie_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``braid bookie`` sub-command's arguments."""
    parser = commands.add_parser(
        "bookie",
        help="run a bookie (storage node) that brokers reach over TCP",
        description="Run one bookie: stores ledger entries (journal + entry files), serves "
        "adds, reads, fencing and deletes over TCP, registers itself in the metadata store.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, help="a bookkeeper.conf file (key=value lines)")
    parser.add_argument("--port", type=int, help="bookiePort (default 3181; 0 = a free port)")
    parser.add_argument("--advertised-address", help="advertisedAddress (default 127.0.0.1)")
    parser.add_argument("--bookie-id", help="bookieId (default advertisedAddress:bookiePort)")
    parser.add_argument("--journal-dir", help="journalDirectories")
    parser.add_argument("--ledger-dir", help="ledgerDirectories")
    parser.add_argument("--metadata-service-uri", help="metadataServiceUri, e.g. zk://h:2181/x")
    parser.add_argument("--http-port", type=int, help="httpServerPort (default 8000)")
    parser.add_argument(
        "--format",
        action="store_true",
        help="join as a new bookie: replace this id's old cookie in the metadata store "
        "(refused while the directories hold a cookie)",
    )
    parser.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        default=argparse.SUPPRESS,
        help="log verbosity (one logfmt line per event on stderr)",
    )


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    flags = {
        "bookiePort": args.port,
        "advertisedAddress": args.advertised_address,
        "bookieId": args.bookie_id,
        "journalDirectories": args.journal_dir,
        "ledgerDirectories": args.ledger_dir,
        "metadataServiceUri": args.metadata_service_uri,
        "httpServerPort": args.http_port,
    }
    return {k: str(v) for k, v in flags.items() if v is not None}


async def _serve(config: BookieConfig, new_bookie: bool) -> int:
    from braid.storage.bookie.config import describe
    from braid.storage.bookie.service import BookieService

    service = BookieService(config, new_bookie=new_bookie)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    log.info("starting bookie", extra={"fields": describe(config)})
    await service.start()
    http = f", http on {service.http.port}" if service.http is not None else ""
    print(
        f"bookie {service.bookie_id} ready on {config.effective_bind_address}:{service.port}{http}",
        flush=True,
    )
    stopped = asyncio.ensure_future(service.stopped.wait())
    signalled = asyncio.ensure_future(stop.wait())
    await asyncio.wait([stopped, signalled], return_when=asyncio.FIRST_COMPLETED)
    for waiter in (stopped, signalled):
        waiter.cancel()
    await service.close()
    print(f"bookie {service.bookie_id} stopped", flush=True)
    return 1 if service.stop_reason is not None else 0


def run_bookie(args: argparse.Namespace) -> int:
    """The ``braid bookie`` command; returns the exit code."""
    from braid.storage.bookie.config import InvalidBookieConfig, load_bookie_config

    try:
        config = load_bookie_config(args.config, _overrides(args))
    except InvalidBookieConfig as exc:
        print(f"braid bookie: {exc}", file=sys.stderr)
        return 2
    try:
        loop = choose_event_loop()
        log.info("bookie running on the %s event loop", loop.name)
        with asyncio.Runner(loop_factory=loop.factory) as runner:
            return runner.run(_serve(config, args.format))
    except (BraidError, OSError) as exc:
        log.error("bookie failed: %s", exc)
        print(f"braid bookie: error: {exc}", file=sys.stderr)
        return 1
