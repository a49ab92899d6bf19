"""``braid admin`` commands for topic compaction, with pulsar-admin's names:

* ``braid admin topics compact | compaction-status`` (trigger a run; show the last run's state);
* ``braid admin namespaces get-compaction-threshold | set-compaction-threshold |
  remove-compaction-threshold`` (the namespace's automatic-compaction threshold in bytes).

:mod:`braid.cli.admin` builds the parser and calls the ``add_*`` functions here with the
helpers of :mod:`braid.cli.admin_parser`, so these commands read and fail like every other
``braid admin`` command.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from braid.cli.admin_commands import Handler, Printer, _persistent_name

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    #: ``admin_parser.command``: (commands, name, handler, help, *, description, examples).
    CommandAdder = Callable[..., argparse.ArgumentParser]
    #: ``admin_parser.topic_arg`` / ``namespace_arg``.
    ArgAdder = Callable[..., None]


def _bytes(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of bytes, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more bytes, got {value}")
    return value


def compact(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.compact(name)
    p.done(f"Compaction of {name} started; see `braid admin topics compaction-status`.")


def compaction_status(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    status = admin.topics.compaction_status(name)
    if p.json:
        p.data(status)
        return
    error = status.get("lastError") or ""
    p.line(f"{name}: compaction {status.get('status')}" + (f" ({error})" if error else ""))


def ns_get_threshold(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    threshold = admin.namespaces.get_compaction_threshold(args.namespace)
    if p.json:
        p.data(threshold)
    elif threshold is None:
        p.line(f"{args.namespace}: compaction threshold not set (the broker's applies)")
    elif threshold == 0:
        p.line(f"{args.namespace}: no automatic compaction (threshold 0)")
    else:
        p.line(f"{args.namespace}: compaction threshold {threshold} bytes")


def ns_set_threshold(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.set_compaction_threshold(args.namespace, args.threshold)
    p.done(f"Compaction threshold {args.threshold} bytes for {args.namespace}.")


def ns_remove_threshold(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.remove_compaction_threshold(args.namespace)
    p.done(f"Removed the compaction threshold of {args.namespace} (the broker's applies).")


def add_topic_compaction_commands(
    commands: SubParsers, command: CommandAdder, topic_arg: ArgAdder
) -> None:
    """Add ``compact`` and ``compaction-status`` to ``braid admin topics``."""
    p = command(
        commands,
        "compact",
        compact,
        "compact a topic: keep the latest message of each key for read-compacted readers",
        examples="  braid admin topics compact persistent://public/default/prices\n",
    )
    topic_arg(p, "persistent topic")
    p = command(
        commands,
        "compaction-status",
        compaction_status,
        "show the state of the topic's last compaction (NOT_RUN, RUNNING, SUCCESS, ERROR)",
        examples="  braid admin topics compaction-status persistent://public/default/prices\n",
    )
    topic_arg(p, "persistent topic")


def add_namespace_compaction_commands(
    commands: SubParsers, command: CommandAdder, namespace_arg: ArgAdder
) -> None:
    """Add the compaction-threshold commands to ``braid admin namespaces``."""
    p = command(
        commands,
        "get-compaction-threshold",
        ns_get_threshold,
        "show the namespace's automatic-compaction threshold",
        examples="  braid admin namespaces get-compaction-threshold public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "set-compaction-threshold",
        ns_set_threshold,
        "compact a topic once it holds this many bytes after its last compaction (0: never)",
        examples="  braid admin namespaces set-compaction-threshold public/default 104857600\n",
    )
    namespace_arg(p)
    p.add_argument("threshold", type=_bytes, metavar="BYTES", help="0 or more bytes")
    p = command(
        commands,
        "remove-compaction-threshold",
        ns_remove_threshold,
        "drop the namespace's threshold (brokerServiceCompactionThresholdInBytes applies)",
        examples="  braid admin namespaces remove-compaction-threshold public/default\n",
    )
    namespace_arg(p)


HANDLERS: tuple[Handler, ...] = (
    compact,
    compaction_status,
    ns_get_threshold,
    ns_set_threshold,
    ns_remove_threshold,
)

__all__ = ["HANDLERS", "add_namespace_compaction_commands", "add_topic_compaction_commands"]
