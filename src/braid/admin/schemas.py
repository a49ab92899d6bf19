"""Admin REST for topic schemas and the namespace compatibility strategy (Pulsar's paths).

``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``:

* ``GET .../schema`` - the latest version ``{"version", "type", "timestamp", "data",
  "properties"}`` (404 "Schema not found" when the topic has none, or it was deleted);
* ``GET .../schema/{version}`` - one version; ``GET .../schemas`` - every version since the last
  delete, ``{"getSchemaResponses": [...]}``;
* ``POST .../schema`` with ``{"type": "AVRO", "schema": "<definition>", "properties": {}}`` -
  register a version (checked against the namespace's strategy: 409 when incompatible, 422 when
  the definition does not parse); answers ``{"version": {"version": N}}``;
* ``DELETE .../schema[?force=true]`` - delete (a tombstone version, ``{"version": N}``), or with
  ``force`` remove every version and its ledger.

``GET/PUT /admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy`` read and set
the namespace's strategy (a JSON string such as ``"BACKWARD"``; ``UNDEFINED`` = the broker's
``schemaCompatibilityStrategy``).

The topic part is the local name of a ``persistent://`` topic; a partition's name addresses its
partitioned topic's schema, and a scalable topic's name (``topic://``) the schema its segments
share.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, Field

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.resources import BrokerResources
from braid.broker.schemas.compatibility import InvalidSchemaData
from braid.broker.schemas.model import (
    SchemaCompatibilityStrategy,
    SchemaData,
    SchemaType,
    schema_id_of,
)
from braid.broker.schemas.storage import StoredSchema
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.core.errors import NotFoundError
from braid.core.names import TopicDomain, TopicName


class SchemaNotFound(NotFoundError):
    """The topic has no schema (or not that version)."""


class PostSchemaPayload(BaseModel):
    """Pulsar's ``PostSchemaPayload``."""

    type: str
    schema_: str = Field(default="", alias="schema")
    properties: dict[str, str] = Field(default_factory=dict)


def schema_json(stored: StoredSchema) -> dict[str, Any]:
    """Pulsar's ``GetSchemaResponse`` for one stored version."""
    return {
        "version": stored.version,
        "type": stored.schema.type.name,
        "timestamp": stored.timestamp,
        "data": stored.schema.data.decode("utf-8", errors="replace"),
        "properties": dict(stored.schema.properties),
    }


def schemas_router(
    schemas: TopicSchemas,
    resources: BrokerResources,
) -> APIRouter:
    """The schema endpoints and the namespace strategy endpoints."""
    router = APIRouter()
    registry = schemas.registry

    async def topic_of(tenant: str, namespace: str, topic: str) -> TopicName:
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        await resources.check_namespace_exists(tenant, namespace)
        return name

    @router.get(
        "/schemas/{tenant}/{namespace}/{topic}/schema",
        tags=["schemas"],
        summary="The topic's latest schema",
    )
    async def get_schema(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        stored = await registry.get_latest(schema_id_of(name))
        if stored is None:
            raise SchemaNotFound(f"Schema not found: {name} has no schema")
        return schema_json(stored)

    @router.get(
        "/schemas/{tenant}/{namespace}/{topic}/schema/{version}",
        tags=["schemas"],
        summary="One version of the topic's schema",
    )
    async def get_schema_version(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, version: int
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        stored = await registry.get_version(schema_id_of(name), version)
        if stored is None:
            raise SchemaNotFound(f"Schema not found: {name} has no schema version {version}")
        return schema_json(stored)

    @router.get(
        "/schemas/{tenant}/{namespace}/{topic}/schemas",
        tags=["schemas"],
        summary="Every version of the topic's schema since it was last deleted",
    )
    async def get_all_schemas(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        versions = await registry.get_all(schema_id_of(name))
        if not versions:
            raise SchemaNotFound(f"Schema not found: {name} has no schema")
        return {"getSchemaResponses": [schema_json(s) for s in versions]}

    @router.post(
        "/schemas/{tenant}/{namespace}/{topic}/schema",
        tags=["schemas"],
        summary="Register a schema version (checked against the namespace's strategy)",
    )
    async def post_schema(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, body: PostSchemaPayload
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        schema = SchemaData(
            SchemaType.parse(body.type), body.schema_.encode("utf-8"), body.properties
        )
        if schema.type.value < 0 or schema.type is SchemaType.NONE:
            raise InvalidSchemaData(f"a {schema.type.name} schema cannot be registered")
        policy = await schemas.policy(name)
        version = await registry.put_if_absent(schema_id_of(name), schema, policy.strategy)
        return {"version": {"version": version}}

    @router.delete(
        "/schemas/{tenant}/{namespace}/{topic}/schema",
        tags=["schemas"],
        summary="Delete the topic's schema (force: remove every version and its ledgers)",
    )
    async def delete_schema(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        force: Annotated[bool, Query()] = False,
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        schema_id = schema_id_of(name)
        if force:
            removed = await registry.delete_all(schema_id)
            if not removed:
                raise SchemaNotFound(f"Schema not found: {name} has no schema")
            return {"version": None}
        version = await registry.delete(schema_id)
        if version is None:
            raise SchemaNotFound(f"Schema not found: {name} has no schema")
        return {"version": version}

    @router.get(
        "/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy",
        tags=["namespaces"],
        summary="The namespace's schema compatibility strategy (UNDEFINED = broker default)",
    )
    async def get_strategy(tenant: Tenant, namespace: Namespace) -> str:
        policies = await resources.get_namespace_policies(tenant, namespace)
        strategy = policies.schema_compatibility_strategy
        return (strategy or SchemaCompatibilityStrategy.UNDEFINED).value

    @router.put(
        "/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy",
        status_code=204,
        tags=["namespaces"],
        summary='Set the namespace\'s schema compatibility strategy (body: "BACKWARD", ...)',
    )
    async def put_strategy(
        tenant: Tenant, namespace: Namespace, strategy: Annotated[Any, Body()]
    ) -> None:
        parsed = SchemaCompatibilityStrategy.parse(strategy)
        value = None if parsed is SchemaCompatibilityStrategy.UNDEFINED else parsed
        await resources.update_namespace_policies(
            tenant,
            namespace,
            lambda p: dataclasses.replace(p, schema_compatibility_strategy=value),
        )

    return router


__all__ = ["PostSchemaPayload", "SchemaNotFound", "schema_json", "schemas_router"]
