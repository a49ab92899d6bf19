"""``braid admin topics``: the parser of the ``persistent://`` topic group (with the
partitioned-topic and compaction commands of :mod:`braid.cli.admin_compat` and
:mod:`braid.cli.admin_compaction`, the settings of :mod:`braid.cli.admin_policy_settings` and the
inspection and cursor commands of :mod:`braid.cli.admin_topic_ops`); what each command does is in
:mod:`braid.cli.admin_commands`.
"""

from __future__ import annotations

from braid.cli import (
    admin_backlog,
    admin_bundles,
    admin_compaction,
    admin_compat,
    admin_permissions,
    admin_policy_settings,
    admin_topic_ops,
)
from braid.cli import admin_commands as cmd
from braid.cli.admin_parser import (
    Builder,
    command,
    namespace_arg,
    topic_arg,
)


def add_topics_group(builder: Builder) -> None:
    """``braid admin topics``: ``persistent://`` topics, partitioned or not."""
    commands = builder.group(
        "topics",
        "persistent:// topics: list, create, delete, terminate, stats",
        "Classic Pulsar topics (persistent://tenant/ns/name), served as they are by Braid.",
        """\
  braid admin topics list public/default
  braid admin topics create persistent://public/default/events
  braid admin topics stats persistent://public/default/events
  braid admin topics peek-messages persistent://public/default/events -s sub -n 3
  braid admin topics reset-cursor persistent://public/default/events -s sub -t 10m
  braid admin topics set-max-producers persistent://public/default/events -p 5
  braid admin topics terminate persistent://public/default/events
  braid admin topics delete persistent://public/default/events
""",
    )
    p = command(
        commands,
        "list",
        cmd.topics_list,
        "list a namespace's persistent topics",
        examples="  braid admin topics list public/default\n",
    )
    namespace_arg(p, optional=True)
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
        p = command(
            commands,
            name,
            handler,
            help_text,
            examples=f"  braid admin topics {name} persistent://public/default/events\n",
        )
        topic_arg(p, "persistent topic")
    admin_compat.add_partitioned_topic_commands(commands, command, topic_arg, namespace_arg)
    admin_compaction.add_topic_compaction_commands(commands, command, topic_arg)
    admin_backlog.add_topic_backlog_commands(commands, command)
    admin_bundles.add_topic_unload_command(commands, command, topic_arg)
    admin_permissions.add_topic_permission_commands(commands, command, topic_arg)
    admin_policy_settings.add_topic_setting_commands(commands, command)
    admin_topic_ops.add_topic_operation_commands(commands, command)


__all__ = ["add_topics_group"]
