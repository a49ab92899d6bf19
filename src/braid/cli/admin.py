"""``braid admin``: manage a running Braid broker through its admin REST API.

Groups mirror the API: ``scalable-topics`` (``topic://``: create, split, merge, subscriptions,
stats as a DAG tree), ``tenants``,
``namespaces`` and ``topics`` (``persistent://``), ``schemas``, ``bookie-clusters`` (PIP-470
storage-cluster switching), plus ``health``. This module assembles the argument parser (help
with examples at every level) from one module per group (:mod:`~braid.cli.admin_scalable`,
:mod:`~braid.cli.admin_tenants`, :mod:`~braid.cli.admin_namespaces`,
:mod:`~braid.cli.admin_topics`, ...), each built with the blocks of
:mod:`braid.cli.admin_parser`, and runs a command; what each command does
with :class:`braid.admin.client.AdminClient` and how it prints the answer (tables by default,
``--output json`` for scripts) is in :mod:`braid.cli.admin_commands`.

Errors print one line on stderr — ``braid admin: error: <reason> (HTTP 404)`` — and exit 1;
usage errors exit 2 (argparse). The parser is built without importing httpx; the client is
imported only when a command runs, so ``braid --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TextIO

from braid.cli import (
    admin_bookie_clusters,
    admin_bookies,
    admin_brokers,
    admin_compat,
    admin_namespaces,
    admin_scalable,
    admin_tenants,
    admin_topics,
    admin_transactions,
)
from braid.cli import admin_commands as cmd
from braid.cli.admin_parser import (
    DEFAULT_URL,
    RAW,
    TOKEN_ENV,
    URL_ENV,
    Builder,
    add_common,
    command,
    parse_time,
    topic_arg,
)
from braid.core.errors import BraidError
from braid.security.credentials import ClientCredentials, from_plugin

# --- parser --------------------------------------------------------------------------------------

_ADMIN_DESCRIPTION = """\
Manage a running Braid broker through its admin REST API (/admin/v2).

command groups:
  scalable-topics  topic:// topics: create with N segments, split, merge, subscriptions, stats
  tenants          tenants, their admin roles and allowed clusters
  namespaces       namespaces (tenant/namespace) and their policies (deduplication, schema
                   compatibility strategy, ...)
  topics           classic persistent:// topics, partitioned or not
  schemas          a topic's schema versions: get, upload, delete
  bookie-clusters  storage clusters: register, precheck, switch, status, rollback, cleanup
  transactions     transaction coordinators, one transaction, buffers, pending acks (/admin/v3)
  health           is a broker answering at --url?

Run `braid admin <group> --help` for the commands of a group.
"""

_ADMIN_EPILOG = f"""\
connection and output (accepted before or after the command):
  --url URL         the broker's admin API (default ${URL_ENV}, else {DEFAULT_URL})
  --output table    aligned columns and a DAG tree, for people (default)
  --output json     the API's JSON answer, for scripts (nothing for commands without an answer)
  --token JWT       'Authorization: Bearer' on every request (default ${TOKEN_ENV})
  --auth-plugin CLASS --auth-params PARAMS
                    pulsar-admin's credentials (token, basic or tls: docs/security.md)
  --tls-trust-cert-path PEM   the CA of an https:// broker (hostname verification is on)

exit codes: 0 success, 1 the broker refused or could not be reached (one line on stderr:
`braid admin: error: <reason> (HTTP <status>)`), 2 invalid arguments.

examples:
  braid admin scalable-topics create topic://public/default/orders --segments 4
  braid admin scalable-topics split topic://public/default/orders 1
  braid admin scalable-topics merge topic://public/default/orders 3 4 5
  braid admin scalable-topics stats topic://public/default/orders
  braid admin --url http://broker-2:8080 --output json scalable-topics get orders
  {URL_ENV}=http://broker-2:8080 braid admin tenants list
  braid admin --url https://broker:8443 --tls-trust-cert-path ca.pem --token "$(cat admin.jwt)" \
      tenants list
"""


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``braid admin`` and its command tree to the ``braid`` parser."""
    admin = commands.add_parser(
        "admin",
        help="manage a running broker: scalable topics, tenants, namespaces, topics",
        description=_ADMIN_DESCRIPTION,
        epilog=_ADMIN_EPILOG,
        formatter_class=RAW,
    )
    add_common(admin, top=True)
    admin.set_defaults(group_parser=admin)
    builder = Builder(admin)
    admin_scalable.add_scalable_topics_group(builder)
    admin_tenants.add_tenants_group(builder)
    admin_namespaces.add_namespaces_group(builder)
    admin_topics.add_topics_group(builder)
    admin_compat.add_schemas_group(builder.group, command, topic_arg)
    admin_bookie_clusters.add_bookie_clusters_group(builder.group, command)
    admin_bookies.add_bookies_group(builder.group, command)
    admin_brokers.add_brokers_group(builder.group, command)
    admin_transactions.add_transactions_group(builder.group, command)
    health = builder.groups.add_parser(
        "health",
        help="check that a broker answers at --url (and reaches its metadata store)",
        description="Check that a broker answers at --url: GET /health (the process) and "
        "GET /admin/v2/brokers/health (a round trip to its metadata store).",
        epilog="examples:\n  braid admin health\n"
        "  braid admin --url http://127.0.0.1:8081 health\n",
        formatter_class=RAW,
    )
    add_common(health)
    health.set_defaults(handler=cmd.health)


# --- entry point ---------------------------------------------------------------------------------


def _credentials(args: argparse.Namespace) -> ClientCredentials | None:
    """``--auth-plugin``/``--auth-params``, else ``--token`` (or ``$BRAID_ADMIN_TOKEN``)."""
    if args.auth_plugin:
        return from_plugin(args.auth_plugin, args.auth_params or "")
    token = args.token or os.environ.get(TOKEN_ENV)
    if token:
        return ClientCredentials("token", token=token)
    return None


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
        with AdminClient(
            url,
            credentials=_credentials(args),
            tls_trust_certs_file=args.tls_trust_cert_path,
            tls_validate_hostname=not args.tls_no_hostname_verification,
            tls_allow_insecure_connection=args.tls_allow_insecure,
        ) as admin:
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
