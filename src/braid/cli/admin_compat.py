"""``braid admin`` commands for what Pulsar applications expect: partitioned topics, schemas and
the namespace schema compatibility strategy.

* ``braid admin topics create-partitioned-topic | get-partitioned-topic-metadata |
  update-partitioned-topic | delete-partitioned-topic | list-partitioned-topics`` (pulsar-admin's
  names);
* ``braid admin schemas get | get-all | upload | delete``;
* ``braid admin namespaces get-schema-compatibility-strategy |
  set-schema-compatibility-strategy``.

:mod:`braid.cli.admin` builds the parser and calls the ``add_*`` functions here with the
helpers of :mod:`braid.cli.admin_parser` (``command`` adds one command with help and examples,
``topic_arg``/``namespace_arg`` the positional names), so these commands read and fail like every
other ``braid admin`` command.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from braid.cli import admin_output as out
from braid.cli.admin_commands import Handler, Printer, _persistent_name
from braid.cli.admin_parser import positive
from braid.core.errors import InvalidInputError

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    #: ``admin_parser.command``: (commands, name, handler, help, *, description, examples).
    CommandAdder = Callable[..., argparse.ArgumentParser]
    #: ``admin_parser.topic_arg`` / ``namespace_arg``.
    ArgAdder = Callable[..., None]
    #: ``admin_parser.Builder.group``: (name, help, description, examples) -> its commands.
    GroupAdder = Callable[[str, str, str, str], SubParsers]

STRATEGIES = (
    "ALWAYS_COMPATIBLE",
    "ALWAYS_INCOMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
    "UNDEFINED",
)


# --- partitioned topics ----------------------------------------------------------------------


def create_partitioned(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.create_partitioned(name, args.partitions)
    p.done(f"Created {name} with {args.partitions} partitions.")


def get_partitioned_metadata(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    metadata = admin.topics.get_partitioned_metadata(name)
    if p.json:
        p.data(metadata)
    else:
        count = metadata.get("partitions", 0)
        p.line(f"{name}: {count} partitions" if count else f"{name}: not partitioned")


def update_partitioned(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.update_partitioned(name, args.partitions)
    p.done(f"{name} now has {args.partitions} partitions.")


def delete_partitioned(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.delete_partitioned(name, force=args.force)
    p.done(f"Deleted {name} and its partitions.")


def list_partitioned(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    p.names(
        admin.topics.list_partitioned(args.namespace), f"no partitioned topics in {args.namespace}"
    )


def add_partitioned_topic_commands(
    commands: SubParsers, command: CommandAdder, topic_arg: ArgAdder, namespace_arg: ArgAdder
) -> None:
    """Add the partitioned-topic commands to ``braid admin topics``."""
    p = command(
        commands,
        "create-partitioned-topic",
        create_partitioned,
        "create a partitioned topic and its partitions",
        examples="  braid admin topics create-partitioned-topic orders --partitions 4\n",
    )
    topic_arg(p, "partitioned topic")
    p.add_argument("-p", "--partitions", type=positive, required=True, metavar="N")
    p = command(
        commands,
        "get-partitioned-topic-metadata",
        get_partitioned_metadata,
        "show a topic's number of partitions (0: not partitioned)",
        examples="  braid admin topics get-partitioned-topic-metadata orders\n",
    )
    topic_arg(p, "topic")
    p = command(
        commands,
        "update-partitioned-topic",
        update_partitioned,
        "add partitions to a partitioned topic (the count can only grow)",
        examples="  braid admin topics update-partitioned-topic orders --partitions 8\n",
    )
    topic_arg(p, "partitioned topic")
    p.add_argument("-p", "--partitions", type=positive, required=True, metavar="N")
    p = command(
        commands,
        "delete-partitioned-topic",
        delete_partitioned,
        "delete a partitioned topic, its partitions and its schema",
        examples="  braid admin topics delete-partitioned-topic orders\n",
    )
    topic_arg(p, "partitioned topic")
    p.add_argument("-f", "--force", action="store_true", help="even with connected clients")
    p = command(
        commands,
        "list-partitioned-topics",
        list_partitioned,
        "list a namespace's partitioned topics",
        examples="  braid admin topics list-partitioned-topics public/default\n",
    )
    namespace_arg(p, optional=True)


# --- schemas ---------------------------------------------------------------------------------


def _schema_rows(versions: list[dict[str, Any]]) -> str:
    rows = [
        (
            v.get("version", "-"),
            v.get("type", "-"),
            out.when(v.get("timestamp")),
            len(v.get("data", "")),
        )
        for v in versions
    ]
    return out.table(["version", "type", "registered", "definition bytes"], rows)


def _render_schema(name: str, schema: dict[str, Any]) -> str:
    data = schema.get("data", "")
    try:
        definition = json.dumps(json.loads(data), indent=2) if data else "(empty)"
    except ValueError:
        definition = data
    lines = out.key_values(
        [
            ("topic", name),
            ("version", schema.get("version")),
            ("type", schema.get("type")),
            ("registered", out.when(schema.get("timestamp"))),
            *sorted((f"property {k}", v) for k, v in (schema.get("properties") or {}).items()),
        ]
    )
    return f"{lines}\ndefinition:\n{definition}"


def schemas_get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    schema = admin.schemas.get(args.topic, args.version)
    p.data(schema) if p.json else p.line(_render_schema(args.topic, schema))


def schemas_get_all(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    versions = admin.schemas.get_all(args.topic)
    p.data(versions) if p.json else p.line(_schema_rows(versions))


def schemas_upload(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    """``--filename`` holds pulsar-admin's PostSchemaPayload ``{"type", "schema",
    "properties"}``; or ``--type`` with ``--schema`` (the definition, or ``@file``)."""
    if args.filename is not None:
        try:
            payload = json.loads(Path(args.filename).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read the schema file {args.filename}: {exc}") from None
        if not isinstance(payload, dict) or "type" not in payload:
            raise InvalidInputError(
                f"{args.filename} must be a JSON object with type, schema and properties"
            )
        schema_type, definition = str(payload["type"]), payload.get("schema", "")
        if not isinstance(definition, str):
            definition = json.dumps(definition)
        properties = payload.get("properties") or {}
    elif args.type is not None:
        schema_type, definition, properties = args.type, args.schema or "", {}
        if definition.startswith("@"):
            try:
                definition = Path(definition[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise InvalidInputError(f"cannot read {definition[1:]}: {exc}") from None
    else:
        raise InvalidInputError("give --filename FILE, or --type TYPE with --schema DEFINITION")
    version = admin.schemas.upload(args.topic, schema_type, definition, properties)
    p.data({"version": version}) if p.json else p.line(
        f"Registered a {schema_type.upper()} schema for {args.topic}: version {version}."
    )


def schemas_delete(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    version = admin.schemas.delete(args.topic, force=args.force)
    if p.json:
        p.data({"version": version})
    elif args.force:
        p.line(f"Deleted every schema version of {args.topic}.")
    else:
        p.line(f"Deleted the schema of {args.topic} (version {version} marks the delete).")


def add_schemas_group(group: GroupAdder, command: CommandAdder, topic_arg: ArgAdder) -> None:
    """Add ``braid admin schemas``."""
    commands = group(
        "schemas",
        "a topic's schema: get, upload, delete",
        "Topic-level schemas (shared by a topic's partitions, or a scalable topic's segments): "
        "every version, registered by producers or uploaded here, checked against the "
        "namespace's schema compatibility strategy.",
        """\
  braid admin schemas get persistent://public/default/orders
  braid admin schemas upload persistent://public/default/orders --filename order-schema.json
  braid admin schemas upload orders --type AVRO --schema @order.avsc
  braid admin schemas delete persistent://public/default/orders
""",
    )
    p = command(
        commands,
        "get",
        schemas_get,
        "show the latest schema (or --version N)",
        examples="  braid admin schemas get persistent://public/default/orders --version 0\n",
    )
    topic_arg(p, "topic")
    p.add_argument("--version", type=int, default=None, metavar="N")
    p = command(
        commands,
        "get-all",
        schemas_get_all,
        "list every version since the schema was last deleted",
        examples="  braid admin schemas get-all persistent://public/default/orders\n",
    )
    topic_arg(p, "topic")
    p = command(
        commands,
        "upload",
        schemas_upload,
        "register a schema version (refused when incompatible)",
        description="Register a schema version for a topic. --filename takes pulsar-admin's "
        'JSON {"type": "AVRO", "schema": "<definition>", "properties": {}}; or give --type and '
        "--schema (the definition, or @file).",
        examples="""\
  braid admin schemas upload orders --filename order-schema.json
  braid admin schemas upload orders --type JSON --schema @order.avsc
  braid admin schemas upload logs --type STRING
""",
    )
    topic_arg(p, "topic")
    p.add_argument("-f", "--filename", default=None, metavar="FILE")
    p.add_argument("--type", default=None, metavar="TYPE", help="AVRO, JSON, STRING, ...")
    p.add_argument("--schema", default=None, metavar="DEFINITION|@FILE")
    p = command(
        commands,
        "delete",
        schemas_delete,
        "delete the topic's schema (--force: remove every version)",
        examples="  braid admin schemas delete persistent://public/default/orders\n",
    )
    topic_arg(p, "topic")
    p.add_argument("--force", action="store_true", help="remove every version and its ledger")


# --- namespace strategy ----------------------------------------------------------------------


def ns_get_strategy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    strategy = admin.namespaces.get_schema_compatibility_strategy(args.namespace)
    if p.json:
        p.data(strategy)
    elif strategy == "UNDEFINED":
        p.line(f"{args.namespace}: schema compatibility strategy not set (the broker's applies)")
    else:
        p.line(f"{args.namespace}: schema compatibility strategy {strategy}")


def ns_set_strategy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.set_schema_compatibility_strategy(args.namespace, args.strategy)
    p.done(f"Schema compatibility strategy {args.strategy} for {args.namespace}.")


def add_schema_strategy_commands(
    commands: SubParsers, command: CommandAdder, namespace_arg: ArgAdder
) -> None:
    """Add the strategy commands to ``braid admin namespaces``."""
    p = command(
        commands,
        "get-schema-compatibility-strategy",
        ns_get_strategy,
        "show the namespace's schema compatibility strategy",
        examples="  braid admin namespaces get-schema-compatibility-strategy public/default\n",
    )
    namespace_arg(p)
    p = command(
        commands,
        "set-schema-compatibility-strategy",
        ns_set_strategy,
        "set how new schema versions must relate to the existing ones",
        examples=(
            "  braid admin namespaces set-schema-compatibility-strategy public/default BACKWARD\n"
        ),
    )
    namespace_arg(p)
    p.add_argument(
        "strategy",
        type=str.upper,
        choices=STRATEGIES,
        metavar="STRATEGY",
        help=", ".join(STRATEGIES) + " (UNDEFINED: the broker's schemaCompatibilityStrategy)",
    )


HANDLERS: tuple[Handler, ...] = (
    create_partitioned,
    get_partitioned_metadata,
    update_partitioned,
    delete_partitioned,
    list_partitioned,
    schemas_get,
    schemas_get_all,
    schemas_upload,
    schemas_delete,
    ns_get_strategy,
    ns_set_strategy,
)

__all__ = [
    "HANDLERS",
    "STRATEGIES",
    "add_partitioned_topic_commands",
    "add_schema_strategy_commands",
    "add_schemas_group",
]
