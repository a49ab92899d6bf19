"""A cluster's metadata: what ``braid initialize-cluster-metadata`` writes and ``braid broker``
checks (Pulsar's ``PulsarClusterMetadataSetup``).

Initialising a cluster writes, each node only if absent (so running it twice, or for a second
cluster on the same stores, changes nothing it wrote before):

* in the **configuration store**: ``/admin/clusters/{cluster}`` with Pulsar's ``ClusterData``
  (``serviceUrl``, ``serviceUrlTls``, ``brokerServiceUrl``, ``brokerServiceUrlTls``), the
  ``/admin/clusters/global`` marker, the tenants ``public`` and ``pulsar`` (``TenantInfo`` allowing
  the cluster; an existing tenant gets the cluster added, with CAS), the namespaces
  ``public/default`` and ``pulsar/system`` with ``bundles`` cut into ``--default-namespace-bundles``
  bundles (Pulsar writes 16) and ``replication_clusters`` naming the cluster, and the partitioned
  topic ``persistent://pulsar/system/transaction_coordinator_assign`` with one partition per
  transaction coordinator (``--num-transaction-coordinators``, Pulsar's default 16; ADR 0070);
* in the **metadata store**: the roots ``/namespace`` (bundle ownership), ``/loadbalance/brokers``
  (the broker registry) and ``/managed-ledgers``.

A broker refuses to start until ``/admin/clusters/{clusterName}`` exists
(:func:`check_initialized`), naming the command to run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from braid.broker.bundles import bundles_data
from braid.broker.partitions import metadata_path
from braid.broker.resources import POLICIES_ROOT
from braid.broker.transactions.coordinator import ASSIGN_TOPIC
from braid.core.errors import IllegalStateError
from braid.core.names import TopicName
from braid.core.partitions import check_partition_count
from braid.metadata.api import BadVersion, MetadataStore

#: Root of the clusters' data (configuration store).
CLUSTERS_ROOT = "/admin/clusters"
#: Roots a metadata store of a cluster holds.
LOCAL_ROOTS = ("/namespace", "/loadbalance/brokers", "/managed-ledgers")
#: Namespaces made by initialisation (Pulsar's default and system namespaces).
DEFAULT_NAMESPACES = (("public", "default"), ("pulsar", "system"))
#: Bundles of those namespaces unless told otherwise (Pulsar's default).
DEFAULT_NAMESPACE_BUNDLES = 16
#: Transaction coordinators (partitions of the assign topic) unless told otherwise (Pulsar's).
DEFAULT_TRANSACTION_COORDINATORS = 16

_CAS_ATTEMPTS = 20


class ClusterNotInitialized(IllegalStateError):
    """The metadata store holds no cluster of this name."""


@dataclass(frozen=True)
class ClusterData:
    """Pulsar's ``ClusterData``: where a cluster's web service and brokers are reached."""

    service_url: str
    broker_service_url: str
    service_url_tls: str = ""
    broker_service_url_tls: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "serviceUrl": self.service_url,
            "serviceUrlTls": self.service_url_tls,
            "brokerServiceUrl": self.broker_service_url,
            "brokerServiceUrlTls": self.broker_service_url_tls,
        }


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


async def _create_if_absent(store: MetadataStore, path: str, doc: Any) -> bool:
    """Create ``path`` with ``doc``; ``False`` if it existed (left unchanged)."""
    if await store.exists(path) is not None:
        return False
    try:
        await store.put(path, b"" if doc is None else _encode(doc), -1)
    except BadVersion:
        return False
    return True


async def _add_to_list(store: MetadataStore, path: str, key: str, cluster: str) -> None:
    """Add ``cluster`` to the list ``key`` of the JSON document at ``path`` (CAS, retried)."""
    for _ in range(_CAS_ATTEMPTS):
        got = await store.get(path)
        if got is None:
            return
        try:
            doc = json.loads(got[0])
        except ValueError:
            return  # not ours to repair; the admin API reports it
        values = list(doc.get(key) or [])
        if cluster in values:
            return
        doc[key] = [*values, cluster]
        try:
            await store.put(path, _encode(doc), got[1].version)
            return
        except BadVersion:
            continue
    raise BadVersion(f"{path} kept changing while adding cluster {cluster}")


async def initialize_cluster_metadata(
    store: MetadataStore,
    configuration_store: MetadataStore,
    cluster: str,
    data: ClusterData,
    *,
    namespace_bundles: int = DEFAULT_NAMESPACE_BUNDLES,
    transaction_coordinators: int = DEFAULT_TRANSACTION_COORDINATORS,
) -> list[str]:
    """Write the cluster's metadata (see the module docstring); returns the paths created.

    Raises:
        InvalidPartitionCount: ``transaction_coordinators`` is not a valid partition count.
    """
    check_partition_count(transaction_coordinators)
    created: list[str] = []

    async def create(target: MetadataStore, path: str, doc: Any) -> None:
        if await _create_if_absent(target, path, doc):
            created.append(path)

    for root in LOCAL_ROOTS:
        await create(store, root, None)
    await create(configuration_store, f"{CLUSTERS_ROOT}/{cluster}", data.to_json())
    await create(configuration_store, f"{CLUSTERS_ROOT}/global", {})
    for tenant in dict(DEFAULT_NAMESPACES):
        path = f"{POLICIES_ROOT}/{tenant}"
        await create(configuration_store, path, {"adminRoles": [], "allowedClusters": [cluster]})
        await _add_to_list(configuration_store, path, "allowedClusters", cluster)
    for tenant, namespace in DEFAULT_NAMESPACES:
        path = f"{POLICIES_ROOT}/{tenant}/{namespace}"
        policies = {
            "bundles": bundles_data(namespace_bundles),
            "replication_clusters": [cluster],
        }
        await create(configuration_store, path, policies)
        await _add_to_list(configuration_store, path, "replication_clusters", cluster)
    assign = metadata_path(TopicName.parse(ASSIGN_TOPIC))
    await create(store, assign, {"partitions": transaction_coordinators, "properties": {}})
    return created


async def check_initialized(store: MetadataStore, cluster: str, store_url: str) -> ClusterData:
    """The cluster's data; raises :class:`ClusterNotInitialized` naming the command to run."""
    got = await store.get(f"{CLUSTERS_ROOT}/{cluster}")
    if got is None:
        raise ClusterNotInitialized(
            f"cluster {cluster!r} is not initialized in metadata store {store_url}: run "
            f"`braid initialize-cluster-metadata --cluster {cluster} --metadata-store "
            f"{store_url} --configuration-metadata-store {store_url} --web-service-url "
            "http://HOST:8080 --broker-service-url pulsar://HOST:6650` once, then start the brokers"
        )
    try:
        doc = json.loads(got[0])
        return ClusterData(
            service_url=str(doc.get("serviceUrl") or ""),
            broker_service_url=str(doc.get("brokerServiceUrl") or ""),
            service_url_tls=str(doc.get("serviceUrlTls") or ""),
            broker_service_url_tls=str(doc.get("brokerServiceUrlTls") or ""),
        )
    except (ValueError, AttributeError):
        return ClusterData("", "")


__all__ = [
    "CLUSTERS_ROOT",
    "DEFAULT_NAMESPACES",
    "DEFAULT_NAMESPACE_BUNDLES",
    "DEFAULT_TRANSACTION_COORDINATORS",
    "LOCAL_ROOTS",
    "ClusterData",
    "ClusterNotInitialized",
    "check_initialized",
    "initialize_cluster_metadata",
]
