"""``braid admin``: manage a running Braid broker through its admin REST API.

Groups mirror the API: ``scalable-topics`` (``topic://``: create, split, merge, subscriptions,
stats as a DAG tree), ``segments`` (``segment://``, the controller's tools), ``tenants``,
``namespaces`` and ``topics`` (``persistent://``), ``schemas``, ``bookie-clusters`` (PIP-470
storage-cluster switching), plus ``health``. This module builds the
argument parser (help with examples at every level) and runs a command; what each command does
with :class:`braid.admin.client.AdminClient` and how it prints the answer (tables by default,
``--output json`` for scripts) is in :mod:`braid.cli.admin_commands`.

Errors print one line on stderr — ``braid admin: error: <reason> (HTTP 404)`` — and exit 1;
usage errors exit 2 (argparse). The parser is built without importing httpx; the client is
imported only when a command runs, so ``braid --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import sys
import time
from typing import Any, TextIO

from braid.cli import admin_bookie_clusters, admin_compaction, admin_compat
from braid.cli import admin_commands as cmd
from braid.core.errors import BraidError

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "BRAID_ADMIN_URL"


_RAW = argparse.RawDescriptionHelpFormatter


# --- parser --------------------------------------------------------------------------------------

_ADMIN_DESCRIPTION = """\
Manage a running Braid broker through its admin REST API (/admin/v2).

command groups:
  scalable-topics  topic:// topics: create with N segments, split, merge, subscriptions, stats
  segments         segment:// topics of a scalable topic (the controller's tools)
  tenants          tenants, their admin roles and allowed clusters
  namespaces       namespaces (tenant/namespace) and their policies (deduplication, schema
                   compatibility strategy, ...)
  topics           classic persistent:// topics, partitioned or not
  schemas          a topic's schema versions: get, upload, delete
  bookie-clusters  storage clusters: register, precheck, switch, status, rollback, cleanup
  health           is a broker answering at --url?

Run `braid admin <group> --help` for the commands of a group.
"""

_ADMIN_EPILOG = f"""\
connection and output (accepted before or after the command):
  --url URL         the broker's admin API (default ${URL_ENV}, else {DEFAULT_URL})
  --output table    aligned columns and a DAG tree, for people (default)
  --output json     the API's JSON answer, for scripts (nothing for commands without an answer)

exit codes: 0 success, 1 the broker refused or could not be reached (one line on stderr:
`braid admin: error: <reason> (HTTP <status>)`), 2 invalid arguments.

examples:
  braid admin scalable-topics create topic://public/default/orders --segments 4
  braid admin scalable-topics split topic://public/default/orders 1
  braid admin scalable-topics merge topic://public/default/orders 3 4 5
  braid admin scalable-topics stats topic://public/default/orders
  braid admin --url http://broker-2:8080 --output json scalable-topics get orders
  {URL_ENV}=http://broker-2:8080 braid admin tenants list
"""


def _add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--url",
        default=default,
        help=f"admin API base URL (default ${URL_ENV}, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table" if top else argparse.SUPPRESS,
        help="table (default) or json",
    )


class _Builder:
    """Adds groups and commands with the common options, help and examples."""

    def __init__(self, admin: argparse.ArgumentParser) -> None:
        self.groups = admin.add_subparsers(dest="admin_group", metavar="GROUP")

    def group(
        self, name: str, help_text: str, description: str, examples: str
    ) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        parser = self.groups.add_parser(
            name,
            help=help_text,
            description=description,
            epilog="examples:\n" + examples,
            formatter_class=_RAW,
        )
        _add_common(parser)
        parser.set_defaults(group_parser=parser)
        return parser.add_subparsers(dest="admin_command", metavar="COMMAND")


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: cmd.Handler,
    help_text: str,
    *,
    description: str | None = None,
    examples: str = "",
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name,
        help=help_text,
        description=description or help_text[:1].upper() + help_text[1:] + ".",
        epilog=("examples:\n" + examples) if examples else None,
        formatter_class=_RAW,
    )
    _add_common(parser)
    parser.set_defaults(handler=handler)
    return parser


def _topic_arg(parser: argparse.ArgumentParser, what: str = "scalable topic") -> None:
    parser.add_argument(
        "topic",
        metavar="TOPIC",
        help=f"the {what}: full name, tenant/namespace/name, or name (= public/default/name)",
    )


def _namespace_arg(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    if optional:
        parser.add_argument(
            "namespace",
            metavar="NAMESPACE",
            nargs="?",
            default="public/default",
            help="tenant/namespace (default public/default)",
        )
    else:
        parser.add_argument("namespace", metavar="NAMESPACE", help="tenant/namespace")


def _segment_id(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a segment id is a decimal integer, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a segment id is >= 0, got {value}")
    return value


def _hash(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a hash is an integer, decimal or 0x-hex (0x9c40), got {text!r}"
        ) from None
    if not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"a hash is in 0..0xffff, got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _on_off(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("on", "true", "yes", "enable", "enabled", "1"):
        return True
    if lowered in ("off", "false", "no", "disable", "disabled", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a property is KEY=VALUE, got {text!r}")
    return key, value


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds: ``1735689600000`` (epoch ms), ``10m`` / ``2h`` /
    ``1d`` (that long ago; units ms s m h d w), or ISO-8601 ``2025-01-01T12:00:00Z`` (without
    a zone: local time).

    Raises:
        argparse.ArgumentTypeError: none of these.
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if match is not None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0, now - int(match.group(1)) * _UNIT_MS[match.group(2)])
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected epoch milliseconds, a duration ago (10m, 2h, 1d) or an ISO-8601 time "
            f"(2025-01-01T12:00:00Z), got {text!r}"
        ) from None
    return max(0, int(stamp.timestamp() * 1000))


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``braid admin`` and its command tree to the ``braid`` parser."""
    admin = commands.add_parser(
        "admin",
        help="manage a running broker: scalable topics, segments, tenants, namespaces, topics",
        description=_ADMIN_DESCRIPTION,
        epilog=_ADMIN_EPILOG,
        formatter_class=_RAW,
    )
    _add_common(admin, top=True)
    admin.set_defaults(group_parser=admin)
    builder = _Builder(admin)
    _add_scalable_topics(builder)
    _add_segments(builder)
    _add_tenants(builder)
    _add_namespaces(builder)
    _add_topics(builder)
    admin_compat.add_schemas_group(builder.group, _command, _topic_arg)
    admin_bookie_clusters.add_bookie_clusters_group(builder.group, _command)
    health = builder.groups.add_parser(
        "health",
        help="check that a broker answers at --url (and reaches its metadata store)",
        description="Check that a broker answers at --url: GET /health (the process) and "
        "GET /admin/v2/brokers/health (a round trip to its metadata store).",
        epilog="examples:\n  braid admin health\n"
        "  braid admin --url http://127.0.0.1:8081 health\n",
        formatter_class=_RAW,
    )
    _add_common(health)
    health.set_defaults(handler=cmd.health)


def _add_scalable_topics(builder: _Builder) -> None:
    commands = builder.group(
        "scalable-topics",
        "topic:// topics: create, split, merge, subscriptions, stats",
        "Scalable topics (topic://tenant/ns/name): a DAG of hash-range segments that split when "
        "hot and merge when cold while every key keeps its order. Mutations go to the topic's "
        "controller leader (any broker forwards them).",
        """\
  braid admin scalable-topics list public/default
  braid admin scalable-topics create topic://public/default/orders --segments 4
  braid admin scalable-topics get topic://public/default/orders
  braid admin scalable-topics split topic://public/default/orders 1
  braid admin scalable-topics split topic://public/default/orders 1 --split-hash 0x9c40
  braid admin scalable-topics merge topic://public/default/orders 3 4 5
  braid admin scalable-topics create-subscription orders billing --initial-position earliest
  braid admin scalable-topics stats topic://public/default/orders
  braid admin scalable-topics set-auto-scale-policy orders --max-segments 16 --split-cooldown 30s
  braid admin scalable-topics delete topic://public/default/orders --force
""",
    )
    p = _command(
        commands,
        "list",
        cmd.st_list,
        "list the scalable topics of a namespace",
        examples="  braid admin scalable-topics list\n"
        "  braid admin scalable-topics list acme/orders\n",
    )
    _namespace_arg(p, optional=True)

    p = _command(
        commands,
        "create",
        cmd.st_create,
        "create a scalable topic with N equal initial segments",
        description="Create a scalable topic. Its hash space 0x0000-0xffff is cut into "
        "--segments equal ranges, one segment:// topic each. The namespace must exist.",
        examples="""\
  braid admin scalable-topics create topic://public/default/orders --segments 4
  braid admin scalable-topics create acme/shop/events --property team=payments
""",
    )
    _topic_arg(p)
    p.add_argument(
        "--segments", "-s", type=_positive, default=1, help="initial segments (default 1)"
    )
    p.add_argument(
        "--property",
        "-p",
        dest="properties",
        type=_property,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic property (repeatable); namespace watches can filter on properties",
    )

    p = _command(
        commands,
        "get",
        cmd.st_get,
        "show the segment DAG (ScalableTopicMetadata)",
        description="Show the topic's layout: epoch, properties and every segment (active and "
        "sealed) as a tree, roots first, children under their parents. --output json prints "
        "the ScalableTopicMetadata document.",
        examples="  braid admin scalable-topics get topic://public/default/orders\n",
    )
    _topic_arg(p)

    p = _command(
        commands,
        "stats",
        cmd.st_stats,
        "the DAG with per-segment stats, subscriptions, consumers, controller",
        description="Show the topic's state as its controller leader sees it: the segment DAG "
        "as a tree with each segment's message counters (and rates when reported), storage "
        "and backlog per subscription; then the subscriptions with their consumers and "
        "assigned segments; then the controller (leader, operation in flight, last split "
        "and merge).",
        examples="""\
  braid admin scalable-topics stats topic://public/default/orders
  braid admin -o json scalable-topics stats orders | jq '.segments["0"].topicStats'
""",
    )
    _topic_arg(p)

    p = _command(
        commands,
        "delete",
        cmd.st_delete,
        "delete a scalable topic, its segments and subscriptions",
        description="Delete the topic, every segment topic and all its subscriptions. Refused "
        "(409) while producers or consumers are connected, unless --force.",
        examples="  braid admin scalable-topics delete topic://public/default/orders\n",
    )
    _topic_arg(p)
    p.add_argument("--force", action="store_true", help="disconnect connected clients")

    p = _command(
        commands,
        "create-subscription",
        cmd.st_create_subscription,
        "create a subscription on every segment",
        description="Create a subscription with a cursor on every segment. STREAM (ordered: "
        "the controller assigns segments to consumers and hands a child segment out only after "
        "its ancestors are drained), QUEUE (every consumer reads every segment, acks one by "
        "one) or CHECKPOINT (positions kept by the application).",
        examples="""\
  braid admin scalable-topics create-subscription orders billing
  braid admin scalable-topics create-subscription orders audit --type QUEUE \\
      --initial-position earliest
""",
    )
    _topic_arg(p)
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription name")
    p.add_argument(
        "--type",
        "-t",
        dest="subscription_type",
        type=str.upper,
        choices=("STREAM", "QUEUE", "CHECKPOINT"),
        default="STREAM",
        help="subscription type (default STREAM)",
    )
    p.add_argument(
        "--initial-position",
        type=str.lower,
        choices=("earliest", "latest"),
        default="latest",
        help="where new cursors start: latest = only new messages (default), earliest = "
        "everything retained",
    )

    p = _command(
        commands,
        "delete-subscription",
        cmd.st_delete_subscription,
        "delete a subscription from every segment (its consumers are unregistered)",
        examples="  braid admin scalable-topics delete-subscription orders billing\n",
    )
    _topic_arg(p)
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription name")

    p = _command(
        commands,
        "seek",
        cmd.st_seek,
        "move a subscription to a point in time on every segment",
        description="Move the subscription on every segment to the first message published at "
        "or after --time. Segments sealed before that time are skipped; segments created after "
        "it are read from their start. Ordered consumers are reassigned accordingly.",
        examples="""\
  braid admin scalable-topics seek orders billing --time 1h            # an hour ago
  braid admin scalable-topics seek orders billing --time 2025-01-01T00:00:00Z
  braid admin scalable-topics seek orders billing --time 1735689600000  # epoch ms
""",
    )
    _topic_arg(p)
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription name")
    p.add_argument(
        "--time",
        required=True,
        type=parse_time,
        help="epoch ms, a duration ago (30s, 10m, 2h, 1d, 1w) or ISO-8601 (local time "
        "without a zone)",
    )

    p = _command(
        commands,
        "split",
        cmd.st_split,
        "split an active segment in two (at its midpoint or at --split-hash)",
        description="Split an active segment into two children: the parent is sealed, "
        "producers move to the children, and every subscription keeps per-key order. Prints "
        "the new layout.",
        examples="""\
  braid admin scalable-topics split topic://public/default/orders 1
  braid admin scalable-topics split topic://public/default/orders 1 --split-hash 0x9c40
""",
    )
    _topic_arg(p)
    p.add_argument("segment", metavar="SEGMENT_ID", type=_segment_id, help="an active segment")
    p.add_argument(
        "--split-hash",
        type=_hash,
        default=None,
        metavar="HASH",
        help="first hash of the upper child (decimal or 0x-hex; default: the midpoint)",
    )

    p = _command(
        commands,
        "merge",
        cmd.st_merge,
        "merge two or more hash-adjacent active segments into one",
        description="Merge two or more active segments whose hash ranges are adjacent into one "
        "child: the parents are sealed and producers move to the child. Prints the new layout.",
        examples="""\
  braid admin scalable-topics merge topic://public/default/orders 3 4
  braid admin scalable-topics merge topic://public/default/orders 3 4 5
""",
    )
    _topic_arg(p)
    p.add_argument(
        "segments", metavar="SEGMENT_ID", type=_segment_id, nargs="+", help="two or more ids"
    )

    p = _command(
        commands,
        "set-auto-scale-policy",
        cmd.st_set_policy,
        "override the auto split/merge policy of one topic (PIP-483)",
        description="Set the topic's AutoScalePolicyOverride: every setting is optional and an "
        "unset one falls through to the namespace's override, then broker.conf. The result is "
        "checked after resolution (split thresholds above merge thresholds, min <= max "
        "segments). Setting replaces the topic's previous override.",
        examples="""\
  braid admin scalable-topics set-auto-scale-policy orders --enabled off
  braid admin scalable-topics set-auto-scale-policy orders --max-segments 16 \\
      --split-msg-rate-in-threshold 2000 --merge-msg-rate-in-threshold 200 --split-cooldown 30s
  braid admin scalable-topics set-auto-scale-policy orders --json '{"maxSegments": 8}'
""",
    )
    _topic_arg(p)
    _policy_args(p)
    p = _command(
        commands,
        "get-auto-scale-policy",
        cmd.st_get_policy,
        "show the topic's auto-scale override (stats shows the effective policy)",
        examples="  braid admin scalable-topics get-auto-scale-policy orders\n",
    )
    _topic_arg(p)
    p = _command(
        commands,
        "remove-auto-scale-policy",
        cmd.st_remove_policy,
        "drop the topic's auto-scale override (the namespace's or broker's applies)",
        examples="  braid admin scalable-topics remove-auto-scale-policy orders\n",
    )
    _topic_arg(p)


_KIND_METAVAR = {
    "bool": "on|off",
    "int": "N",
    "duration": "DURATION",
    "rate": "PER_SECOND",
    "bytes": "BYTES",
    "fraction": "FRACTION",
}
_KIND_HELP = {
    "duration": " (30s, 5m, 250ms; a bare number is seconds)",
    "bytes": " per second (50MB, 64MiB or bytes)",
    "fraction": " (25%% or 0.25)",
    "rate": " per second",
}


def _policy_args(parser: argparse.ArgumentParser) -> None:
    """One flag per PIP-483 knob (from the policy's knob table), plus --json."""
    from braid.core.autoscale_policy import KNOBS

    group = parser.add_argument_group("policy settings (each optional)")
    for knob in KNOBS:
        name = knob.json_key.removesuffix("Ms")
        flag = "--" + "".join("-" + c.lower() if c.isupper() else c for c in name)
        group.add_argument(
            flag,
            dest=f"knob_{knob.field}",
            metavar=_KIND_METAVAR[knob.kind],
            default=None,
            help=f"{knob.conf_key} for this level{_KIND_HELP.get(knob.kind, '')}",
        )
    group.add_argument(
        "--json",
        dest="policy_json",
        metavar="DOC",
        default=None,
        help="the override as JSON (camelCase keys, durations in ms); flags win over it",
    )


def _add_segments(builder: _Builder) -> None:
    commands = builder.group(
        "segments",
        "segment:// topics of a scalable topic (the controller's tools)",
        "Segment topics (segment://tenant/ns/name/<start>-<end>-<id>, e.g. "
        "segment://public/default/orders/0000-7fff-0). The controller creates, seals and deletes "
        "them during splits and merges; changing one by hand leaves the topic's layout pointing "
        "at it, so prefer `scalable-topics split` and `merge`. `scalable-topics stats` lists "
        "each segment's name.",
        """\
  braid admin segments create segment://public/default/orders/0000-7fff-0 --subscription billing
  braid admin segments terminate segment://public/default/orders/0000-7fff-0
  braid admin segments delete segment://public/default/orders/0000-7fff-0
""",
    )
    p = _command(
        commands,
        "create",
        cmd.seg_create,
        "create a segment topic with cursors at its start",
        examples="  braid admin segments create segment://public/default/orders/0000-7fff-0 "
        "-S billing -S audit\n",
    )
    p.add_argument("segment", metavar="SEGMENT", help="segment://tenant/ns/name/<descriptor>")
    p.add_argument(
        "--subscription",
        "-S",
        dest="subscriptions",
        action="append",
        default=[],
        help="create this subscription's cursor at the start (repeatable)",
    )
    p = _command(
        commands,
        "terminate",
        cmd.seg_terminate,
        "seal a segment topic (producers get TopicTerminated)",
        examples="  braid admin segments terminate segment://public/default/orders/0000-7fff-0\n",
    )
    p.add_argument("segment", metavar="SEGMENT", help="segment://tenant/ns/name/<descriptor>")
    p = _command(
        commands,
        "delete",
        cmd.seg_delete,
        "delete a segment topic and its data",
        examples="  braid admin segments delete segment://public/default/orders/0000-7fff-0\n",
    )
    p.add_argument("segment", metavar="SEGMENT", help="segment://tenant/ns/name/<descriptor>")


def _add_tenants(builder: _Builder) -> None:
    commands = builder.group(
        "tenants",
        "tenants: list, get, create, update, delete",
        "Tenants: the top level of names (tenant/namespace/topic), with admin roles and the "
        "clusters they may use.",
        """\
  braid admin tenants list
  braid admin tenants create acme --admin-role ops
  braid admin tenants update acme --admin-role ops --admin-role dev
  braid admin tenants delete acme
""",
    )
    _command(
        commands,
        "list",
        cmd.tenants_list,
        "list tenants",
        examples="  braid admin tenants list\n",
    )
    p = _command(
        commands,
        "get",
        cmd.tenants_get,
        "show a tenant",
        examples="  braid admin tenants get acme\n",
    )
    p.add_argument("tenant", metavar="TENANT")
    for name, handler, help_text, example in (
        ("create", cmd.tenants_create, "create a tenant", "create acme --admin-role ops"),
        (
            "update",
            cmd.tenants_update,
            "change a tenant's admin roles or allowed clusters (the others are kept)",
            "update acme --allowed-cluster standalone",
        ),
    ):
        p = _command(
            commands, name, handler, help_text, examples=f"  braid admin tenants {example}\n"
        )
        p.add_argument("tenant", metavar="TENANT")
        p.add_argument(
            "--admin-role",
            dest="admin_roles",
            action="append",
            default=None,
            help="an admin role (repeatable)",
        )
        p.add_argument(
            "--allowed-cluster",
            dest="allowed_clusters",
            action="append",
            default=None,
            help="a cluster the tenant may use (repeatable; default the broker's cluster)",
        )
    p = _command(
        commands,
        "delete",
        cmd.tenants_delete,
        "delete a tenant without namespaces",
        examples="  braid admin tenants delete acme\n",
    )
    p.add_argument("tenant", metavar="TENANT")


def _add_namespaces(builder: _Builder) -> None:
    commands = builder.group(
        "namespaces",
        "namespaces and their policies",
        "Namespaces (tenant/namespace) group topics and carry policies: deduplication, "
        "auto topic creation, retention, the scalable-topic auto-scale policy.",
        """\
  braid admin namespaces list public
  braid admin namespaces create acme/orders --deduplication on
  braid admin namespaces create acme/logs --policies '{"retention_policies": \
{"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}'
  braid admin namespaces get acme/orders
  braid admin namespaces set-deduplication acme/orders off
  braid admin namespaces set-scalable-topic-auto-scale-policy acme/orders --max-segments 8
  braid admin namespaces delete acme/orders
""",
    )
    p = _command(
        commands,
        "list",
        cmd.ns_list,
        "list a tenant's namespaces",
        examples="  braid admin namespaces list public\n",
    )
    p.add_argument("tenant", metavar="TENANT")
    p = _command(
        commands,
        "get",
        cmd.ns_get,
        "show a namespace's policies",
        examples="  braid admin namespaces get public/default\n",
    )
    _namespace_arg(p)
    p = _command(
        commands,
        "create",
        cmd.ns_create,
        "create a namespace (optionally with policies)",
        examples="""\
  braid admin namespaces create acme/orders
  braid admin namespaces create acme/orders --deduplication on
  braid admin namespaces create acme/orders --policies '{"autoTopicCreationOverride": \
{"allowAutoTopicCreation": false, "topicType": "non-partitioned"}}'
""",
    )
    _namespace_arg(p)
    p.add_argument("--deduplication", type=_on_off, default=None, metavar="on|off")
    p.add_argument("--policies", default=None, metavar="JSON", help="Pulsar Policies JSON object")
    p = _command(
        commands,
        "delete",
        cmd.ns_delete,
        "delete a namespace without topics",
        examples="  braid admin namespaces delete acme/orders\n",
    )
    _namespace_arg(p)
    p = _command(
        commands,
        "get-deduplication",
        cmd.ns_get_dedup,
        "show the namespace's deduplication setting",
        examples="  braid admin namespaces get-deduplication public/default\n",
    )
    _namespace_arg(p)
    p = _command(
        commands,
        "set-deduplication",
        cmd.ns_set_dedup,
        "turn deduplication on or off for the namespace",
        description="Turn message deduplication on or off for every topic of the namespace "
        "(retried publishes with the same producer name and sequence id are stored once).",
        examples="  braid admin namespaces set-deduplication public/default on\n",
    )
    _namespace_arg(p)
    p.add_argument("enabled", metavar="on|off", type=_on_off)
    p = _command(
        commands,
        "remove-deduplication",
        cmd.ns_remove_dedup,
        "drop the namespace's deduplication setting (the broker default applies)",
        examples="  braid admin namespaces remove-deduplication public/default\n",
    )
    _namespace_arg(p)
    p = _command(
        commands,
        "set-scalable-topic-auto-scale-policy",
        cmd.ns_set_policy,
        "override the auto split/merge policy of the namespace's scalable topics (PIP-483)",
        description="Set the namespace's AutoScalePolicyOverride: every setting is optional; "
        "unset ones fall through to broker.conf, and a topic's own override wins over this one. "
        "Checked against broker.conf (split thresholds above merge thresholds, min <= max).",
        examples="""\
  braid admin namespaces set-scalable-topic-auto-scale-policy acme/orders --enabled off
  braid admin namespaces set-scalable-topic-auto-scale-policy public/default --max-segments 8
""",
    )
    _namespace_arg(p)
    _policy_args(p)
    p = _command(
        commands,
        "get-scalable-topic-auto-scale-policy",
        cmd.ns_get_policy,
        "show the namespace's auto-scale override",
        examples="  braid admin namespaces get-scalable-topic-auto-scale-policy public/default\n",
    )
    _namespace_arg(p)
    p = _command(
        commands,
        "remove-scalable-topic-auto-scale-policy",
        cmd.ns_remove_policy,
        "drop the namespace's auto-scale override (broker.conf applies)",
        examples="  braid admin namespaces remove-scalable-topic-auto-scale-policy acme/orders\n",
    )
    _namespace_arg(p)
    admin_compat.add_schema_strategy_commands(commands, _command, _namespace_arg)
    admin_compaction.add_namespace_compaction_commands(commands, _command, _namespace_arg)


def _add_topics(builder: _Builder) -> None:
    commands = builder.group(
        "topics",
        "persistent:// topics: list, create, delete, terminate, stats",
        "Classic Pulsar topics (persistent://tenant/ns/name), served as they are by Braid.",
        """\
  braid admin topics list public/default
  braid admin topics create persistent://public/default/events
  braid admin topics stats persistent://public/default/events
  braid admin topics terminate persistent://public/default/events
  braid admin topics delete persistent://public/default/events
""",
    )
    p = _command(
        commands,
        "list",
        cmd.topics_list,
        "list a namespace's persistent topics",
        examples="  braid admin topics list public/default\n",
    )
    _namespace_arg(p, optional=True)
    for name, handler, help_text in (
        ("create", cmd.topics_create, "create a non-partitioned topic"),
        ("delete", cmd.topics_delete, "delete a topic"),
        (
            "terminate",
            cmd.topics_terminate,
            "seal a topic: no more writes; prints its last message id",
        ),
        (
            "stats",
            cmd.topics_stats,
            "counters, storage, subscriptions (backlog) and publishers",
        ),
    ):
        p = _command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin topics {name} persistent://public/default/events\n",
        )
        _topic_arg(p, "persistent topic")
    admin_compat.add_partitioned_topic_commands(commands, _command, _topic_arg, _namespace_arg)
    admin_compaction.add_topic_compaction_commands(commands, _command, _topic_arg)


# --- entry point ---------------------------------------------------------------------------------


def run_admin(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    """Run the parsed ``braid admin`` command; returns the exit code."""
    handler: cmd.Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser: argparse.ArgumentParser | None = getattr(args, "group_parser", None)
        if parser is not None:
            parser.print_help(sys.stderr)
        return 2
    from braid.admin.client import AdminClient

    url = args.url or os.environ.get(URL_ENV) or DEFAULT_URL
    printer = cmd.Printer(args.output, stdout or sys.stdout)
    try:
        with AdminClient(url) as admin:
            handler(admin, args, printer)
    except BraidError as exc:
        print(f"braid admin: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("braid admin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head -1`): stop quietly, and keep the interpreter's
        # final flush of stdout from failing again.
        if stdout is None:
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


__all__ = ["DEFAULT_URL", "URL_ENV", "add_admin_parser", "parse_time", "run_admin"]
