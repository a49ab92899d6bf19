"""Schemas at the topic's door: what PRODUCER, SUBSCRIBE and GET_OR_CREATE_SCHEMA do with one.

:class:`TopicSchemas` applies Pulsar's topic-level rules (``AbstractTopic.addSchema``,
``addSchemaIfIdleOrCheckCompatible``, ``ServerCnx.tryAddSchema``) on top of the registry, with the
topic's effective :class:`SchemaPolicy` (namespace policies over the broker's defaults):

* a producer with a schema registers it (or finds the identical version) and learns its version,
  which PRODUCER_SUCCESS carries and the client stamps on every message (``schema_version`` in
  the message metadata; the broker stores messages as they come, so consumers see it). With
  ``is_allow_auto_update_schema`` off, only an already registered schema is accepted;
* a producer without a schema (bytes) is accepted, unless the topic has a schema and
  ``schemaValidationEnforced`` is on;
* a consumer with a schema on a topic that has one, or that is in use (producers, consumers or
  messages), must be able to read it (the consumer check); on an idle topic without a schema its
  schema is registered. ``AUTO_CONSUME`` consumers and consumers without a schema are not checked.

The schema id is the topic's (:func:`~braid.broker.schemas.model.schema_id_of`): partitions share
their partitioned topic's schema, segments their scalable topic's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from braid.broker.schemas.compatibility import IncompatibleSchema
from braid.broker.schemas.model import (
    DEFAULT_STRATEGY,
    SchemaCompatibilityStrategy,
    SchemaData,
    SchemaType,
    is_bytes_schema,
    schema_id_of,
    version_to_bytes,
)
from braid.broker.schemas.registry import SchemaRegistry
from braid.core.names import TopicName


@dataclass(frozen=True)
class SchemaPolicy:
    """The schema settings in force for one topic."""

    strategy: SchemaCompatibilityStrategy = DEFAULT_STRATEGY
    allow_auto_update: bool = True
    validation_enforced: bool = False


#: Looks up a topic's effective policy (the namespace's, over the broker's defaults).
PolicyLookup = Callable[[TopicName], Awaitable[SchemaPolicy]]


class TopicSchemas:
    """The schema decisions of PRODUCER, SUBSCRIBE and GET_OR_CREATE_SCHEMA."""

    def __init__(self, registry: SchemaRegistry, policy_of: PolicyLookup) -> None:
        self.registry = registry
        self._policy_of = policy_of

    async def policy(self, topic: TopicName) -> SchemaPolicy:
        return await self._policy_of(topic)

    async def for_producer(self, topic: TopicName, schema: SchemaData | None) -> bytes | None:
        """The schema version (wire bytes) a producer with ``schema`` writes with; ``None`` for a
        producer without one.

        Raises:
            IncompatibleSchema: the schema may not be used on this topic.
            InvalidSchemaData: its definition does not parse.
        """
        schema_id = schema_id_of(topic)
        policy = await self._policy_of(topic)
        if schema is None or is_bytes_schema(schema):
            if policy.validation_enforced and await self.registry.has_schema(schema_id):
                raise IncompatibleSchema(
                    "Producers cannot connect or send message without a schema to topics with a "
                    "schema if SchemaValidationEnforced is enabled"
                )
            return None
        if schema.type in (SchemaType.AUTO_CONSUME, SchemaType.AUTO, SchemaType.AUTO_PUBLISH):
            raise IncompatibleSchema(
                f"a producer cannot register the {schema.type.name} schema; it resolves to the "
                "topic's schema on the client (GET_SCHEMA)"
            )
        if policy.allow_auto_update:
            version = await self.registry.put_if_absent(schema_id, schema, policy.strategy)
        else:
            found = await self.registry.find_version(schema_id, schema)
            if found is None:
                raise IncompatibleSchema("Schema not found and schema auto updating is disabled.")
            version = found
        return version_to_bytes(version)

    async def for_consumer(
        self, topic: TopicName, schema: SchemaData | None, *, topic_in_use: bool
    ) -> None:
        """Admit a consumer with ``schema`` (registering it on an idle topic without a schema).

        Args:
            topic_in_use: the topic has producers, consumers or messages.

        Raises:
            IncompatibleSchema: the consumer's schema cannot read the topic's.
        """
        if schema is None or is_bytes_schema(schema) or schema.type is SchemaType.AUTO_CONSUME:
            return
        schema_id = schema_id_of(topic)
        policy = await self._policy_of(topic)
        if topic_in_use or await self.registry.has_schema(schema_id):
            if not await self.registry.has_schema(schema_id):
                if policy.strategy is SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE:
                    return
                raise IncompatibleSchema(
                    f"Failed to add schema to an active topic: {topic} has producers, consumers "
                    "or messages but no schema"
                )
            await self.registry.check_consumer(schema_id, schema, policy.strategy)
            return
        await self.for_producer(topic, schema)


__all__ = ["PolicyLookup", "SchemaPolicy", "TopicSchemas"]
