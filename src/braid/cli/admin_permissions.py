"""``braid admin`` permission commands, with pulsar-admin's names and flags:

* ``braid admin namespaces grant-permission NS --role R --actions produce,consume``,
  ``revoke-permission NS --role R``, ``permissions NS``;
* ``braid admin topics grant-permission TOPIC --role R --actions ...``, ``revoke-permission``,
  ``permissions`` (the namespace's grants merged with the topic's).

:mod:`braid.cli.admin_namespaces` and :mod:`braid.cli.admin_topics` call the ``add_*`` functions
here with the helpers of :mod:`braid.cli.admin_parser`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from braid.cli.admin_commands import Handler, Printer, _persistent_name

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    ArgAdder = Callable[..., None]

_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")


def _actions(text: str) -> list[str]:
    actions = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in actions if a not in _ACTIONS]
    if not actions or unknown:
        raise argparse.ArgumentTypeError(
            f"expected actions separated by commas among {', '.join(_ACTIONS)}, got {text!r}"
        )
    return actions


def _show(grants: Mapping[str, Sequence[str]], what: str, p: Printer) -> None:
    if p.json:
        p.data(dict(grants))
    elif not grants:
        p.line(f"{what}: no permissions granted")
    else:
        width = max(len(role) for role in grants)
        for role, actions in sorted(grants.items()):
            p.line(f"{role.ljust(width)}  {', '.join(actions)}")


def ns_permissions(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _show(admin.namespaces.permissions(args.namespace), args.namespace, p)


def ns_grant(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.grant_permission(args.namespace, args.role, args.actions)
    p.done(f"Granted {', '.join(args.actions)} on {args.namespace} to {args.role}.")


def ns_revoke(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.revoke_permission(args.namespace, args.role)
    p.done(f"Revoked the permissions of {args.role} on {args.namespace}.")


def topic_permissions(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    _show(admin.topics.permissions(name), name, p)


def topic_grant(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.grant_permission(name, args.role, args.actions)
    p.done(f"Granted {', '.join(args.actions)} on {name} to {args.role}.")


def topic_revoke(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.revoke_permission(name, args.role)
    p.done(f"Revoked the permissions of {args.role} on {name}.")


def _grant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", required=True, help="the role (a token's subject, a user, a CN)")
    p.add_argument(
        "--actions",
        required=True,
        type=_actions,
        metavar="A[,A...]",
        help=f"what the role may do: {', '.join(_ACTIONS)}",
    )


def add_namespace_permission_commands(
    commands: SubParsers, command: CommandAdder, namespace_arg: ArgAdder
) -> None:
    """Add ``permissions``, ``grant-permission`` and ``revoke-permission`` to namespaces."""
    p = command(
        commands,
        "permissions",
        ns_permissions,
        "show the roles granted actions on the namespace",
        examples="  braid admin namespaces permissions acme/orders\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "grant-permission",
        ns_grant,
        "grant a role actions on every topic of the namespace",
        description="Grant ROLE exactly these actions on every topic of the namespace (a "
        "second grant replaces the first). Needs a tenant admin or a super user.",
        examples="  braid admin namespaces grant-permission acme/orders --role app-1 "
        "--actions produce,consume\n",
    )
    namespace_arg(p)
    _grant_args(p)
    p = command(
        commands,
        "revoke-permission",
        ns_revoke,
        "revoke a role's grant on the namespace",
        examples="  braid admin namespaces revoke-permission acme/orders --role app-1\n",
    )
    namespace_arg(p)
    p.add_argument("--role", required=True, help="the role")


def add_topic_permission_commands(
    commands: SubParsers, command: CommandAdder, topic_arg: ArgAdder
) -> None:
    """Add ``permissions``, ``grant-permission`` and ``revoke-permission`` to topics."""
    example = "persistent://acme/orders/payments"
    p = command(
        commands,
        "permissions",
        topic_permissions,
        "show the roles granted actions on the topic (namespace grants included)",
        examples=f"  braid admin topics permissions {example}\n",
    )
    topic_arg(p, "persistent topic")
    p = command(
        commands,
        "grant-permission",
        topic_grant,
        "grant a role actions on the topic (and its partitions)",
        examples=f"  braid admin topics grant-permission {example} --role auditor "
        "--actions consume\n",
    )
    topic_arg(p, "persistent topic")
    _grant_args(p)
    p = command(
        commands,
        "revoke-permission",
        topic_revoke,
        "revoke a role's grant on the topic",
        examples=f"  braid admin topics revoke-permission {example} --role auditor\n",
    )
    topic_arg(p, "persistent topic")
    p.add_argument("--role", required=True, help="the role")


HANDLERS: tuple[Handler, ...] = (
    ns_permissions,
    ns_grant,
    ns_revoke,
    topic_permissions,
    topic_grant,
    topic_revoke,
)

__all__ = ["HANDLERS", "add_namespace_permission_commands", "add_topic_permission_commands"]
