"""Where schema versions live: one ledger per version, and a locator node per schema id.

Pulsar's ``BookkeeperSchemaStorage`` layout, on Braid's ledger API (:mod:`braid.storage.api`):

* every version is written as one entry of a new ledger of the active storage cluster (stamped
  with the cluster's name, so it is read back through the cluster that holds it, PIP-470) with
  custom metadata ``application=pulsar``, ``component=schema``, ``pulsar/schemaId=<id>``; the
  ledger is closed right after the entry is durable;
* the locator ``/schemas/<tenant>/<ns>/<topic>`` in the metadata store holds the *index*: for
  every version, in order, its ledger id, entry id, storage cluster and the SHA-256 of its
  definition. A new version is published by a compare-and-swap of the locator on the version the
  writer read, so two brokers adding a version at once cannot both win: the loser deletes its
  ledger and tries again on the new index.

An entry is a JSON document (``schemaId``, ``type``, ``schema`` as base64, ``props``,
``timestamp``, ``deleted``, ``user``); a delete is a version too (``deleted: true``, Pulsar's
tombstone), so versions before it stay readable by number. :meth:`SchemaStorage.delete_all`
removes the ledgers and the locator (Pulsar's forced delete, and what deleting a topic does).

A ledger written by a broker that crashes before its locator update is never referenced: it is
reported in the log (its custom metadata names the schema id) and holds no version.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from braid.broker.schemas.model import SchemaData, SchemaType
from braid.clock import Clock
from braid.core.errors import BraidError
from braid.ledger.routing import StorageRouting
from braid.metadata.api import BadVersion, MetadataStore

log = logging.getLogger(__name__)

#: Root of the schema locators in the metadata store (Pulsar's ``/schemas``).
SCHEMAS_ROOT = "/schemas"

_CACHE_ENTRIES = 4096


class SchemaStorageError(BraidError):
    """A locator or a stored version that cannot be read (corrupt document, missing ledger)."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """Where one version is stored."""

    version: int
    ledger_id: int
    entry_id: int
    storage_cluster: str
    hash: str

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "ledgerId": self.ledger_id,
            "entryId": self.entry_id,
            "storageCluster": self.storage_cluster,
            "hash": self.hash,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> IndexEntry:
        try:
            return cls(
                int(doc["version"]),
                int(doc["ledgerId"]),
                int(doc["entryId"]),
                str(doc["storageCluster"]),
                str(doc["hash"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaStorageError(f"malformed schema index entry {doc!r}: {exc}") from None


@dataclass(frozen=True)
class Locator:
    """A schema id's index as read, with the metadata version to compare-and-swap on."""

    index: tuple[IndexEntry, ...]
    stat_version: int  # -1: no locator yet

    @property
    def next_version(self) -> int:
        return self.index[-1].version + 1 if self.index else 0


@dataclass(frozen=True)
class StoredSchema:
    """One version as stored: the schema (empty for a delete), when, and by whom."""

    version: int
    schema: SchemaData
    timestamp: int
    deleted: bool = False
    user: str = ""


def _encode_entry(schema_id: str, stored: StoredSchema) -> bytes:
    doc = {
        "schemaId": schema_id,
        "type": stored.schema.type.name,
        "schema": base64.b64encode(stored.schema.data).decode("ascii"),
        "props": dict(stored.schema.properties),
        "timestamp": stored.timestamp,
        "deleted": stored.deleted,
        "user": stored.user,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _decode_entry(version: int, data: bytes) -> StoredSchema:
    try:
        doc = json.loads(data.decode("utf-8"))
        schema = SchemaData(
            SchemaType[doc["type"]],
            base64.b64decode(doc["schema"], validate=True),
            {str(k): str(v) for k, v in doc.get("props", {}).items()},
        )
        return StoredSchema(
            version,
            schema,
            int(doc["timestamp"]),
            bool(doc.get("deleted", False)),
            str(doc.get("user", "")),
        )
    except (
        UnicodeDecodeError,
        json.JSONDecodeError,
        KeyError,
        TypeError,
        ValueError,
        binascii.Error,
    ) as exc:
        raise SchemaStorageError(f"schema version {version} is unreadable: {exc}") from None


class SchemaStorage:
    """Schema versions in ledgers, indexed by locators (see the module docstring)."""

    def __init__(self, metadata: MetadataStore, storage: StorageRouting, clock: Clock) -> None:
        self._metadata = metadata
        self._storage = storage
        self._clock = clock
        # Versions never change once written: decoded entries are cached by ledger id.
        self._cache: OrderedDict[int, StoredSchema] = OrderedDict()

    @staticmethod
    def locator_path(schema_id: str) -> str:
        """``/schemas/<tenant>/<ns>/<topic>``."""
        return f"{SCHEMAS_ROOT}/{schema_id}"

    async def locator(self, schema_id: str) -> Locator:
        """The schema id's index (empty, at stat version -1, when it has none)."""
        got = await self._metadata.get(self.locator_path(schema_id))
        if got is None:
            return Locator((), -1)
        data, stat = got
        try:
            doc = json.loads(data.decode("utf-8"))
            entries = tuple(IndexEntry.from_json(e) for e in doc["index"])
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SchemaStorageError(
                f"the schema locator of {schema_id} is corrupt: {exc}"
            ) from None
        return Locator(entries, stat.version)

    async def read(self, entry: IndexEntry) -> StoredSchema:
        """The version ``entry`` points to (from the cluster that holds its ledger)."""
        cached = self._cache.get(entry.ledger_id)
        if cached is not None:
            self._cache.move_to_end(entry.ledger_id)
            return cached
        client = self._storage.client_for(entry.storage_cluster)
        handle = await client.open_ledger(entry.ledger_id, recovery=False)
        try:
            entries = await handle.read_entries(entry.entry_id, entry.entry_id)
        finally:
            await handle.close()
        if not entries:
            raise SchemaStorageError(
                f"schema version {entry.version} is missing from ledger {entry.ledger_id}"
            )
        stored = _decode_entry(entry.version, entries[0].data)
        self._cache[entry.ledger_id] = stored
        if len(self._cache) > _CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return stored

    async def read_all(self, locator: Locator) -> list[StoredSchema]:
        """Every version of an index, oldest first."""
        return [await self.read(entry) for entry in locator.index]

    async def append(
        self,
        schema_id: str,
        locator: Locator,
        schema: SchemaData,
        *,
        deleted: bool = False,
        user: str = "",
    ) -> StoredSchema:
        """Write ``schema`` as version ``locator.next_version`` and publish it in the index.

        Raises:
            BadVersion: the locator changed since ``locator`` was read (another writer won);
                nothing was published and the new ledger was deleted.
        """
        stored = StoredSchema(locator.next_version, schema, self._clock.now_ms(), deleted, user)
        client = self._storage.active
        handle = await client.create_ledger(
            custom_metadata={
                "application": b"pulsar",
                "component": b"schema",
                "pulsar/schemaId": schema_id.encode(),
            }
        )
        try:
            entry_id = await handle.add_entry(_encode_entry(schema_id, stored))
        finally:
            await handle.close()
        entry = IndexEntry(
            stored.version, handle.ledger_id, entry_id, client.cluster_name, schema.hash
        )
        doc = {"index": [e.to_json() for e in (*locator.index, entry)]}
        try:
            await self._metadata.put(
                self.locator_path(schema_id),
                json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(),
                locator.stat_version,
            )
        except BaseException:
            await self._delete_ledger(client.cluster_name, handle.ledger_id)
            raise
        self._cache[handle.ledger_id] = stored
        log.info(
            "schema %s: version %d stored in ledger %d%s",
            schema_id,
            stored.version,
            handle.ledger_id,
            " (deleted)" if deleted else "",
        )
        return stored

    async def delete_all(self, schema_id: str) -> Sequence[IndexEntry]:
        """Remove the locator, then every version's ledger; returns what was removed."""
        locator = await self.locator(schema_id)
        if locator.stat_version < 0:
            return ()
        try:
            await self._metadata.delete(self.locator_path(schema_id), locator.stat_version)
        except BadVersion:
            # A version was added meanwhile: start again with the new index.
            return await self.delete_all(schema_id)
        for entry in locator.index:
            self._cache.pop(entry.ledger_id, None)
            await self._delete_ledger(entry.storage_cluster, entry.ledger_id)
        log.info("schema %s: deleted with its %d versions", schema_id, len(locator.index))
        return locator.index

    async def _delete_ledger(self, cluster: str, ledger_id: int) -> None:
        try:
            await self._storage.client_for(cluster).delete_ledger(ledger_id)
        except Exception as exc:
            log.warning("schema ledger %d of %s was not deleted: %s", ledger_id, cluster, exc)


__all__ = [
    "SCHEMAS_ROOT",
    "IndexEntry",
    "Locator",
    "SchemaStorage",
    "SchemaStorageError",
    "StoredSchema",
]
