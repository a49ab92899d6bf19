"""``braid admin`` commands for the topic-level settings and the namespace caps, with
pulsar-admin's names and flags:

* ``braid admin topics set-retention | get-retention | remove-retention``,
  ``set-deduplication | get-deduplication | remove-deduplication``, ``set-max-producers``,
  ``set-max-consumers``, ``set-max-consumers-per-subscription`` (with ``get-`` and ``remove-``)
  on a ``persistent://`` topic or a scalable ``topic://`` topic; ``get-*`` takes ``--applied``
  for the value in force (the topic's, else its namespace's, else the broker's);
* ``braid admin namespaces set-max-producers-per-topic``, ``set-max-consumers-per-topic``,
  ``set-max-consumers-per-subscription`` (with ``get-`` and ``remove-``).

The REST calls are :class:`braid.admin.client_topic_admin.PolicySettings`'.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from braid.cli.admin_backlog import size_bytes, time_seconds
from braid.cli.admin_commands import Printer
from braid.cli.admin_parser import non_negative

if TYPE_CHECKING:
    from collections.abc import Callable

    from braid.admin.client import AdminClient
    from braid.admin.client_topic_admin import PolicySettings

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]


@dataclass(frozen=True)
class _Setting:
    """One setting as the CLI names it."""

    command: str  # the part after set-/get-/remove-
    rest: str  # the REST name
    what: str
    flag: tuple[str, ...] = ()  # the set command's value flag (a cap)


_TOPIC_CAPS = (
    _Setting("max-producers", "maxProducers", "producers on the topic", ("-p", "--max-producers")),
    _Setting("max-consumers", "maxConsumers", "consumers on the topic", ("-c", "--max-consumers")),
    _Setting(
        "max-consumers-per-subscription",
        "maxConsumersPerSubscription",
        "consumers per subscription",
        ("-c", "--max-consumers-per-subscription"),
    ),
)
_NAMESPACE_CAPS = (
    _Setting(
        "max-producers-per-topic",
        "maxProducersPerTopic",
        "producers per topic",
        ("-p", "--max-producers-per-topic"),
    ),
    _Setting(
        "max-consumers-per-topic",
        "maxConsumersPerTopic",
        "consumers per topic",
        ("-c", "--max-consumers-per-topic"),
    ),
    _Setting(
        "max-consumers-per-subscription",
        "maxConsumersPerSubscription",
        "consumers per subscription",
        ("-c", "--max-consumers-per-subscription"),
    ),
)


def _settings(admin: AdminClient, args: argparse.Namespace) -> PolicySettings:
    return admin.topics if "://" in args.target else admin.namespaces


def _describe(rest: str, value: Any) -> str:
    if value is None:
        return "not set (the next level's applies)"
    if rest == "retention":
        return (
            f"keep consumed data {value['retentionTimeInMinutes']} min / "
            f"{value['retentionSizeInMB']} MB (-1 = unlimited)"
        )
    if rest == "deduplicationEnabled":
        return "deduplication on" if value else "deduplication off"
    return f"{value}" + (" (no cap)" if value == 0 else "")


def _getter(rest: str) -> Callable[[AdminClient, argparse.Namespace, Printer], None]:
    def get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
        applied = getattr(args, "applied", False)
        value = _settings(admin, args).get_policy(args.target, rest, applied=applied)
        if p.json:
            p.data(value)
        else:
            p.line(f"{args.target}: {_describe(rest, value)}" + (" [applied]" if applied else ""))

    return get


def _remover(rest: str) -> Callable[[AdminClient, argparse.Namespace, Printer], None]:
    def remove(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
        _settings(admin, args).remove_policy(args.target, rest)
        p.done(f"Removed {rest} of {args.target} (the next level's applies).")

    return remove


def _setter(rest: str) -> Callable[[AdminClient, argparse.Namespace, Printer], None]:
    def set_value(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
        if rest == "retention":
            minutes = args.time if args.time < 0 else -(-args.time // 60)
            megabytes = args.size if args.size < 0 else -(-args.size // (1024 * 1024))
            value: Any = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": megabytes}
        elif rest == "deduplicationEnabled":
            value = args.enable
        else:
            value = args.value
        _settings(admin, args).set_policy(args.target, rest, value)
        p.done(f"{rest} of {args.target}: {_describe(rest, value)}.")

    return set_value


def _trio(
    commands: SubParsers,
    command: CommandAdder,
    group: str,
    setting: _Setting,
    target: str,
    example: str,
    set_flags: str,
) -> argparse.ArgumentParser:
    """``set-``, ``get-`` and ``remove-`` commands of one setting; returns the ``set-`` parser."""
    metavar = "TOPIC" if group == "topics" else "NAMESPACE"
    made = {}
    for verb, handler, help_text in (
        ("set", _setter(setting.rest), f"set the {target}'s {setting.what}"),
        ("get", _getter(setting.rest), f"show the {target}'s {setting.what}"),
        ("remove", _remover(setting.rest), f"drop the {target}'s {setting.what}"),
    ):
        name = f"{verb}-{setting.command}"
        flags = set_flags if verb == "set" else ""
        p = command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin {group} {name} {example}{flags}\n",
        )
        p.add_argument("target", metavar=metavar, help=f"the {target}")
        if verb == "get" and group == "topics":
            p.add_argument(
                "--applied",
                action="store_true",
                help="the value in force (topic, namespace, broker)",
            )
        made[verb] = p
    return made["set"]


def add_topic_setting_commands(commands: SubParsers, command: CommandAdder) -> None:
    """Retention, deduplication and the caps of ``braid admin topics``."""
    example, target = "persistent://public/default/events", "persistent or scalable topic"
    retention = _Setting("retention", "retention", "retention")
    p = _trio(commands, command, "topics", retention, target, example, " -t 3h -s 10G")
    p.add_argument("-t", "--time", type=time_seconds, required=True, metavar="TIME")
    p.add_argument("-s", "--size", type=size_bytes, required=True, metavar="SIZE")
    dedup = _Setting("deduplication", "deduplicationEnabled", "deduplication")
    p = _trio(commands, command, "topics", dedup, target, example, " --enable")
    switch = p.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", dest="enable", action="store_true")
    switch.add_argument("-d", "--disable", dest="enable", action="store_false")
    for cap in _TOPIC_CAPS:
        p = _trio(commands, command, "topics", cap, target, example, f" {cap.flag[0]} 5")
        p.add_argument(*cap.flag, dest="value", type=non_negative, required=True, metavar="N")


def add_namespace_cap_commands(commands: SubParsers, command: CommandAdder) -> None:
    """The producer and consumer caps of ``braid admin namespaces``."""
    for cap in _NAMESPACE_CAPS:
        p = _trio(
            commands, command, "namespaces", cap, "namespace", "public/default", f" {cap.flag[0]} 5"
        )
        p.add_argument(*cap.flag, dest="value", type=non_negative, required=True, metavar="N")


__all__ = ["add_namespace_cap_commands", "add_topic_setting_commands"]
