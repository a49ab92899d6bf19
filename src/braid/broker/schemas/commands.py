"""The ``schemas`` command family: GET_SCHEMA and GET_OR_CREATE_SCHEMA.

A client asks for a topic's schema (latest, or the version a message carries) to decode messages
(AUTO_CONSUME, multi-version readers), or registers a schema before using it (a producer that
switches schemas, AUTO_PRODUCE). The topic may be named by any of its names: a partition or the
partitioned topic, a segment or its scalable ``topic://`` name - they share one schema.
Both answer with their own response command, errors included
(``error_code`` + ``error_message``), as Pulsar does: no schema is ``TopicNotFound`` "Topic not
found or no-schema"; a refused schema is ``IncompatibleSchema``.

The session keeps no state; the family exists so that schema commands stay out of the topic
commands' module (:mod:`braid.broker.registry`).
"""

from __future__ import annotations

import logging
from typing import Protocol

from braid.broker.errors import InvalidTopicName, to_server_error
from braid.broker.registry import CommandChannel, CommandFamily, CommandHandler, CommandType
from braid.broker.schemas.model import (
    SchemaData,
    schema_id_of,
    version_from_bytes,
    version_to_bytes,
)
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.core import names
from braid.core.names import NamespaceName, TopicName
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import TopicOperation

log = logging.getLogger(__name__)


class SchemaService(Protocol):
    """What the schema commands need from the broker (``BrokerService``)."""

    @property
    def schemas(self) -> TopicSchemas: ...

    async def check_namespace(self, namespace: str) -> NamespaceName:
        """Validate ``tenant/ns`` and check that it exists."""
        ...


async def _topic(service: SchemaService, name: str) -> TopicName:
    """The topic a schema request names: ``persistent://``, ``segment://`` or - for a
    scalable-topic client asking by the topic's own name - ``topic://`` (one schema for all
    of its segments), in an existing namespace."""
    try:
        topic = TopicName.parse(name)
    except names.InvalidTopicName as exc:
        raise InvalidTopicName(str(exc)) from exc
    await service.check_namespace(topic.namespace_name)
    return topic


class SchemaCommands:
    """One connection's schema requests."""

    def __init__(self, channel: CommandChannel, service: SchemaService) -> None:
        self._channel = channel
        self._service = service

    async def close(self) -> None:
        """Nothing to release: schema requests hold no per-connection state."""

    def on_get_schema(self, event: CommandReceived) -> None:
        req = event.command.getSchema
        channel = self._channel

        async def run() -> None:
            response = pb.CommandGetSchemaResponse(request_id=req.request_id)
            try:
                await channel.authorize(TopicOperation.LOOKUP, req.topic)
                topic = await _topic(self._service, req.topic)
                registry = self._service.schemas.registry
                schema_id = schema_id_of(topic)
                if req.HasField("schema_version") and req.schema_version:
                    stored = await registry.get_version(
                        schema_id, version_from_bytes(req.schema_version)
                    )
                else:
                    stored = await registry.get_latest(schema_id)
                if stored is None:
                    response.error_code = pb.TopicNotFound
                    response.error_message = "Topic not found or no-schema"
                else:
                    response.schema.CopyFrom(stored.schema.to_wire(schema_id))
                    response.schema_version = version_to_bytes(stored.version)
            except Exception as exc:
                code, message = to_server_error(exc)
                log.info("GET_SCHEMA %s refused: %s", req.topic, message)
                response.error_code = code
                response.error_message = message
            channel.send(commands.wrap(response))

        channel.spawn(run())

    def on_get_or_create_schema(self, event: CommandReceived) -> None:
        req = event.command.getOrCreateSchema
        channel = self._channel

        async def run() -> None:
            response = pb.CommandGetOrCreateSchemaResponse(request_id=req.request_id)
            try:
                await channel.authorize(TopicOperation.PRODUCE, req.topic)
                topic = await _topic(self._service, req.topic)
                version = await self._service.schemas.for_producer(
                    topic, SchemaData.from_wire(req.schema)
                )
                response.schema_version = version or b""
            except Exception as exc:
                code, message = to_server_error(exc)
                log.info("GET_OR_CREATE_SCHEMA %s refused: %s", req.topic, message)
                response.error_code = code
                response.error_message = message
            channel.send(commands.wrap(response))

        channel.spawn(run())


_HANDLERS: dict[CommandType, CommandHandler[SchemaCommands]] = {
    pb.BaseCommand.GET_SCHEMA: SchemaCommands.on_get_schema,
    pb.BaseCommand.GET_OR_CREATE_SCHEMA: SchemaCommands.on_get_or_create_schema,
}


def schema_commands(service: SchemaService) -> CommandFamily[SchemaCommands]:
    """The ``schemas`` command family, served for ``service``."""
    return CommandFamily(
        name="schemas",
        open_session=lambda channel: SchemaCommands(channel, service),
        handlers=_HANDLERS,
    )


__all__ = ["SchemaCommands", "SchemaService", "schema_commands"]
