"""The schema registry: a topic's schema versions, and the rules for adding one.

:class:`SchemaRegistry` is Pulsar's ``SchemaRegistryService`` over :class:`SchemaStorage`:

* :meth:`~SchemaRegistry.put_if_absent` returns the version of an identical schema already
  registered since the last delete, else checks the new one against the versions (the latest, or
  all for a ``_TRANSITIVE`` strategy: :mod:`braid.broker.schemas.compatibility`) and appends it;
* :meth:`~SchemaRegistry.check_consumer` checks a consumer's schema without registering it;
* :meth:`~SchemaRegistry.delete` appends a tombstone (the schema is gone for producers and
  consumers, the older versions stay readable by number), :meth:`~SchemaRegistry.delete_all`
  removes every version.

Versions "since the last delete" are what the checks see: a delete starts the history again.
Adds for one schema id are serialised in this broker (one lock per id) and across brokers by the
locator's compare-and-swap (the loser retries on the new index, where it may find its schema
already added by the winner).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from braid.broker.schemas.compatibility import (
    check_compatible,
    check_consumer_compatible,
    same_definition,
    validate,
)
from braid.broker.schemas.model import SchemaCompatibilityStrategy, SchemaData, SchemaType
from braid.broker.schemas.storage import Locator, SchemaStorage, StoredSchema
from braid.core.errors import ConflictError
from braid.metadata.api import BadVersion

log = logging.getLogger(__name__)

_CAS_ATTEMPTS = 20


class SchemaUpdateConflict(ConflictError):
    """The schema kept changing under a writer (another broker adding versions); retriable."""


def since_last_delete(versions: Sequence[StoredSchema]) -> list[StoredSchema]:
    """The versions after the newest tombstone (all of them if there is none)."""
    for i in range(len(versions) - 1, -1, -1):
        if versions[i].deleted:
            return list(versions[i + 1 :])
    return list(versions)


class SchemaRegistry:
    """Schema versions per schema id (``tenant/ns/topic``), with compatibility checks."""

    def __init__(self, storage: SchemaStorage) -> None:
        self._storage = storage
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def storage(self) -> SchemaStorage:
        return self._storage

    def _lock(self, schema_id: str) -> asyncio.Lock:
        lock = self._locks.get(schema_id)
        if lock is None:
            lock = self._locks[schema_id] = asyncio.Lock()
        return lock

    async def _history(self, schema_id: str) -> tuple[Locator, list[StoredSchema]]:
        locator = await self._storage.locator(schema_id)
        return locator, await self._storage.read_all(locator)

    async def get_all(self, schema_id: str) -> list[StoredSchema]:
        """The versions since the last delete, oldest first (``[]``: no schema)."""
        return since_last_delete((await self._history(schema_id))[1])

    async def get_latest(self, schema_id: str) -> StoredSchema | None:
        """The newest version, or ``None`` when there is none or it is a delete."""
        locator = await self._storage.locator(schema_id)
        if not locator.index:
            return None
        latest = await self._storage.read(locator.index[-1])
        return None if latest.deleted else latest

    async def get_version(self, schema_id: str, version: int) -> StoredSchema | None:
        """Version ``version`` if it exists and is not a delete (``None`` otherwise).

        Pulsar serves only the versions since the last delete; older ones are kept for messages
        already written with them, so Braid serves those too, except the tombstones themselves.
        """
        locator = await self._storage.locator(schema_id)
        for entry in locator.index:
            if entry.version == version:
                stored = await self._storage.read(entry)
                return None if stored.deleted else stored
        return None

    async def has_schema(self, schema_id: str) -> bool:
        """Whether the topic has a (not deleted) schema."""
        return await self.get_latest(schema_id) is not None

    async def find_version(self, schema_id: str, schema: SchemaData) -> int | None:
        """The version of an identical schema registered since the last delete, if any."""
        for stored in await self.get_all(schema_id):
            if same_definition(stored.schema, schema):
                return stored.version
        return None

    async def put_if_absent(
        self,
        schema_id: str,
        schema: SchemaData,
        strategy: SchemaCompatibilityStrategy,
        *,
        user: str = "",
    ) -> int:
        """The version of ``schema``: an identical one's, or a new one if ``strategy`` allows.

        Raises:
            IncompatibleSchema: the strategy refuses it.
            InvalidSchemaData: the definition does not parse.
            SchemaUpdateConflict: other writers kept winning the locator.
        """
        async with self._lock(schema_id):
            for _ in range(_CAS_ATTEMPTS):
                locator, versions = await self._history(schema_id)
                current = since_last_delete(versions)
                for stored in current:
                    if same_definition(stored.schema, schema):
                        return stored.version
                validate(schema)
                check_compatible([s.schema for s in current], schema, strategy)
                try:
                    added = await self._storage.append(schema_id, locator, schema, user=user)
                except BadVersion:
                    continue
                return added.version
        raise SchemaUpdateConflict(f"the schema of {schema_id} kept changing; try again")

    async def check_consumer(
        self, schema_id: str, schema: SchemaData, strategy: SchemaCompatibilityStrategy
    ) -> None:
        """Check that a consumer with ``schema`` can read the topic (nothing is registered).

        Raises:
            IncompatibleSchema: it cannot, or there is no schema to check against.
        """
        check_consumer_compatible(
            [s.schema for s in await self.get_all(schema_id)], schema, strategy
        )

    async def delete(self, schema_id: str, *, user: str = "") -> int | None:
        """Delete the schema (a tombstone version); returns its version, ``None`` if the topic
        had no schema to delete."""
        async with self._lock(schema_id):
            for _ in range(_CAS_ATTEMPTS):
                locator = await self._storage.locator(schema_id)
                if not locator.index:
                    return None
                latest = await self._storage.read(locator.index[-1])
                if latest.deleted:
                    return None
                tombstone = SchemaData(SchemaType.NONE, b"")
                try:
                    added = await self._storage.append(
                        schema_id, locator, tombstone, deleted=True, user=user
                    )
                except BadVersion:
                    continue
                return added.version
        raise SchemaUpdateConflict(f"the schema of {schema_id} kept changing; try again")

    async def delete_all(self, schema_id: str) -> int:
        """Remove every version and the locator; returns how many versions there were."""
        async with self._lock(schema_id):
            removed = await self._storage.delete_all(schema_id)
        self._locks.pop(schema_id, None)
        return len(removed)


__all__ = ["SchemaRegistry", "SchemaUpdateConflict", "since_last_delete"]
