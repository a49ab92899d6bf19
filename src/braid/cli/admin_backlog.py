"""``braid admin`` commands for backlog quotas, retention and message TTL, with pulsar-admin's
names and flags:

* ``braid admin namespaces set-backlog-quota | get-backlog-quotas | remove-backlog-quota``,
  ``set-retention | get-retention | remove-retention``, ``set-message-ttl | get-message-ttl |
  remove-message-ttl``;
* ``braid admin topics set-backlog-quota | get-backlog-quotas | remove-backlog-quota`` and
  ``set-message-ttl | get-message-ttl | remove-message-ttl`` on a ``persistent://`` topic or a
  scalable ``topic://`` topic (covering its segment DAG).

Sizes take pulsar-admin's units (``10M``, ``1G``; ``-1`` = no limit), times too (``30s``, ``10m``,
``2h``, ``7d``, ``1w``). :mod:`braid.cli.admin_namespaces` and :mod:`braid.cli.admin_topics` call
the ``add_*`` functions here with the helpers of :mod:`braid.cli.admin_parser`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from braid.cli.admin_commands import Handler, Printer
from braid.core.errors import InvalidInputError

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    ArgAdder = Callable[..., None]

_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
_TYPES = ("destination_storage", "message_age")


def _amount(text: str, units: dict[str, int], what: str) -> int:
    """``-1`` or a number with an optional unit suffix, in the units' base."""
    match = re.fullmatch(r"(-1|\d+)([a-zA-Z]?)", text.strip())
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in units or (match.group(1) == "-1" and unit):
        raise argparse.ArgumentTypeError(
            f"expected -1 or a {what} such as " + ("10M" if "g" in units else "2h") + f": {text!r}"
        )
    value = int(match.group(1))
    return -1 if value < 0 else value * units[unit]


def size_bytes(text: str) -> int:
    """``10M`` -> 10485760; ``-1`` stays -1."""
    return _amount(text, _SIZE_UNITS, "size")


def time_seconds(text: str) -> int:
    """``2h`` -> 7200; ``-1`` stays -1."""
    return _amount(text, _TIME_UNITS, "time")


def _show_quotas(p: Printer, target: str, quotas: dict[str, Any]) -> None:
    if p.json:
        p.data(quotas)
        return
    if not quotas:
        p.line(f"{target}: no backlog quota set (the next level's applies)")
    for kind, quota in sorted(quotas.items()):
        p.line(
            f"{target}: {kind}: limitSize {quota.get('limitSize')} B, limitTime "
            f"{quota.get('limitTime')} s, policy {quota.get('policy')}"
        )


def get_quotas(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show_quotas(p, args.target, admin.backlog.get_backlog_quotas(args.target))


def set_quota(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    if args.limit_size == -1 and args.limit_time == -1:
        raise InvalidInputError("give --limitSize and/or --limitTime")
    admin.backlog.set_backlog_quota(
        args.target,
        limit_size=args.limit_size,
        limit_time=args.limit_time,
        policy=args.policy,
        quota_type=args.type,
    )
    p.done(f"Backlog quota {args.type} of {args.target}: {args.policy}.")


def remove_quota(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.backlog.remove_backlog_quota(args.target, args.type)
    p.done(f"Removed the {args.type} backlog quota of {args.target}.")


def get_retention(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    retention = admin.backlog.get_retention(args.namespace)
    if p.json:
        p.data(retention)
    elif retention is None:
        p.line(f"{args.namespace}: retention not set (defaultRetention* of broker.conf apply)")
    else:
        p.line(
            f"{args.namespace}: keep consumed data {retention['retentionTimeInMinutes']} min / "
            f"{retention['retentionSizeInMB']} MB (-1 = unlimited)"
        )


def set_retention(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    minutes = args.time if args.time < 0 else -(-args.time // 60)
    megabytes = args.size if args.size < 0 else -(-args.size // (1024 * 1024))
    admin.backlog.set_retention(args.namespace, minutes, megabytes)
    p.done(f"Retention of {args.namespace}: {minutes} min, {megabytes} MB.")


def remove_retention(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.backlog.remove_retention(args.namespace)
    p.done(f"Removed the retention of {args.namespace} (broker defaults apply).")


def _ttl_target(args: argparse.Namespace) -> str:
    target: str = getattr(args, "target", None) or args.namespace
    return target


def get_ttl(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    target = _ttl_target(args)
    ttl = admin.backlog.get_message_ttl(target)
    if p.json:
        p.data(ttl)
    elif ttl is None:
        p.line(f"{target}: message TTL not set (the next level's applies)")
    else:
        p.line(f"{target}: message TTL {ttl} s" + (" (never expire)" if ttl == 0 else ""))


def set_ttl(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    target = _ttl_target(args)
    admin.backlog.set_message_ttl(target, args.message_ttl)
    p.done(f"Message TTL of {target}: {args.message_ttl} s.")


def remove_ttl(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    target = _ttl_target(args)
    admin.backlog.remove_message_ttl(target)
    p.done(f"Removed the message TTL of {target} (the next level's applies).")


def _quota_commands(
    commands: SubParsers, command: CommandAdder, group: str, target: str, example: str
) -> None:
    p = command(
        commands,
        "set-backlog-quota",
        set_quota,
        f"set a backlog quota on a {target}",
        description=f"Cap what the slowest subscription of a {target} may leave unacknowledged, "
        "by size (destination_storage) or by the age of its oldest message (message_age). Over "
        "it, producer_request_hold and producer_exception disconnect producers and refuse new "
        "ones (ProducerBlockedQuotaExceededError / ...Exception); consumer_backlog_eviction "
        "acknowledges the slowest subscriptions' oldest messages.",
        examples=f"  braid admin {group} set-backlog-quota {example} --limitSize 10G "
        "--policy producer_request_hold\n"
        f"  braid admin {group} set-backlog-quota {example} --limitTime 2h --type message_age "
        "--policy consumer_backlog_eviction\n",
    )
    p.add_argument("target", metavar=target.split()[-1].upper(), help=f"the {target}")
    p.add_argument(
        "-l", "--limitSize", "--limit", dest="limit_size", type=size_bytes, default=-1,
        metavar="SIZE", help="backlog size limit (10M, 1G; -1 = none)",
    )  # fmt: skip
    p.add_argument(
        "-lt", "--limitTime", dest="limit_time", type=time_seconds, default=-1,
        metavar="TIME", help="age limit of the oldest unacknowledged message (30m, 2h; -1 = none)",
    )  # fmt: skip
    p.add_argument("-p", "--policy", choices=_POLICIES, required=True)
    p.add_argument("-t", "--type", choices=_TYPES, default="destination_storage")
    p = command(
        commands,
        "get-backlog-quotas",
        get_quotas,
        f"show the backlog quotas set on a {target}",
        examples=f"  braid admin {group} get-backlog-quotas {example}\n",
    )
    p.add_argument("target", metavar=target.split()[-1].upper(), help=f"the {target}")
    p = command(
        commands,
        "remove-backlog-quota",
        remove_quota,
        f"drop a backlog quota of a {target} (the next level's applies)",
        examples=f"  braid admin {group} remove-backlog-quota {example} -t message_age\n",
    )
    p.add_argument("target", metavar=target.split()[-1].upper(), help=f"the {target}")
    p.add_argument("-t", "--type", choices=_TYPES, default="destination_storage")


def add_topic_backlog_commands(commands: SubParsers, command: CommandAdder) -> None:
    """Add the backlog-quota and message-TTL commands to ``braid admin topics``."""
    example = "persistent://public/default/events"
    _quota_commands(commands, command, "topics", "persistent or scalable topic", example)
    for name, handler, help_text in (
        ("get-message-ttl", get_ttl, "show the topic's own message TTL"),
        (
            "remove-message-ttl",
            remove_ttl,
            "drop the topic's message TTL (the namespace's applies)",
        ),
        ("set-message-ttl", set_ttl, "acknowledge the topic's messages older than this"),
    ):
        p = command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin topics {name} {example}"
            + (" -ttl 2h\n" if name.startswith("set") else "\n"),
        )
        p.add_argument("target", metavar="TOPIC", help="the persistent or scalable topic")
        if name.startswith("set"):
            _ttl_arg(p)


def _ttl_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-ttl", "--messageTTL", dest="message_ttl", type=time_seconds, required=True,
        metavar="TIME", help="seconds (or 30m, 2h...); 0 = never expire",
    )  # fmt: skip


def add_namespace_backlog_commands(
    commands: SubParsers, command: CommandAdder, namespace_arg: ArgAdder
) -> None:
    """Add the backlog-quota, retention and message-TTL commands to ``braid admin namespaces``."""
    _quota_commands(commands, command, "namespaces", "namespace", "public/default")
    p = command(
        commands,
        "set-retention",
        set_retention,
        "keep consumed messages this long / this much before their space is freed",
        description="Set the namespace's retention: consumed ledgers are deleted (their disk "
        "space returned) once older than --time or beyond --size; -1 = unlimited, 0 = at once.",
        examples="  braid admin namespaces set-retention public/default --time 3h --size 10G\n",
    )
    namespace_arg(p)
    p.add_argument("-t", "--time", type=time_seconds, required=True, metavar="TIME")
    p.add_argument("-s", "--size", type=size_bytes, required=True, metavar="SIZE")
    for name, handler, help_text in (
        ("get-retention", get_retention, "show the namespace's retention"),
        ("remove-retention", remove_retention, "drop the namespace's retention"),
        ("get-message-ttl", get_ttl, "show the namespace's message TTL"),
        ("remove-message-ttl", remove_ttl, "drop the namespace's message TTL"),
    ):
        p = command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin namespaces {name} public/default\n",
        )
        namespace_arg(p)
    p = command(
        commands,
        "set-message-ttl",
        set_ttl,
        "acknowledge messages older than this for every subscription",
        examples="  braid admin namespaces set-message-ttl public/default -ttl 3600\n",
    )
    namespace_arg(p)
    _ttl_arg(p)


HANDLERS: tuple[Handler, ...] = (
    get_quotas,
    set_quota,
    remove_quota,
    get_retention,
    set_retention,
    remove_retention,
    get_ttl,
    set_ttl,
    remove_ttl,
)

__all__ = [
    "HANDLERS",
    "add_namespace_backlog_commands",
    "add_topic_backlog_commands",
    "size_bytes",
    "time_seconds",
]
