"""Tenants and namespaces in the metadata store: what exists, and each namespace's policies.

The module is named as Pulsar names this layer: its ``org.apache.pulsar.broker.resources``
package holds the typed access to each kind of metadata (``TenantResources``,
``NamespaceResources``); :class:`BrokerResources` is those two for a Braid broker, so the code can
be read beside Pulsar's. The scalable-topic metadata is :mod:`braid.scalable.resources`.

Layout (Pulsar's): ``/admin/policies/{tenant}`` holds the tenant's ``TenantInfo`` JSON
(``adminRoles``, ``allowedClusters``) and ``/admin/policies/{tenant}/{namespace}`` the namespace's
``Policies`` JSON (``deduplicationEnabled``, ``autoTopicCreationOverride``, ``retention_policies``,
PIP-483's ``scalableTopicAutoScalePolicy``, ...). Keys this version does not model are kept and
written back unchanged, so a newer writer's fields survive an older one's update.

Every read-modify-write is a compare-and-swap on the node's version, retried on conflict
(``docs/architecture.md#binding-decisions``). The broker asks
:meth:`BrokerResources.get_namespace_policies` when it loads a topic; the admin API does the CRUD;
``braid standalone`` calls :meth:`BrokerResources.ensure_default_namespace`. While the metadata
store is unreachable, reads answer what they last read (:mod:`braid.metadata.last_known`, marked
stale); writes fail as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from braid.broker.backlog_quota import (
    InvalidBacklogQuota,
    QuotaMap,
    check_ttl,
    quota_map_from_json,
    quota_map_to_json,
)
from braid.broker.schemas.model import InvalidSchemaSetting, SchemaCompatibilityStrategy
from braid.core.errors import (
    AlreadyExistsError,
    BraidError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
)
from braid.core.names import (
    DEFAULT_NAMESPACE,
    DEFAULT_TENANT,
    InvalidTopicName,
    check_namespace,
    check_tenant,
)
from braid.metadata.api import BadVersion, MetadataStore, NodeNotEmpty, NodeNotFound
from braid.metadata.last_known import LastKnownReads
from braid.security.authorization import POLICIES_KEY as AUTH_POLICIES_KEY
from braid.security.authorization import AuthPolicies, InvalidAuthPolicies

#: Root of tenant and namespace policies in the metadata store.
POLICIES_ROOT = "/admin/policies"

#: How many times a read-modify-write is retried after losing a compare-and-swap.
_CAS_ATTEMPTS = 20


class ResourceError(BraidError):
    """Root of tenant/namespace errors."""


class InvalidResourceName(ResourceError, InvalidInputError):
    """A tenant or namespace name with characters Pulsar does not allow."""


class InvalidPolicies(ResourceError, InvalidInputError):
    """A tenant-info or namespace-policies document that is not valid."""


class TenantNotFound(ResourceError, NotFoundError):
    """The tenant does not exist."""


class NamespaceNotFound(ResourceError, NotFoundError):
    """The namespace does not exist (or its tenant does not)."""


class TenantAlreadyExists(ResourceError, AlreadyExistsError):
    """Creating a tenant that exists."""


class NamespaceAlreadyExists(ResourceError, AlreadyExistsError):
    """Creating a namespace that exists."""


class TenantNotEmpty(ResourceError, IllegalStateError):
    """Deleting a tenant that still has namespaces."""


class NamespaceNotEmpty(ResourceError, IllegalStateError):
    """Deleting a namespace that still has topics."""


def check_name(kind: str, name: str) -> str:
    """Return ``name`` if it is a valid tenant/namespace name, else raise InvalidResourceName.

    The rule is the one topic names use (:func:`braid.core.names.check_tenant`,
    :func:`~braid.core.names.check_namespace`), so a namespace that can be created can also hold
    topics.
    """
    check = check_tenant if kind == "tenant" else check_namespace
    try:
        return check(name)
    except InvalidTopicName as exc:
        raise InvalidResourceName(f"invalid {kind} name {name!r}: {exc}") from None


# --- documents ---------------------------------------------------------------------------------


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


def _str_list(doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key, [])
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidPolicies(f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class TenantInfo:
    """Pulsar's ``TenantInfo``: who administers a tenant and which clusters it may use."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The REST/metadata document (camelCase keys)."""
        return {
            "adminRoles": list(self.admin_roles),
            "allowedClusters": list(self.allowed_clusters),
        }

    @classmethod
    def from_json(cls, doc: object) -> TenantInfo:
        """Parse the document; raises :class:`InvalidPolicies`."""
        if not isinstance(doc, dict):
            raise InvalidPolicies(f"tenant info must be a JSON object, got {doc!r}")
        return cls(_str_list(doc, "adminRoles"), _str_list(doc, "allowedClusters"))


@dataclass(frozen=True)
class RetentionPolicies:
    """How long/how much consumed data a namespace keeps (``-1`` = unlimited)."""

    retention_time_in_minutes: int = 0
    retention_size_in_mb: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "retentionTimeInMinutes": self.retention_time_in_minutes,
            "retentionSizeInMB": self.retention_size_in_mb,
        }

    @classmethod
    def from_json(cls, doc: object) -> RetentionPolicies:
        if not isinstance(doc, dict):
            raise InvalidPolicies(f"retention_policies must be a JSON object, got {doc!r}")
        minutes = doc.get("retentionTimeInMinutes", 0)
        size = doc.get("retentionSizeInMB", 0)
        for key, value in (("retentionTimeInMinutes", minutes), ("retentionSizeInMB", size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < -1:
                raise InvalidPolicies(f"{key} must be an integer >= -1, got {value!r}")
        return cls(minutes, size)


@dataclass(frozen=True)
class PersistencePolicies:
    """Pulsar's namespace ``PersistencePolicies``: the ensemble, write quorum and ack quorum of
    the namespace's new ledgers (topics and cursors), and the cursors' mark-delete rate."""

    bookkeeper_ensemble: int
    bookkeeper_write_quorum: int
    bookkeeper_ack_quorum: int
    managed_ledger_max_mark_delete_rate: float = 0.0

    def __post_init__(self) -> None:
        e, w, a = self.bookkeeper_ensemble, self.bookkeeper_write_quorum, self.bookkeeper_ack_quorum
        if not 1 <= a <= w <= e:
            raise InvalidPolicies(
                f"need 1 <= bookkeeperAckQuorum ({a}) <= bookkeeperWriteQuorum ({w}) <= "
                f"bookkeeperEnsemble ({e})"
            )
        if self.managed_ledger_max_mark_delete_rate < 0:
            raise InvalidPolicies(
                "managedLedgerMaxMarkDeleteRate must be 0 or more, got "
                f"{self.managed_ledger_max_mark_delete_rate}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "bookkeeperEnsemble": self.bookkeeper_ensemble,
            "bookkeeperWriteQuorum": self.bookkeeper_write_quorum,
            "bookkeeperAckQuorum": self.bookkeeper_ack_quorum,
            "managedLedgerMaxMarkDeleteRate": self.managed_ledger_max_mark_delete_rate,
        }

    @classmethod
    def from_json(cls, doc: object) -> PersistencePolicies:
        if not isinstance(doc, dict):
            raise InvalidPolicies(f"persistence policies must be a JSON object, got {doc!r}")
        values = []
        for key in ("bookkeeperEnsemble", "bookkeeperWriteQuorum", "bookkeeperAckQuorum"):
            value = doc.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidPolicies(f"{key} must be an integer, got {value!r}")
            values.append(value)
        rate = doc.get("managedLedgerMaxMarkDeleteRate", 0.0)
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise InvalidPolicies(f"managedLedgerMaxMarkDeleteRate must be a number, got {rate!r}")
        return cls(values[0], values[1], values[2], float(rate))


@dataclass(frozen=True)
class AutoTopicCreationOverride:
    """Namespace override of the broker's ``allowAutoTopicCreation``,
    ``allowAutoTopicCreationType`` and ``defaultNumPartitions``."""

    allow_auto_topic_creation: bool
    topic_type: str = "non-partitioned"
    default_num_partitions: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "allowAutoTopicCreation": self.allow_auto_topic_creation,
            "topicType": self.topic_type,
        }
        if self.default_num_partitions is not None:
            doc["defaultNumPartitions"] = self.default_num_partitions
        return doc

    @classmethod
    def from_json(cls, doc: object) -> AutoTopicCreationOverride:
        if not isinstance(doc, dict) or not isinstance(doc.get("allowAutoTopicCreation"), bool):
            raise InvalidPolicies(
                f"autoTopicCreationOverride needs a boolean allowAutoTopicCreation, got {doc!r}"
            )
        topic_type = doc.get("topicType", "non-partitioned")
        if topic_type not in ("non-partitioned", "partitioned"):
            raise InvalidPolicies(
                f"topicType must be non-partitioned or partitioned: {topic_type!r}"
            )
        partitions = doc.get("defaultNumPartitions")
        if partitions is not None and (
            isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
        ):
            raise InvalidPolicies(f"defaultNumPartitions must be an integer >= 1: {partitions!r}")
        return cls(doc["allowAutoTopicCreation"], topic_type, partitions)


_MODELLED = (
    "deduplicationEnabled",
    "autoTopicCreationOverride",
    "retention_policies",
    "persistence",
    "scalableTopicAutoScalePolicy",
    "compaction_threshold",
    "schema_compatibility_strategy",
    "is_allow_auto_update_schema",
    "schema_validation_enforced",
    "backlog_quota_map",
    "message_ttl_in_seconds",
)


def _optional_bool(doc: Mapping[str, Any], key: str) -> bool | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, bool):
        raise InvalidPolicies(f"{key} must be a boolean, got {value!r}")
    return value


def _strategy(doc: Mapping[str, Any]) -> SchemaCompatibilityStrategy | None:
    value = doc.get("schema_compatibility_strategy")
    if value is None:
        return None
    try:
        strategy = SchemaCompatibilityStrategy.parse(value)
    except InvalidSchemaSetting as exc:
        raise InvalidPolicies(str(exc)) from None
    return None if strategy is SchemaCompatibilityStrategy.UNDEFINED else strategy


@dataclass(frozen=True)
class NamespacePolicies:
    """Pulsar's namespace ``Policies``, the fields Braid acts on; ``None`` = broker default.

    ``extra`` keeps every other key of the stored document so it is written back unchanged.
    """

    deduplication_enabled: bool | None = None
    auto_topic_creation: AutoTopicCreationOverride | None = None
    retention: RetentionPolicies | None = None
    #: Ensemble and quorums of the namespace's new ledgers (``None``: the broker's
    #: ``managedLedgerDefault*`` keys).
    persistence: PersistencePolicies | None = None
    #: PIP-483 ``AutoScalePolicyOverride`` as stored (interpreted by the auto-scaler).
    scalable_topic_auto_scale_policy: Mapping[str, Any] | None = None
    #: Bytes after a topic's compaction horizon that trigger compaction (0: never).
    compaction_threshold: int | None = None
    #: Pulsar's ``schema_compatibility_strategy`` (``None`` = the broker's
    #: ``schemaCompatibilityStrategy``), ``is_allow_auto_update_schema`` (``None`` = true) and
    #: ``schema_validation_enforced`` (``None`` = the broker's ``isSchemaValidationEnforced``).
    schema_compatibility_strategy: SchemaCompatibilityStrategy | None = None
    is_allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool | None = None
    #: Pulsar's ``backlog_quota_map`` (``None`` = the broker's ``backlogQuotaDefault*``) and
    #: ``message_ttl_in_seconds`` (``None`` = ``ttlDurationDefaultInSeconds``; 0 = never).
    backlog_quota_map: QuotaMap | None = None
    message_ttl_in_seconds: int | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)

    def to_json(self) -> dict[str, Any]:
        """The REST/metadata document (Pulsar's key names)."""
        doc: dict[str, Any] = dict(self.extra)
        if self.deduplication_enabled is not None:
            doc["deduplicationEnabled"] = self.deduplication_enabled
        if self.auto_topic_creation is not None:
            doc["autoTopicCreationOverride"] = self.auto_topic_creation.to_json()
        if self.retention is not None:
            doc["retention_policies"] = self.retention.to_json()
        if self.persistence is not None:
            doc["persistence"] = self.persistence.to_json()
        if self.scalable_topic_auto_scale_policy is not None:
            doc["scalableTopicAutoScalePolicy"] = dict(self.scalable_topic_auto_scale_policy)
        if self.compaction_threshold is not None:
            doc["compaction_threshold"] = self.compaction_threshold
        if self.schema_compatibility_strategy is not None:
            doc["schema_compatibility_strategy"] = self.schema_compatibility_strategy.value
        if self.is_allow_auto_update_schema is not None:
            doc["is_allow_auto_update_schema"] = self.is_allow_auto_update_schema
        if self.schema_validation_enforced is not None:
            doc["schema_validation_enforced"] = self.schema_validation_enforced
        if self.backlog_quota_map is not None:
            doc["backlog_quota_map"] = quota_map_to_json(self.backlog_quota_map)
        if self.message_ttl_in_seconds is not None:
            doc["message_ttl_in_seconds"] = self.message_ttl_in_seconds
        return doc

    @classmethod
    def from_json(cls, doc: object) -> NamespacePolicies:
        """Parse the document; raises :class:`InvalidPolicies`."""
        if not isinstance(doc, dict):
            raise InvalidPolicies(f"namespace policies must be a JSON object, got {doc!r}")
        dedup = doc.get("deduplicationEnabled")
        if dedup is not None and not isinstance(dedup, bool):
            raise InvalidPolicies(f"deduplicationEnabled must be a boolean, got {dedup!r}")
        creation = doc.get("autoTopicCreationOverride")
        retention = doc.get("retention_policies")
        persistence = doc.get("persistence")
        scale = doc.get("scalableTopicAutoScalePolicy")
        if scale is not None and not isinstance(scale, dict):
            raise InvalidPolicies(f"scalableTopicAutoScalePolicy must be an object, got {scale!r}")
        threshold = doc.get("compaction_threshold")
        if threshold is not None:
            check_compaction_threshold(threshold)
        try:  # Pulsar's auth_policies stay in ``extra``; checked so no bad grant is stored
            AuthPolicies.from_json(doc.get(AUTH_POLICIES_KEY))
        except InvalidAuthPolicies as exc:
            raise InvalidPolicies(str(exc)) from None
        quotas, ttl = doc.get("backlog_quota_map"), doc.get("message_ttl_in_seconds")
        try:
            quota_map = None if quotas is None else quota_map_from_json(quotas)
            ttl = None if ttl is None else check_ttl(ttl)
        except InvalidBacklogQuota as exc:
            raise InvalidPolicies(str(exc)) from None
        return cls(
            deduplication_enabled=dedup,
            auto_topic_creation=(
                None if creation is None else AutoTopicCreationOverride.from_json(creation)
            ),
            retention=None if retention is None else RetentionPolicies.from_json(retention),
            persistence=None if persistence is None else PersistencePolicies.from_json(persistence),
            scalable_topic_auto_scale_policy=None if scale is None else _frozen(scale),
            compaction_threshold=threshold,
            schema_compatibility_strategy=_strategy(doc),
            is_allow_auto_update_schema=_optional_bool(doc, "is_allow_auto_update_schema"),
            schema_validation_enforced=_optional_bool(doc, "schema_validation_enforced"),
            backlog_quota_map=quota_map,
            message_ttl_in_seconds=ttl,
            extra=_frozen({k: v for k, v in doc.items() if k not in _MODELLED}),
        )

    def is_deduplication_enabled(self, broker_default: bool) -> bool:
        """The namespace setting if set, else the broker's ``brokerDeduplicationEnabled``."""
        return broker_default if self.deduplication_enabled is None else self.deduplication_enabled

    def compaction_threshold_or(self, broker_default: int) -> int:
        """The namespace's ``compaction_threshold`` if set, else the broker's
        ``brokerServiceCompactionThresholdInBytes``."""
        return broker_default if self.compaction_threshold is None else self.compaction_threshold

    def is_auto_topic_creation_allowed(self, broker_default: bool) -> bool:
        """The namespace override if set, else the broker's ``allowAutoTopicCreation``."""
        if self.auto_topic_creation is None:
            return broker_default
        return self.auto_topic_creation.allow_auto_topic_creation


def check_compaction_threshold(value: object) -> int:
    """A compaction threshold in bytes: an integer, 0 or more (Pulsar answers 412 otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidPolicies(f"compactionThreshold must be 0 or more, got {value!r}")
    return value


def _encode(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes, what: str) -> object:
    try:
        return json.loads(data.decode("utf-8")) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidPolicies(f"stored {what} is not valid JSON: {exc}") from None


class BrokerResources:
    """Tenant and namespace CRUD over a :class:`MetadataStore`, with CAS on every update."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._store = metadata
        # Tenants, namespaces and policies stay readable (marked stale) while the store is
        # unreachable: every new producer, consumer and admin read needs them (ADR 0044).
        self._metadata: MetadataStore = LastKnownReads(metadata)

    @property
    def metadata(self) -> MetadataStore:
        """The store these resources live in."""
        return self._store

    # --- paths ---

    @staticmethod
    def tenant_path(tenant: str) -> str:
        return f"{POLICIES_ROOT}/{check_name('tenant', tenant)}"

    @staticmethod
    def namespace_path(tenant: str, namespace: str) -> str:
        return f"{BrokerResources.tenant_path(tenant)}/{check_name('namespace', namespace)}"

    # --- tenants ---

    async def list_tenants(self) -> list[str]:
        """Every tenant, sorted."""
        return await self._metadata.children(POLICIES_ROOT)

    async def tenant_exists(self, tenant: str) -> bool:
        return await self._metadata.exists(self.tenant_path(tenant)) is not None

    async def get_tenant(self, tenant: str) -> TenantInfo:
        """Raises :class:`TenantNotFound`."""
        got = await self._metadata.get(self.tenant_path(tenant))
        if got is None:
            raise TenantNotFound(f"tenant {tenant!r} does not exist")
        return TenantInfo.from_json(_decode(got[0], f"tenant {tenant!r}"))

    async def create_tenant(self, tenant: str, info: TenantInfo) -> None:
        """Raises :class:`TenantAlreadyExists`."""
        try:
            await self._metadata.put(self.tenant_path(tenant), _encode(info.to_json()), -1)
        except BadVersion:
            raise TenantAlreadyExists(f"tenant {tenant!r} already exists") from None

    async def update_tenant(self, tenant: str, info: TenantInfo) -> None:
        """Replace a tenant's info. Raises :class:`TenantNotFound`."""

        def apply(_: TenantInfo) -> TenantInfo:
            return info

        await self._update_tenant(tenant, apply)

    async def _update_tenant(self, tenant: str, mutate: Callable[[TenantInfo], TenantInfo]) -> None:
        path = self.tenant_path(tenant)
        for _ in range(_CAS_ATTEMPTS):
            got = await self._metadata.get(path)
            if got is None:
                raise TenantNotFound(f"tenant {tenant!r} does not exist")
            new = mutate(TenantInfo.from_json(_decode(got[0], f"tenant {tenant!r}")))
            try:
                await self._metadata.put(path, _encode(new.to_json()), got[1].version)
                return
            except BadVersion:
                continue
        raise BadVersion(f"tenant {tenant!r} kept changing during an update")

    async def delete_tenant(self, tenant: str) -> None:
        """Raises :class:`TenantNotFound`, or :class:`TenantNotEmpty` while it has namespaces."""
        path = self.tenant_path(tenant)
        namespaces = await self._metadata.children(path)
        if namespaces:
            raise TenantNotEmpty(f"tenant {tenant!r} still has namespaces: {', '.join(namespaces)}")
        try:
            await self._metadata.delete(path)
        except NodeNotFound:
            raise TenantNotFound(f"tenant {tenant!r} does not exist") from None
        except NodeNotEmpty:
            # A namespace was created between the check and the delete.
            raise TenantNotEmpty(f"tenant {tenant!r} still has namespaces") from None

    # --- namespaces ---

    async def list_namespaces(self, tenant: str) -> list[str]:
        """``tenant/namespace`` names of the tenant's namespaces, sorted.

        Raises :class:`TenantNotFound`.
        """
        if not await self.tenant_exists(tenant):
            raise TenantNotFound(f"tenant {tenant!r} does not exist")
        return [f"{tenant}/{ns}" for ns in await self._metadata.children(self.tenant_path(tenant))]

    async def namespace_exists(self, tenant: str, namespace: str) -> bool:
        return await self._metadata.exists(self.namespace_path(tenant, namespace)) is not None

    async def check_namespace_exists(self, tenant: str, namespace: str) -> None:
        """Raises :class:`NamespaceNotFound` unless ``tenant/namespace`` exists."""
        if not await self.namespace_exists(tenant, namespace):
            raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")

    async def create_namespace(
        self, tenant: str, namespace: str, policies: NamespacePolicies | None = None
    ) -> None:
        """Raises :class:`TenantNotFound`, :class:`NamespaceAlreadyExists`."""
        path = self.namespace_path(tenant, namespace)
        if not await self.tenant_exists(tenant):
            raise TenantNotFound(f"tenant {tenant!r} does not exist")
        doc = (policies or NamespacePolicies()).to_json()
        try:
            await self._metadata.put(path, _encode(doc), -1)
        except BadVersion:
            raise NamespaceAlreadyExists(f"namespace {tenant}/{namespace} already exists") from None

    async def get_namespace_policies(self, tenant: str, namespace: str) -> NamespacePolicies:
        """Raises :class:`NamespaceNotFound`."""
        got = await self._metadata.get(self.namespace_path(tenant, namespace))
        if got is None:
            raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")
        return NamespacePolicies.from_json(_decode(got[0], f"namespace {tenant}/{namespace}"))

    async def update_namespace_policies(
        self,
        tenant: str,
        namespace: str,
        mutate: Callable[[NamespacePolicies], NamespacePolicies],
    ) -> NamespacePolicies:
        """Read, apply ``mutate`` and write back with CAS (retried); returns the new policies.

        Raises :class:`NamespaceNotFound`.
        """
        path = self.namespace_path(tenant, namespace)
        for _ in range(_CAS_ATTEMPTS):
            got = await self._metadata.get(path)
            if got is None:
                raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")
            current = NamespacePolicies.from_json(
                _decode(got[0], f"namespace {tenant}/{namespace}")
            )
            new = mutate(current)
            try:
                await self._metadata.put(path, _encode(new.to_json()), got[1].version)
                return new
            except BadVersion:
                continue
        raise BadVersion(f"namespace {tenant}/{namespace} kept changing during an update")

    async def set_deduplication(self, tenant: str, namespace: str, enabled: bool | None) -> None:
        """Turn namespace deduplication on/off (``None`` = follow the broker default)."""
        await self.update_namespace_policies(
            tenant, namespace, lambda p: replace(p, deduplication_enabled=enabled)
        )

    async def set_compaction_threshold(
        self, tenant: str, namespace: str, threshold: int | None
    ) -> None:
        """Set the namespace's compaction threshold (``None`` = follow the broker default)."""
        if threshold is not None:
            check_compaction_threshold(threshold)
        await self.update_namespace_policies(
            tenant, namespace, lambda p: replace(p, compaction_threshold=threshold)
        )

    async def delete_namespace(
        self, tenant: str, namespace: str, *, topics: Sequence[str] = ()
    ) -> None:
        """Delete a namespace.

        Args:
            topics: the namespace's topics as the caller (the admin API, which knows the broker)
                sees them; deleting refuses while any exists, as Pulsar does.

        Raises:
            NamespaceNotFound, NamespaceNotEmpty.
        """
        path = self.namespace_path(tenant, namespace)
        if topics:
            raise NamespaceNotEmpty(
                f"namespace {tenant}/{namespace} still has topics: {', '.join(topics)}"
            )
        try:
            await self._metadata.delete(path)
        except NodeNotFound:
            raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist") from None
        except NodeNotEmpty:
            raise NamespaceNotEmpty(f"namespace {tenant}/{namespace} is not empty") from None

    async def ensure_default_namespace(self, cluster_name: str = "standalone") -> None:
        """Create tenant ``public`` and namespace ``public/default`` unless they exist.

        Idempotent and safe against a concurrent caller (standalone runs it at every start).
        """
        try:
            await self.create_tenant(DEFAULT_TENANT, TenantInfo((), (cluster_name,)))
        except TenantAlreadyExists:
            pass
        try:
            await self.create_namespace(DEFAULT_TENANT, DEFAULT_NAMESPACE)
        except NamespaceAlreadyExists:
            pass


__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_TENANT",
    "POLICIES_ROOT",
    "AutoTopicCreationOverride",
    "BrokerResources",
    "InvalidPolicies",
    "InvalidResourceName",
    "NamespaceAlreadyExists",
    "NamespaceNotEmpty",
    "NamespaceNotFound",
    "NamespacePolicies",
    "PersistencePolicies",
    "ResourceError",
    "RetentionPolicies",
    "TenantAlreadyExists",
    "TenantInfo",
    "TenantNotEmpty",
    "TenantNotFound",
    "check_compaction_threshold",
    "check_name",
]
