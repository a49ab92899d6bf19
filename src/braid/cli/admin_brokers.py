"""``braid admin brokers``: the cluster's live brokers - ``list``, ``leader-broker`` and
``health`` (Pulsar's ``pulsar-admin brokers``); one call of :class:`braid.admin.client.AdminClient`
each."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from braid.cli import admin_output as out
from braid.cli.admin_commands import Printer

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    GroupAdder = Callable[[str, str, str, str], SubParsers]


def br_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    cluster = args.cluster or admin.clusters()[0]
    p.names(admin.brokers(cluster), f"no live broker in cluster {cluster}")


def br_leader(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    leader = admin.leader_broker()
    if p.json:
        p.data(leader)
        return
    p.line(out.key_values([("broker", leader.get("brokerId")), ("url", leader.get("serviceUrl"))]))


def br_health(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    health = admin.broker_health()
    if p.json:
        p.data(health)
    else:
        p.line(health)


def add_brokers_group(group: GroupAdder, command: CommandAdder) -> None:
    """Add ``braid admin brokers`` and its commands."""
    commands = group(
        "brokers",
        "the cluster's live brokers: list, leader broker, health",
        "The brokers registered in the cluster's metadata store (each while its metadata "
        "session lives) and the leader broker among them. See docs/deploy.md.",
        """\
  braid admin brokers list
  braid admin brokers list c1
  braid admin brokers leader-broker
  braid admin --url http://broker-2:8080 brokers health
""",
    )
    p = command(commands, "list", br_list, "list the live brokers (host:port)")
    p.add_argument("cluster", nargs="?", help="the cluster (default: the broker's own)")
    command(commands, "leader-broker", br_leader, "show the leader broker")
    command(commands, "health", br_health, "check the broker at --url (metadata store round trip)")


__all__ = ["add_brokers_group"]
