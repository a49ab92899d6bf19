"""The storage-cluster registry in the broker's metadata store (PIP-470's Broker-ZK paths).

The root is ``bookieClusterConfigPath`` (:class:`RegistryPaths`); the paths below name the
default.
``/admin/bookie-clusters/<name>`` holds :class:`BookieClusterInfo` JSON; exactly one cluster is
``ACTIVE``. ``/admin/bookie-clusters/switch-target`` is the switch directive,
``/admin/bookie-clusters/switch-state`` the orchestrator's persisted state, and
``/admin/bookie-clusters/brokers/<origin>`` each started broker's ephemeral announcement; these are
reserved names, never listed as clusters. Every write is a compare-and-swap on the version read.

URI collisions (PIP-470's ``BookieClusterConfigManager``): two clusters may not share a
metadata-service URI. URIs are compared parsed (``sqlite:////a`` is ``sqlite:///a``; a ZooKeeper
URI is its host list plus chroot), so co-located clusters on one ZooKeeper must use different
chroots. BookKeeper's layout-qualified ZooKeeper URIs (``zk+null://``, ``zk+hierarchical://``...)
name the same store as ``zk://`` with the same hosts and chroot.

Every state read or written is shown to :class:`SwitchMetrics` (the ``switch_state`` gauge).
"""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

from braid.clusters.errors import BookieClusterNotFound, ClusterUriCollision
from braid.clusters.metrics import SwitchMetrics
from braid.core.errors import ConflictError, InvalidInputError
from braid.core.storage_switch import (
    RESERVED_NAMES,
    BookieClusterInfo,
    ClusterStatus,
    RegistryPaths,
    SwitchState,
    SwitchTarget,
)
from braid.metadata.api import BadVersion, InvalidStoreUrl, MetadataStore, NodeNotFound
from braid.metadata.url import parse_store_url


def uri_identity(uri: str) -> tuple[str, str, str]:
    """What makes two metadata-service URIs the same store: scheme, location, chroot.

    Raises:
        InvalidInputError: not a metadata store URL Braid can open.
    """
    try:
        parsed = parse_store_url(uri)
    except InvalidStoreUrl as exc:
        raise InvalidInputError(f"invalid metadataServiceUri: {exc}") from None
    hosts = ",".join(sorted(parsed.location.split(","))) if parsed.scheme == "zk" else None
    return (parsed.scheme, hosts or parsed.location, parsed.chroot)


class BookieClusterRegistry:
    """Reads and CAS-writes the registry, the switch directive and the switch state."""

    def __init__(
        self,
        metadata: MetadataStore,
        paths: RegistryPaths | None = None,
        metrics: SwitchMetrics | None = None,
    ) -> None:
        self._metadata = metadata
        self.paths = paths or RegistryPaths()
        self._metrics = metrics

    def path(self, name: str) -> str:
        return self.paths.cluster(name)

    def _broker_path(self, origin: str) -> str:
        return f"{self.paths.brokers}/{quote(origin, safe='')}"

    async def list(self) -> list[BookieClusterInfo]:
        """Every registered cluster, by name."""
        names = await self._metadata.children(self.paths.root)
        out = []
        for name in sorted(n for n in names if n not in RESERVED_NAMES):
            got = await self._metadata.get(f"{self.paths.root}/{name}")
            if got is not None:
                out.append(BookieClusterInfo.decode(got[0]))
        if self._metrics is not None:
            self._metrics.standby_registered = any(c.status is ClusterStatus.STANDBY for c in out)
        return out

    async def get(self, name: str) -> BookieClusterInfo:
        """One cluster. Raises :class:`BookieClusterNotFound`."""
        got = await self._metadata.get(self.path(name))
        if got is None:
            raise BookieClusterNotFound(f"storage cluster {name!r} is not registered")
        return BookieClusterInfo.decode(got[0])

    async def _get_versioned(self, name: str) -> tuple[BookieClusterInfo, int] | None:
        got = await self._metadata.get(self.path(name))
        if got is None:
            return None
        return BookieClusterInfo.decode(got[0]), got[1].version

    async def register(self, info: BookieClusterInfo) -> BookieClusterInfo:
        """Add a cluster, or update an existing one's status (same URI only).

        Raises:
            ClusterUriCollision: another cluster uses the same URI (or ZooKeeper chroot), or the
                name is registered with a different URI.
            InvalidInputError: a malformed URI.
        """
        identity = uri_identity(info.metadata_service_uri)
        for other in await self.list():
            if other.name == info.name:
                if uri_identity(other.metadata_service_uri) != identity:
                    raise ClusterUriCollision(
                        f"storage cluster {info.name!r} is registered with "
                        f"{other.metadata_service_uri!r}; a URI cannot be changed"
                    )
            elif uri_identity(other.metadata_service_uri) == identity:
                raise ClusterUriCollision(
                    f"metadataServiceUri {info.metadata_service_uri!r} collides with storage "
                    f"cluster {other.name!r} ({other.metadata_service_uri!r})"
                )
        while True:
            current = await self._get_versioned(info.name)
            version = -1 if current is None else current[1]
            try:
                await self._metadata.put(self.path(info.name), info.encode(), version)
            except BadVersion:
                continue
            if self._metrics is not None and info.status is ClusterStatus.STANDBY:
                self._metrics.standby_registered = True
            return info

    async def set_status(self, name: str, status: ClusterStatus) -> BookieClusterInfo:
        """CAS one cluster's status. Raises :class:`BookieClusterNotFound`."""
        while True:
            current = await self._get_versioned(name)
            if current is None:
                raise BookieClusterNotFound(f"storage cluster {name!r} is not registered")
            info, version = current
            updated = dataclasses.replace(info, status=status)
            try:
                await self._metadata.put(self.path(name), updated.encode(), version)
            except BadVersion:
                continue
            return updated

    # -- the switch directive and the orchestrator's state ----------------------------------------

    async def switch_target(self) -> tuple[SwitchTarget, int] | None:
        got = await self._metadata.get(self.paths.switch_target)
        if got is None:
            return None
        return SwitchTarget.decode(got[0]), got[1].version

    async def write_switch_target(self, target: SwitchTarget, expected_version: int) -> None:
        """CAS the directive. Raises ``BadVersion`` when another switch won."""
        await self._metadata.put(self.paths.switch_target, target.encode(), expected_version)

    async def announce(self, origin: str) -> None:
        """Mark the broker at ``origin`` alive (an ephemeral node: gone with its session)."""
        path = self._broker_path(origin)
        for _ in range(5):
            try:
                await self._metadata.put(path, origin.encode(), -1, ephemeral=True)
                return
            except BadVersion:
                pass
            # A previous incarnation's node (same URL) lingers until its dead session is
            # reaped: replace it with one of this session, which lives as long as we do.
            try:
                await self._metadata.delete(path)
            except NodeNotFound:
                pass
        raise ConflictError(f"another live broker keeps announcing the same URL {origin}")

    async def withdraw(self, origin: str) -> None:
        """Remove this broker's announcement (it stops orchestrating)."""
        try:
            await self._metadata.delete(self._broker_path(origin))
        except NodeNotFound:
            pass

    async def broker_alive(self, origin: str) -> bool:
        """Whether the broker at ``origin`` has announced itself and its session lives."""
        return await self._metadata.get(self._broker_path(origin)) is not None

    async def state(self) -> tuple[SwitchState, int] | None:
        got = await self._metadata.get(self.paths.switch_state)
        if got is None:
            return None
        state = SwitchState.decode(got[0])
        if self._metrics is not None:
            self._metrics.phase = state.phase
        return state, got[1].version

    async def write_state(self, state: SwitchState, expected_version: int) -> int:
        """CAS the state; returns the new version. Raises ``BadVersion``."""
        stat = await self._metadata.put(self.paths.switch_state, state.encode(), expected_version)
        if self._metrics is not None:
            self._metrics.phase = state.phase
        return stat.version

    @property
    def metadata(self) -> MetadataStore:
        return self._metadata


__all__ = ["BookieClusterRegistry", "uri_identity"]
