"""Auto-recovery: lost replicas come back by themselves (BookKeeper's auditor and replication
workers).

* :mod:`underreplication` - marks (ledgers missing copies) and per-ledger copy locks in the
  cluster's metadata root;
* :mod:`auditor` - notices lost bookies (after ``lostBookieRecoveryDelay``) and runs the periodic
  fragment check, marking ledgers;
* :mod:`replicator` - copies a ledger's lost fragments to other bookies and updates its ensembles
  with CAS;
* :mod:`worker` - takes marks one at a time, under a lock, and copies;
* :mod:`service` - the auditor election plus a worker, hosted by a broker or a bookie;
* :mod:`decommission` - the bookie list and ``decommission`` for operators.
"""

from __future__ import annotations

from braid.storage.autorecovery.auditor import Auditor
from braid.storage.autorecovery.decommission import BookieAdmin, DecommissionStatus
from braid.storage.autorecovery.replicator import ReplicationStats, replicate_ledger
from braid.storage.autorecovery.service import AutoRecoveryService, AutoRecoverySettings
from braid.storage.autorecovery.underreplication import (
    UnderreplicatedLedger,
    UnderreplicationManager,
)
from braid.storage.autorecovery.worker import ReplicationWorker

__all__ = [
    "Auditor",
    "AutoRecoveryService",
    "AutoRecoverySettings",
    "BookieAdmin",
    "DecommissionStatus",
    "ReplicationStats",
    "ReplicationWorker",
    "UnderreplicatedLedger",
    "UnderreplicationManager",
    "replicate_ledger",
]
