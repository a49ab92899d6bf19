"""``braid admin bookies``: the home storage cluster's bookies - ``list``, ``underreplicated``,
``decommission`` (optionally waiting for the copies) and ``decommission-status``; one call of
:class:`braid.admin.client_bookies.Bookies` each."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from braid.cli import admin_output as out
from braid.cli.admin_commands import Printer
from braid.cli.admin_parser import non_negative

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    GroupAdder = Callable[[str, str, str, str], SubParsers]

#: Seconds between two looks at a decommission's progress with ``--wait``.
_POLL_S = 1.0


def bk_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    bookies = admin.bookies.list()
    if p.json:
        p.data(bookies)
        return
    p.line(
        out.table(
            ["bookie", "state", "rack"],
            [[b.get("bookieId"), b.get("state"), b.get("rack") or ""] for b in bookies],
        )
    )


def bk_underreplicated(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    ledgers = admin.bookies.under_replicated()
    if p.json:
        p.data(ledgers)
    elif not ledgers:
        p.line("no ledger is under-replicated")
    else:
        p.line(f"{len(ledgers)} under-replicated ledger(s): {', '.join(map(str, ledgers))}")


def _show(p: Printer, status: dict[str, Any]) -> None:
    if p.json:
        p.data(status)
        return
    remaining = status.get("ledgersRemaining", [])
    if status.get("done"):
        p.line(f"{status.get('bookieId')}: decommissioned (no ledger names it)")
    else:
        p.line(
            f"{status.get('bookieId')}: {len(remaining)} ledger(s) still on it, "
            f"{status.get('underReplicatedLedgers')} under-replicated in the cluster"
        )


def bk_decommission(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    status = admin.bookies.decommission(args.bookie)
    deadline = time.monotonic() + args.wait
    while not status.get("done") and time.monotonic() < deadline:
        if not p.json:
            _show(p, status)
        time.sleep(_POLL_S)  # a person waits at the terminal; nothing to be woken by
        status = admin.bookies.decommission_status(args.bookie)
    _show(p, status)


def bk_decommission_status(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show(p, admin.bookies.decommission_status(args.bookie))


def add_bookies_group(group: GroupAdder, command: CommandAdder) -> None:
    """Add ``braid admin bookies`` and its commands."""
    commands = group(
        "bookies",
        "the storage cluster's bookies: list, under-replicated ledgers, decommission",
        "The bookies of the broker's home storage cluster. Decommissioning a bookie marks "
        "every ledger on it under-replicated; replication workers (autoRecoveryDaemonEnabled) "
        "copy its fragments to other bookies. Stop the bookie first. See docs/storage.md.",
        """\
  braid admin bookies list
  braid admin bookies decommission 127.0.0.1:3181 --wait 600
  braid admin bookies decommission-status 127.0.0.1:3181
  braid admin bookies underreplicated
""",
    )
    command(commands, "list", bk_list, "list the available bookies (writable or read-only)")
    command(commands, "underreplicated", bk_underreplicated, "list the under-replicated ledgers")
    p = command(
        commands,
        "decommission",
        bk_decommission,
        "copy every fragment of a bookie to other bookies",
    )
    p.add_argument("bookie", metavar="BOOKIE_ID")
    p.add_argument(
        "--wait",
        type=non_negative,
        default=0,
        metavar="SECONDS",
        help="report progress until done or this many seconds passed (default: do not wait)",
    )
    p = command(
        commands, "decommission-status", bk_decommission_status, "show a decommission's progress"
    )
    p.add_argument("bookie", metavar="BOOKIE_ID")


__all__ = ["add_bookies_group"]
