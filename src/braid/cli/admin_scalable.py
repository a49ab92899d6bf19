"""``braid admin scalable-topics`` and ``braid admin segments``: the parser of the scalable-topic
groups (PIP-468's two tables); what each command does is in :mod:`braid.cli.admin_commands`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from braid.cli import admin_commands as cmd
from braid.cli.admin_parser import (
    Builder,
    command,
    hash_value,
    key_value,
    namespace_arg,
    parse_time,
    policy_args,
    positive,
    segment_id,
    topic_arg,
)

if TYPE_CHECKING:
    #: One group's commands (what :meth:`Builder.group` returns).
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_scalable_topics_group(builder: Builder) -> None:
    """``braid admin scalable-topics``: the topic, subscription, split/merge and auto-scale
    policy commands."""
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
    _add_topic_commands(commands)
    _add_subscription_commands(commands)
    _add_split_merge_commands(commands)
    _add_auto_scale_policy_commands(commands)


def _add_topic_commands(commands: SubParsers) -> None:
    """list, create, get, stats, delete."""
    p = command(
        commands,
        "list",
        cmd.st_list,
        "list the scalable topics of a namespace",
        examples="  braid admin scalable-topics list\n"
        "  braid admin scalable-topics list acme/orders\n",
    )
    namespace_arg(p, optional=True)

    p = command(
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
    topic_arg(p)
    p.add_argument(
        "--segments", "-s", type=positive, default=1, help="initial segments (default 1)"
    )
    p.add_argument(
        "--property",
        "-p",
        dest="properties",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic property (repeatable); namespace watches can filter on properties",
    )

    p = command(
        commands,
        "get",
        cmd.st_get,
        "show the segment DAG (ScalableTopicMetadata)",
        description="Show the topic's layout: epoch, properties and every segment (active and "
        "sealed) as a tree, roots first, children under their parents. --output json prints "
        "the ScalableTopicMetadata document.",
        examples="  braid admin scalable-topics get topic://public/default/orders\n",
    )
    topic_arg(p)

    p = command(
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
    topic_arg(p)

    p = command(
        commands,
        "delete",
        cmd.st_delete,
        "delete a scalable topic, its segments and subscriptions",
        description="Delete the topic, every segment topic and all its subscriptions. Refused "
        "(409) while producers or consumers are connected, unless --force.",
        examples="  braid admin scalable-topics delete topic://public/default/orders\n",
    )
    topic_arg(p)
    p.add_argument("--force", action="store_true", help="disconnect connected clients")


def _add_subscription_commands(commands: SubParsers) -> None:
    """create-subscription, delete-subscription, seek."""
    p = command(
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
    topic_arg(p)
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

    p = command(
        commands,
        "delete-subscription",
        cmd.st_delete_subscription,
        "delete a subscription from every segment (its consumers are unregistered)",
        examples="  braid admin scalable-topics delete-subscription orders billing\n",
    )
    topic_arg(p)
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription name")

    p = command(
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
    topic_arg(p)
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription name")
    p.add_argument(
        "--time",
        required=True,
        type=parse_time,
        help="epoch ms, a duration ago (30s, 10m, 2h, 1d, 1w) or ISO-8601 (local time "
        "without a zone)",
    )


def _add_split_merge_commands(commands: SubParsers) -> None:
    """split, merge."""
    p = command(
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
    topic_arg(p)
    p.add_argument("segment", metavar="SEGMENT_ID", type=segment_id, help="an active segment")
    p.add_argument(
        "--split-hash",
        type=hash_value,
        default=None,
        metavar="HASH",
        help="first hash of the upper child (decimal or 0x-hex; default: the midpoint)",
    )

    p = command(
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
    topic_arg(p)
    p.add_argument(
        "segments", metavar="SEGMENT_ID", type=segment_id, nargs="+", help="two or more ids"
    )


def _add_auto_scale_policy_commands(commands: SubParsers) -> None:
    """set-, get-, remove-auto-scale-policy (PIP-483's topic override)."""
    p = command(
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
    topic_arg(p)
    policy_args(p)
    p = command(
        commands,
        "get-auto-scale-policy",
        cmd.st_get_policy,
        "show the topic's auto-scale override (stats shows the effective policy)",
        examples="  braid admin scalable-topics get-auto-scale-policy orders\n",
    )
    topic_arg(p)
    p = command(
        commands,
        "remove-auto-scale-policy",
        cmd.st_remove_policy,
        "drop the topic's auto-scale override (the namespace's or broker's applies)",
        examples="  braid admin scalable-topics remove-auto-scale-policy orders\n",
    )
    topic_arg(p)


__all__ = ["add_scalable_topics_group"]
