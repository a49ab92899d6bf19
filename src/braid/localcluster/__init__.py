"""A whole Braid cluster on one machine as separate processes: ``braid cluster up|down|status``.

This package starts Debian's ZooKeeper, ``braid bookie`` and ``braid broker`` processes detached
from the command that started them, with every configuration file, data directory and log under
one directory, and records what it started in a state file there
(:mod:`braid.localcluster.state`). It stops exactly the processes it recorded, by process id
*and* start time (a recycled process id is never signalled). The command-line entry point is
:mod:`braid.cli.cluster`; the design is ADR 0053.

Modules:

* :mod:`braid.localcluster.layout` - what runs where: counts, ports, paths, configuration files;
* :mod:`braid.localcluster.processes` - starting a detached process, telling whether it still
  runs, stopping it (SIGTERM, then SIGKILL after a bound);
* :mod:`braid.localcluster.state` - the state file (``cluster.json``);
* :mod:`braid.localcluster.zookeeper` - finding and configuring Debian's ZooKeeper;
* :mod:`braid.localcluster.supervisor` - ``up``, ``down`` and ``status``.
"""

from __future__ import annotations

from braid.localcluster.layout import ClusterLayout, PortInUse
from braid.localcluster.supervisor import (
    ClusterStartFailed,
    ClusterStatus,
    NoCluster,
    ProcessStatus,
    StoppedProcess,
    UpResult,
    cluster_down,
    cluster_status,
    cluster_up,
)
from braid.localcluster.zookeeper import ZooKeeperMissing

__all__ = [
    "ClusterLayout",
    "ClusterStartFailed",
    "ClusterStatus",
    "NoCluster",
    "PortInUse",
    "ProcessStatus",
    "StoppedProcess",
    "UpResult",
    "ZooKeeperMissing",
    "cluster_down",
    "cluster_status",
    "cluster_up",
]
