"""``AdminClient.namespaces``: the ``/admin/v2/namespaces`` group of :mod:`braid.admin.client`
(namespaces and their policies)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from braid.admin.client_topic_admin import NamespaceCaps
from braid.admin.client_transport import _Http, _namespace_path, _policy, _q, _tenant_path
from braid.core.errors import InvalidInputError


class Namespaces(NamespaceCaps):
    """``/admin/v2/namespaces``: namespaces (``tenant/namespace``) and their policies (the caps
    through ``get_policy`` / ``set_policy`` / ``remove_policy``)."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def bundles(self, namespace: str) -> dict[str, Any]:
        """The namespace's bundles: ``{"boundaries": [...], "numBundles": n}``."""
        result: dict[str, Any] = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/bundles"
        )
        return result

    def unload(
        self, namespace: str, bundle: str | None = None, destination: str | None = None
    ) -> None:
        """Unload the namespace's bundles (or one, ``0xLO_0xHI``): their owners close their
        topics and the clients move to other brokers (``destination``: this broker, host:port)."""
        path = f"/admin/v2/namespaces/{_namespace_path(namespace)}"
        if bundle is None:
            self._http.call("PUT", f"{path}/unload")
            return
        params = {"destinationBroker": destination} if destination else None
        self._http.call("PUT", f"{path}/{bundle}/unload", params=params)

    def split_bundle(self, namespace: str, bundle: str, *, unload: bool = False) -> None:
        """Cut the bundle ``0xLO_0xHI`` in two at the middle of its range."""
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/{bundle}/split",
            params={"unload": str(unload).lower()},
        )

    def list(self, tenant: str) -> list[str]:
        """The tenant's namespaces as ``tenant/namespace``."""
        result: list[str] = self._http.call("GET", f"/admin/v2/namespaces/{_tenant_path(tenant)}")
        return result

    def get(self, namespace: str) -> dict[str, Any]:
        """The namespace's policies (Pulsar's ``Policies`` keys; unset keys are absent)."""
        result: dict[str, Any] = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}"
        )
        return result

    def create(self, namespace: str, policies: Mapping[str, Any] | None = None) -> None:
        """Create a namespace, optionally with policies, e.g.
        ``{"deduplicationEnabled": True, "retention_policies": {"retentionTimeInMinutes": 60,
        "retentionSizeInMB": -1}}``."""
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}",
            body=None if policies is None else dict(policies),
        )

    def delete(self, namespace: str) -> None:
        """Delete a namespace without topics (409 otherwise)."""
        self._http.call("DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}")

    def get_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication setting; ``None`` = the broker default applies."""
        result: bool | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication"
        )
        return result

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn deduplication on or off for the namespace's topics."""
        if not isinstance(enabled, bool):
            raise InvalidInputError(f"enabled must be True or False, got {enabled!r}")
        self._http.call(
            "POST", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication", body=enabled
        )

    def remove_deduplication(self, namespace: str) -> None:
        """Drop the namespace setting: the broker default applies again."""
        self._http.call(
            "DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/deduplication"
        )

    def get_persistence(self, namespace: str) -> dict[str, Any] | None:
        """The namespace's persistence policies (``None``: the broker's defaults apply)."""
        result: dict[str, Any] | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/persistence"
        )
        return result

    def set_persistence(
        self,
        namespace: str,
        ensemble: int,
        write_quorum: int,
        ack_quorum: int,
        max_mark_delete_rate: float = 0.0,
    ) -> None:
        """Set the ensemble, write quorum and ack quorum of the namespace's new ledgers.

        Raises:
            AdminInvalidInputError: not ``1 <= ack_quorum <= write_quorum <= ensemble`` (412).
        """
        self._http.call(
            "POST",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/persistence",
            body={
                "bookkeeperEnsemble": ensemble,
                "bookkeeperWriteQuorum": write_quorum,
                "bookkeeperAckQuorum": ack_quorum,
                "managedLedgerMaxMarkDeleteRate": max_mark_delete_rate,
            },
        )

    def remove_persistence(self, namespace: str) -> None:
        """Drop the namespace's persistence policies: the broker defaults apply again."""
        self._http.call("DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/persistence")

    def get_scalable_topic_auto_scale_policy(self, namespace: str) -> dict[str, Any] | None:
        """The namespace's PIP-483 auto-scale override of its scalable topics (``None``: none)."""
        result: dict[str, Any] | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy"
        )
        return result

    def set_scalable_topic_auto_scale_policy(
        self, namespace: str, policy: Mapping[str, Any]
    ) -> None:
        """Set the namespace's ``AutoScalePolicyOverride``: camelCase knobs, each optional, e.g.
        ``{"enabled": False}`` or ``{"maxSegments": 16, "splitCooldownMs": 30000}``.

        Raises:
            AdminInvalidInputError: an unknown key, a value out of range, or values inconsistent
                with ``broker.conf`` (the message names the keys).
        """
        self._http.call(
            "POST",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy",
            body=_policy(policy),
        )

    def remove_scalable_topic_auto_scale_policy(self, namespace: str) -> None:
        """Drop the namespace's override: ``broker.conf`` applies again."""
        self._http.call(
            "DELETE",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/scalableTopicAutoScalePolicy",
        )

    def get_schema_compatibility_strategy(self, namespace: str) -> str:
        """The namespace's schema compatibility strategy (``"UNDEFINED"``: the broker's)."""
        result: str = self._http.call(
            "GET",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/schemaCompatibilityStrategy",
        )
        return result

    def set_schema_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        """Set it: ``ALWAYS_COMPATIBLE``, ``ALWAYS_INCOMPATIBLE``, ``BACKWARD``, ``FORWARD``,
        ``FULL``, a ``_TRANSITIVE`` form, or ``UNDEFINED`` (use the broker's)."""
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/schemaCompatibilityStrategy",
            body=strategy,
        )

    def get_compaction_threshold(self, namespace: str) -> int | None:
        """Bytes after a topic's compaction horizon that trigger compaction (``None``: the
        broker's ``brokerServiceCompactionThresholdInBytes``; 0: never)."""
        result: int | None = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold"
        )
        return result

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        """Set the namespace's compaction threshold in bytes (0: never compact automatically)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise InvalidInputError(f"a compaction threshold is 0 or more bytes, got {threshold!r}")
        self._http.call(
            "PUT",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold",
            body=threshold,
        )

    def remove_compaction_threshold(self, namespace: str) -> None:
        """Drop the namespace's threshold: the broker's applies again."""
        self._http.call(
            "DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/compactionThreshold"
        )

    def permissions(self, namespace: str) -> dict[str, builtins.list[str]]:
        """Role -> actions granted on the namespace (Pulsar's ``permissions``)."""
        result: dict[str, builtins.list[str]] = self._http.call(
            "GET", f"/admin/v2/namespaces/{_namespace_path(namespace)}/permissions"
        )
        return result

    def grant_permission(self, namespace: str, role: str, actions: Sequence[str]) -> None:
        """Grant ``role`` exactly ``actions`` (``produce``, ``consume``, ``functions``,
        ``sources``, ``sinks``, ``packages``) on every topic of the namespace."""
        self._http.call(
            "POST",
            f"/admin/v2/namespaces/{_namespace_path(namespace)}/permissions/{_q(role)}",
            body=builtins.list(actions),
        )

    def revoke_permission(self, namespace: str, role: str) -> None:
        """Revoke ``role``'s grant on the namespace."""
        self._http.call(
            "DELETE", f"/admin/v2/namespaces/{_namespace_path(namespace)}/permissions/{_q(role)}"
        )


__all__ = ["Namespaces"]
