"""``braid admin topics`` commands that inspect a persistent topic and move its subscriptions,
with pulsar-admin's names and flags: ``stats-internal``, ``peek-messages``, ``examine-message``,
``get-message-by-id``, ``reset-cursor``, ``skip``, ``clear-backlog``, ``expire-messages``; and
Braid's ``migrate-to-scalable`` (ADR 0063: move the topic to a scalable topic, ``--status``,
``--rollback``).

What each does is in :mod:`braid.admin.client_topic_admin` (the REST calls) and
:mod:`braid.broker.topic_inspection` / :mod:`braid.broker.subscription_admin` (the broker side).
Message payloads print as text when they are UTF-8, else as hex.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from braid.cli.admin_commands import Printer, _persistent_name
from braid.cli.admin_parser import parse_time, positive
from braid.core.errors import InvalidInputError
from braid.protocol.batch import decode_batch

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from braid.admin.client import AdminClient
    from braid.admin.client_topic_admin import PeekedMessage

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]

_EXAMPLE = "persistent://public/default/events"


def _payload_text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + payload.hex()


def _split(messages: Sequence[PeekedMessage]) -> list[tuple[str, bytes, dict[str, str]]]:
    """Each entry's messages: a batch split (as Pulsar's admin client does), with their ids."""
    out = []
    for m in messages:
        if m.num_messages is None:
            out.append((m.message_id, m.payload, dict(m.properties)))
            continue
        for index, one in enumerate(decode_batch(m.payload, m.num_messages)):
            props = {p.key: p.value for p in one.single.properties} if one.single else {}
            out.append((f"{m.message_id}:{index}", one.payload, props))
    return out


def _show_messages(p: Printer, messages: Sequence[PeekedMessage]) -> None:
    split = _split(messages)
    if p.json:
        p.data(
            [
                {"messageId": mid, "payload": _payload_text(payload), "properties": props}
                for mid, payload, props in split
            ]
        )
        return
    published = {m.message_id: m.headers.get("x-pulsar-publish-time", "") for m in messages}
    for mid, payload, props in split:
        when = published.get(mid) or published.get(mid.rsplit(":", 1)[0], "")
        shown = ", ".join(f"{k}={v}" for k, v in props.items())
        p.line(f"Message ID: {mid}  published {when}" + (f"  [{shown}]" if shown else ""))
        p.line(f"  {_payload_text(payload)}")


def stats_internal(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    stats = admin.topics.internal_stats(_persistent_name(args.topic))
    if p.json:
        p.data(stats)
        return
    p.line(
        f"entries {stats['numberOfEntries']}, {stats['totalSize']} B, last confirmed "
        f"{stats['lastConfirmedEntry']}, state {stats['state']}"
    )
    for ledger in stats["ledgers"]:
        p.line(f"  ledger {ledger['ledgerId']}: {ledger['entries']} entries, {ledger['size']} B")
    for name, cursor in stats["cursors"].items():
        backlog = cursor["numberOfEntriesSinceFirstNotAckedMessage"]
        p.line(
            f"  cursor {name}: mark-delete {cursor['markDeletePosition']}, read "
            f"{cursor['readPosition']}, backlog {backlog}, individually deleted "
            f"{cursor['individuallyDeletedMessages']}"
        )


def peek_messages(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    _show_messages(p, admin.topics.peek_messages(topic, args.subscription, args.count))


def examine_message(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    _show_messages(p, admin.topics.examine_message(topic, args.initial_position, args.position))


def get_message_by_id(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    _show_messages(p, admin.topics.get_message_by_id(topic, args.ledger_id, args.entry_id))


def _message_id(text: str) -> tuple[int, int]:
    parts = text.split(":")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise argparse.ArgumentTypeError(f"expected LEDGER:ENTRY, got {text!r}") from None


def reset_cursor(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    if (args.time is None) == (args.message_id is None):
        raise InvalidInputError("give exactly one of --time and --messageId")
    admin.topics.reset_cursor(
        topic,
        args.subscription,
        timestamp_ms=args.time,
        message_id=args.message_id,
        excluded=args.exclude_message,
    )
    where = (
        f"message {args.message_id[0]}:{args.message_id[1]}"
        if args.message_id
        else (f"time {args.time} ms")
    )
    p.done(f"Reset subscription {args.subscription} of {topic} to {where}.")


def skip(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    admin.topics.skip(topic, args.subscription, args.count)
    p.done(f"Skipped {args.count} message(s) of subscription {args.subscription} of {topic}.")


def clear_backlog(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    admin.topics.clear_backlog(topic, args.subscription)
    p.done(f"Cleared the backlog of subscription {args.subscription} of {topic}.")


def expire_messages(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    if (args.subscription is not None) == args.all_subscriptions:
        raise InvalidInputError("give either --subscription or --all-subscriptions")
    admin.topics.expire_messages(topic, args.subscription, args.expire_time)
    which = "every subscription" if args.subscription is None else args.subscription
    p.done(f"Expired messages older than {args.expire_time} s on {which} of {topic}.")


def migrate_to_scalable(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    topic = _persistent_name(args.topic)
    if args.status and args.rollback:
        raise InvalidInputError("give at most one of --status and --rollback")
    if args.status:
        status = admin.topics.migration_status(topic)
    elif args.rollback:
        status = admin.topics.rollback_migration(topic)
    else:
        modes = {}
        for pair in args.mode or ():
            sub, sep, mode = pair.partition("=")
            if not sep or not sub:
                raise InvalidInputError(f"--mode takes SUBSCRIPTION=STREAM|QUEUE, got {pair!r}")
            modes[sub] = mode
        status = admin.topics.migrate_to_scalable(
            topic,
            segments=args.segments,
            name=args.name,
            subscription_modes=modes,
            prepare=args.prepare,
        )
    if p.json:
        p.data(status)
        return
    left = status["partitionsLeft"]
    p.line(f"{status['source']} -> {status['target']}: {status['phase']}")
    p.line(
        f"  partitions terminated {status['partitionsTerminated']} of {status['partitions']}"
        + (f" (left: {', '.join(str(i) for i in left)})" if left else "")
        + f"; {status['segments']} new segment(s)"
    )
    for name, mode in status["subscriptions"].items():
        p.line(f"  subscription {name}: {mode}")
    p.line(f"  rollback possible: {'yes' if status['canRollBack'] else 'no'}")
    if status.get("failure"):
        p.line(f"  last failure: {status['failure']}")


def add_topic_operation_commands(commands: SubParsers, command: CommandAdder) -> None:
    """Add the inspection and cursor commands to ``braid admin topics``."""
    from braid.cli.admin_backlog import time_seconds

    def topic_command(
        name: str, handler: Callable[..., None], help_text: str, flags: str
    ) -> argparse.ArgumentParser:
        p = command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin topics {name} {_EXAMPLE}{flags}\n",
        )
        p.add_argument("topic", metavar="TOPIC", help="the persistent topic")
        return p

    topic_command(
        "stats-internal", stats_internal, "managed-ledger internals: ledgers, cursors", ""
    )
    p = topic_command(
        "peek-messages",
        peek_messages,
        "show a subscription's next messages without consuming them",
        " -s sub -n 3",
    )
    p.add_argument("-s", "--subscription", required=True)
    p.add_argument("-n", "--count", type=positive, default=1, help="how many (default 1)")
    p = topic_command(
        "examine-message",
        examine_message,
        "show the n-th message from the earliest or the latest",
        " -i earliest -m 1",
    )
    p.add_argument(
        "-i",
        "--initialPosition",
        dest="initial_position",
        choices=("latest", "earliest"),
        default="latest",
    )
    p.add_argument("-m", "--messagePosition", dest="position", type=positive, default=1)
    p = topic_command(
        "get-message-by-id", get_message_by_id, "show the message at a message id", " -l 12 -e 0"
    )
    p.add_argument("-l", "--ledgerId", dest="ledger_id", type=int, required=True)
    p.add_argument("-e", "--entryId", dest="entry_id", type=int, required=True)
    p = topic_command(
        "reset-cursor",
        reset_cursor,
        "move a subscription to a time or a message id (consumers reconnect there)",
        " -s sub -t 10m",
    )
    p.add_argument("-s", "--subscription", required=True)
    p.add_argument("-t", "--time", type=parse_time, help="10m / 2h ago, epoch ms or ISO-8601")
    p.add_argument("-m", "--messageId", dest="message_id", type=_message_id, help="LEDGER:ENTRY")
    p.add_argument(
        "-e",
        "--exclude-message",
        dest="exclude_message",
        action="store_true",
        help="start after --messageId",
    )
    p = topic_command("skip", skip, "acknowledge a subscription's next n messages", " -s sub -n 10")
    p.add_argument("-s", "--subscription", required=True)
    p.add_argument("-n", "--count", type=positive, required=True)
    p = topic_command(
        "clear-backlog", clear_backlog, "acknowledge everything on a subscription", " -s sub"
    )
    p.add_argument("-s", "--subscription", required=True)
    p = topic_command(
        "expire-messages",
        expire_messages,
        "acknowledge messages older than a time",
        " -s sub -t 1h",
    )
    p.add_argument("-s", "--subscription")
    p.add_argument("-a", "--all-subscriptions", dest="all_subscriptions", action="store_true")
    p.add_argument(
        "-t", "--expireTime", dest="expire_time", type=time_seconds, required=True, metavar="TIME"
    )
    p = topic_command(
        "migrate-to-scalable",
        migrate_to_scalable,
        "move the topic (partitioned or not) to a scalable topic, keeping per-key order",
        " --segments 4",
    )
    p.add_argument("--segments", type=positive, help="new segments (default: one per partition)")
    p.add_argument("--name", help="the topic:// name (default: the same name)")
    p.add_argument(
        "--mode",
        action="append",
        metavar="SUB=MODE",
        help="a subscription's mode, STREAM or QUEUE (default: from its type; idle: STREAM)",
    )
    p.add_argument(
        "--prepare", action="store_true", help="stop before terminating anything (rollback-able)"
    )
    p.add_argument("--status", action="store_true", help="only show the migration's status")
    p.add_argument("--rollback", action="store_true", help="roll back (before termination)")


__all__ = ["add_topic_operation_commands"]
