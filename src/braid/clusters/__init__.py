"""PIP-470 storage-cluster switching: the registry of storage clusters, the factory that opens a
client for one, the ledger copier, the switch orchestrator and the service the admin API calls.

The pure decisions (registry documents, the switch directive, the orchestrator's state and its
next step) are in :mod:`braid.core.storage_switch`; read routing by a ledger's stamp is
:class:`braid.storage.router.StorageRouter`. See docs/storage-switching.md and ADR 0029.
"""
