"""``braid admin tenants``: the parser of the tenant group; what each command does is in
:mod:`braid.cli.admin_commands`."""

from __future__ import annotations

from braid.cli import admin_commands as cmd
from braid.cli.admin_parser import (
    Builder,
    command,
)


def add_tenants_group(builder: Builder) -> None:
    """``braid admin tenants``: list, get, create, update, delete."""
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
    command(
        commands,
        "list",
        cmd.tenants_list,
        "list tenants",
        examples="  braid admin tenants list\n",
    )
    p = command(
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
        p = command(
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
    p = command(
        commands,
        "delete",
        cmd.tenants_delete,
        "delete a tenant without namespaces",
        examples="  braid admin tenants delete acme\n",
    )
    p.add_argument("tenant", metavar="TENANT")


__all__ = ["add_tenants_group"]
