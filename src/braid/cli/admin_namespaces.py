"""``braid admin namespaces``: the parser of the namespace group (namespaces and their policies,
with the schema-strategy and compaction-threshold commands of :mod:`braid.cli.admin_compat` and
:mod:`braid.cli.admin_compaction`); what each command does is in
:mod:`braid.cli.admin_commands`."""

from __future__ import annotations

import argparse

from braid.cli import (
    admin_backlog,
    admin_bundles,
    admin_compaction,
    admin_compat,
    admin_permissions,
    admin_policy_settings,
)
from braid.cli import admin_commands as cmd
from braid.cli.admin_parser import (
    Builder,
    command,
    namespace_arg,
    on_off,
    policy_args,
)


def add_namespaces_group(builder: Builder) -> None:
    """``braid admin namespaces``: namespaces and their policies."""
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
    p = command(
        commands,
        "list",
        cmd.ns_list,
        "list a tenant's namespaces",
        examples="  braid admin namespaces list public\n",
    )
    p.add_argument("tenant", metavar="TENANT")
    p = command(
        commands,
        "get",
        cmd.ns_get,
        "show a namespace's policies",
        examples="  braid admin namespaces get public/default\n",
    )
    namespace_arg(p)
    p = command(
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
    namespace_arg(p)
    p.add_argument("--deduplication", type=on_off, default=None, metavar="on|off")
    p.add_argument("--policies", default=None, metavar="JSON", help="Pulsar Policies JSON object")
    p = command(
        commands,
        "delete",
        cmd.ns_delete,
        "delete a namespace without topics",
        examples="  braid admin namespaces delete acme/orders\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "get-deduplication",
        cmd.ns_get_dedup,
        "show the namespace's deduplication setting",
        examples="  braid admin namespaces get-deduplication public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "set-deduplication",
        cmd.ns_set_dedup,
        "turn deduplication on or off for the namespace",
        description="Turn message deduplication on or off for every topic of the namespace "
        "(retried publishes with the same producer name and sequence id are stored once).",
        examples="  braid admin namespaces set-deduplication public/default on\n",
    )
    namespace_arg(p)
    p.add_argument("enabled", metavar="on|off", type=on_off)
    p = command(
        commands,
        "remove-deduplication",
        cmd.ns_remove_dedup,
        "drop the namespace's deduplication setting (the broker default applies)",
        examples="  braid admin namespaces remove-deduplication public/default\n",
    )
    namespace_arg(p)
    p = command(
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
    namespace_arg(p)
    policy_args(p)
    p = command(
        commands,
        "get-scalable-topic-auto-scale-policy",
        cmd.ns_get_policy,
        "show the namespace's auto-scale override",
        examples="  braid admin namespaces get-scalable-topic-auto-scale-policy public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "remove-scalable-topic-auto-scale-policy",
        cmd.ns_remove_policy,
        "drop the namespace's auto-scale override (broker.conf applies)",
        examples="  braid admin namespaces remove-scalable-topic-auto-scale-policy acme/orders\n",
    )
    namespace_arg(p)
    _add_persistence_commands(commands)
    admin_compat.add_schema_strategy_commands(commands, command, namespace_arg)
    admin_compaction.add_namespace_compaction_commands(commands, command, namespace_arg)
    admin_backlog.add_namespace_backlog_commands(commands, command, namespace_arg)
    admin_bundles.add_namespace_bundle_commands(commands, command, namespace_arg)
    admin_permissions.add_namespace_permission_commands(commands, command, namespace_arg)
    admin_policy_settings.add_namespace_cap_commands(commands, command)


def _add_persistence_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """``set-persistence``, ``get-persistence``, ``remove-persistence`` (Pulsar's flags)."""
    p = command(
        commands,
        "set-persistence",
        cmd.ns_set_persistence,
        "set the ensemble and quorums of the namespace's ledgers",
        description="Set the namespace's persistence policies: each new ledger of its topics "
        "and cursors is striped over ENSEMBLE bookies, every entry stored on WRITE_QUORUM of "
        "them and acknowledged once ACK_QUORUM have it on disk (ensemble >= write quorum >= ack "
        "quorum >= 1). Loaded topics apply it from their next ledger.",
        examples="  braid admin namespaces set-persistence public/default -e 3 -w 2 -a 2\n",
    )
    namespace_arg(p)
    p.add_argument("-e", "--bookkeeper-ensemble", type=int, required=True, metavar="N")
    p.add_argument("-w", "--bookkeeper-write-quorum", type=int, required=True, metavar="N")
    p.add_argument("-a", "--bookkeeper-ack-quorum", type=int, required=True, metavar="N")
    p.add_argument("-r", "--ml-mark-delete-max-rate", type=float, default=0.0, metavar="RATE")
    p = command(
        commands,
        "get-persistence",
        cmd.ns_get_persistence,
        "show the namespace's persistence policies",
        examples="  braid admin namespaces get-persistence public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "remove-persistence",
        cmd.ns_remove_persistence,
        "drop the namespace's persistence policies (broker.conf defaults apply)",
        examples="  braid admin namespaces remove-persistence public/default\n",
    )
    namespace_arg(p)


__all__ = ["add_namespaces_group"]
