"""``braid admin bookie-clusters``: PIP-470 storage clusters and switching between them.

``register | list | get | precheck | advance-idgen | switch | status | rollback | cleanup |
close-client``, one call of :class:`braid.admin.client.BookieClusters` each; ``status`` prints
the phase, the progress counts and the failed ledgers as tables. :mod:`braid.cli.admin` builds
the parser with the helpers of :mod:`braid.cli.admin_parser` and maps failures to one line on
stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from braid.cli import admin_output as out
from braid.cli.admin_commands import Printer
from braid.cli.admin_parser import non_negative
from braid.core.errors import InvalidInputError

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    GroupAdder = Callable[[str, str, str, str], SubParsers]

_STATUSES = ("ACTIVE", "STANDBY", "DEPRECATED")


def _cluster_rows(clusters: list[dict[str, Any]]) -> str:
    return out.table(
        ["name", "status", "active", "client", "metadata service uri"],
        [
            [
                c.get("name", ""),
                c.get("status", ""),
                "yes" if c.get("active") else "",
                "open" if c.get("clientOpen") else "closed",
                c.get("metadataServiceUri", ""),
            ]
            for c in clusters
        ],
    )


def _name_or_flag(p: argparse.ArgumentParser, dest: str, flag: str) -> None:
    """``NAME`` positionally or as PIP-470 writes it (``--name NAME`` / ``--target NAME``)."""
    p.add_argument("positional_" + dest, nargs="?", metavar="NAME", default=None)
    p.add_argument(flag, dest="flag_" + dest, metavar="NAME", default=None)
    p.set_defaults(_named_flag=flag)


def _named(args: argparse.Namespace, dest: str) -> str:
    """The cluster name given positionally or with the flag (exactly one, or both equal).

    Raises:
        InvalidInputError: neither given, or two different names.
    """
    flag = args._named_flag
    positional = getattr(args, "positional_" + dest)
    flagged = getattr(args, "flag_" + dest)
    if positional is None and flagged is None:
        raise InvalidInputError(f"a cluster name is required (NAME or {flag} NAME)")
    if positional is not None and flagged is not None and positional != flagged:
        raise InvalidInputError(f"two different names given: {positional!r} and {flag} {flagged!r}")
    name: str = flagged if flagged is not None else positional
    return name


def bc_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    clusters = admin.bookie_clusters.list()
    if p.json:
        p.data(clusters)
    else:
        p.line(_cluster_rows(clusters))


def bc_get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    info = admin.bookie_clusters.get(_named(args, "name"))
    if p.json:
        p.data(info)
    else:
        p.line(out.key_values([(k, v) for k, v in info.items()]))


def bc_register(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    info = admin.bookie_clusters.register(
        _named(args, "name"), args.metadata_service_uri, args.status
    )
    if p.json:
        p.data(info)
    else:
        p.line(f"Registered storage cluster {info['name']} ({info['status']}).")


def _show_precheck(p: Printer, result: dict[str, Any]) -> None:
    if p.json:
        p.data(result)
        return
    verdict = "ready" if result.get("ready") else "NOT ready: run `advance-idgen` first"
    p.line(
        out.key_values(
            [
                ("target", result.get("targetClusterName")),
                ("source", result.get("sourceClusterName")),
                ("source highest ledger id", result.get("sourceMaxHighOrderBit")),
                ("target next ledger id", result.get("targetMaxHighOrderBit")),
                ("I11 (idgen beyond source)", verdict),
            ]
        )
    )


def bc_precheck(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show_precheck(p, admin.bookie_clusters.precheck(_named(args, "name")))


def bc_advance_idgen(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show_precheck(p, admin.bookie_clusters.advance_idgen(_named(args, "name"), args.margin))


def _show_status(p: Printer, status: dict[str, Any]) -> None:
    if p.json:
        p.data(status)
        return
    p.line(f"switch state: {status.get('state')}")
    p.line(f"active storage cluster: {status.get('activeCluster')}")
    p.line(_cluster_rows(status.get("clusters", [])))
    dual = status.get("dualRead")
    if dual:
        p.line(
            f"dual read since {out.when(dual.get('switchTimestampMillis'))} "
            f"(initial cluster {dual.get('initialClusterName')}, ledger ids from "
            f"{dual.get('switchLedgerIdBoundary')} are new)"
        )
    switch = status.get("switch")
    if not switch:
        p.line("no switch has run")
        return
    p.line("")
    p.line(
        out.key_values(
            [
                ("switch", f"{switch.get('source')} -> {switch.get('target')}"),
                ("phase", _phase_text(switch)),
                ("orchestrated by", switch.get("origin")),
                ("switched at", out.when(switch.get("switchTimestampMillis"))),
                ("rollback window closes", out.when(switch.get("windowClosesAtMillis"))),
                ("rollback requested", bool(switch.get("rollbackRequested"))),
            ]
        )
    )
    progress = switch.get("progress", {})
    p.line("")
    p.line(
        out.table(
            ["ledgers", "count"],
            [[k.lower().replace("_", " "), v] for k, v in progress.items()],
        )
    )
    for title, key in (("failed", "failedLedgers"), ("deferred", "deferredLedgers")):
        rows = switch.get(key) or []
        if rows:
            p.line("")
            p.line(
                out.table(
                    [f"{title} ledger", "kind", "owner", "cursor", "reason"],
                    [
                        [
                            r.get("ledgerId"),
                            r.get("kind"),
                            r.get("owner"),
                            r.get("cursor") or "-",
                            r.get("reason"),
                        ]
                        for r in rows
                    ],
                )
            )


def _phase_text(switch: dict[str, Any]) -> str:
    phase = str(switch.get("phase"))
    if switch.get("finished"):
        return f"{phase} (finished)"
    if switch.get("awaitingRollbackWindow"):
        return f"{phase} (waiting for the rollback window to close)"
    if switch.get("newCopiesDeletionAtMillis") is not None:
        return f"{phase} (new copies kept until {out.when(switch['newCopiesDeletionAtMillis'])})"
    return phase


def bc_status(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show_status(p, admin.bookie_clusters.status())


def bc_switch(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    target = _named(args, "target")
    status = admin.bookie_clusters.switch(target)
    if not p.json:
        p.line(f"Switched to {target}: new ledgers are created there; BUILD follows.")
    _show_status(p, status)


def bc_rollback(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    status = admin.bookie_clusters.rollback()
    if not p.json:
        p.line("Rolling back: attributions return to the old cluster.")
    _show_status(p, status)


def bc_cleanup(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    result = admin.bookie_clusters.cleanup(
        dry_run=not args.execute,
        src_cluster_filter=args.src_cluster_filter,
        max_deletions=args.max_deletions,
        force=args.force,
    )
    if p.json:
        p.data(result)
        return
    ledgers = result.get("ledgers", [])
    verb = "would delete" if result.get("dryRun") else "deleting"
    p.line(f"cleanup {verb} {len(ledgers)} old-cluster ledger(s):")
    if ledgers:
        p.line(
            out.table(
                ["ledger", "cluster", "kind", "owner", "cursor"],
                [
                    [
                        r.get("ledgerId"),
                        r.get("cluster"),
                        r.get("kind"),
                        r.get("owner"),
                        r.get("cursor") or "-",
                    ]
                    for r in ledgers
                ],
            )
        )
    if result.get("dryRun"):
        p.line("(dry run: pass --execute to delete; --force before the window closes)")


def bc_close_client(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _named(args, "name")
    admin.bookie_clusters.close_client(name)
    p.done(f"Closed the client of storage cluster {name}.")


def add_bookie_clusters_group(group: GroupAdder, command: CommandAdder) -> None:
    """Add ``braid admin bookie-clusters`` and its commands."""
    commands = group(
        "bookie-clusters",
        "storage clusters and switching between them at runtime (PIP-470)",
        "Storage (bookie) clusters the broker can write to: register one, check it (I11), "
        "switch to it, follow BUILD -> PROMOTE -> CLEANUP with `status`, roll back within the "
        "window, clean up, close the old client. See docs/storage-switching.md.",
        """\
  braid admin bookie-clusters register --name new \\
      --metadata-service-uri zk+null://127.0.0.1:2181/ledgers-v2 --status STANDBY
  braid admin bookie-clusters advance-idgen --name new
  braid admin bookie-clusters precheck --name new
  braid admin bookie-clusters switch --target new
  braid admin bookie-clusters status
  braid admin bookie-clusters cleanup                 # dry run
  braid admin bookie-clusters cleanup --execute --force
  braid admin bookie-clusters close-client --name standalone
  (the cluster name may also be given positionally: `switch new`)
""",
    )
    p = command(
        commands,
        "register",
        bc_register,
        "register a storage cluster (or set a registered one's status)",
        examples="  braid admin bookie-clusters register --name new "
        "--metadata-service-uri zk+null://127.0.0.1:2181/ledgers-v2 --status STANDBY\n",
    )
    _name_or_flag(p, "name", "--name")
    p.add_argument("--metadata-service-uri", "--uri", required=True, metavar="URI")
    p.add_argument("--status", default="STANDBY", type=str.upper, choices=_STATUSES)
    command(commands, "list", bc_list, "list the registered storage clusters")
    for name, handler, text in (
        ("get", bc_get, "show one registered storage cluster"),
        ("precheck", bc_precheck, "check I11: is the cluster's ledger-id generator ready?"),
        ("close-client", bc_close_client, "close the client of a retired cluster"),
    ):
        p = command(commands, name, handler, text)
        _name_or_flag(p, "name", "--name")
    p = command(
        commands,
        "advance-idgen",
        bc_advance_idgen,
        "raise a cluster's ledger-id generator past every other cluster's ids",
    )
    _name_or_flag(p, "name", "--name")
    p.add_argument("--margin", type=non_negative, default=1_000_000, metavar="N")
    p = command(
        commands, "switch", bc_switch, "switch new ledgers to a registered cluster (runs precheck)"
    )
    _name_or_flag(p, "target", "--target")
    command(commands, "status", bc_status, "show the phase, progress counts and failures")
    command(commands, "rollback", bc_rollback, "return every attribution to the old cluster")
    p = command(
        commands,
        "cleanup",
        bc_cleanup,
        "delete the old cluster's copies (a dry run unless --execute)",
    )
    p.add_argument("--execute", action="store_true", help="delete (default: dry run)")
    p.add_argument("--src-cluster-filter", metavar="NAME", default=None)
    p.add_argument("--max-deletions", type=non_negative, default=0, metavar="N")
    p.add_argument("--force", action="store_true", help="before the window closes (lab only)")


__all__ = ["add_bookie_clusters_group"]
