"""The state file of a local cluster (``DIR/cluster.json``): its layout and what was started.

The file is the one owner of "which processes belong to this cluster": ``up`` writes it after
*each* process it starts (so a crash half-way through still leaves every started process on
record for ``down``), ``down`` signals exactly the processes it lists and then records that none
runs. Each process is recorded with its process id **and start time**
(:class:`braid.localcluster.processes.ProcessId`), so a recycled process id is never mistaken for
a cluster process. Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from braid.core.errors import InvalidInputError
from braid.localcluster.layout import STATE_FILE, ClusterLayout
from braid.localcluster.processes import ProcessId, is_running

VERSION = 1


class InvalidStateFile(InvalidInputError):
    """The state file cannot be read (not written by ``braid cluster``, or damaged)."""


@dataclass(frozen=True)
class ProcessRecord:
    """One started process: what it is, its identity, where its files are."""

    role: str
    name: str
    pid: int
    start_time: int
    log: Path
    data_dir: Path
    config: Path
    urls: Mapping[str, str] = field(default_factory=dict)

    @property
    def process_id(self) -> ProcessId:
        return ProcessId(self.pid, self.start_time)

    @property
    def running(self) -> bool:
        return is_running(self.process_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "name": self.name,
            "pid": self.pid,
            "startTime": self.start_time,
            "log": str(self.log),
            "dataDir": str(self.data_dir),
            "config": str(self.config),
            "urls": dict(self.urls),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            role=str(doc["role"]),
            name=str(doc["name"]),
            pid=int(doc["pid"]),
            start_time=int(doc["startTime"]),
            log=Path(doc["log"]),
            data_dir=Path(doc["dataDir"]),
            config=Path(doc["config"]),
            urls={str(k): str(v) for k, v in doc.get("urls", {}).items()},
        )


@dataclass(frozen=True)
class ClusterState:
    """A cluster directory's layout and the processes ``up`` started (empty after ``down``)."""

    layout: ClusterLayout
    processes: tuple[ProcessRecord, ...] = ()

    def with_process(self, record: ProcessRecord) -> ClusterState:
        return replace(self, processes=(*self.processes, record))

    def running(self) -> list[ProcessRecord]:
        return [p for p in self.processes if p.running]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "layout": self.layout.to_json(),
            "processes": [p.to_json() for p in self.processes],
        }


def state_path(directory: Path) -> Path:
    return directory / STATE_FILE


def load_state(directory: Path) -> ClusterState | None:
    """The state recorded in ``directory``, or ``None`` if there is none.

    Raises:
        InvalidStateFile: the file exists but is not a state file of this version.
    """
    path = state_path(directory)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InvalidStateFile(f"{path} cannot be read: {exc}") from exc
    try:
        if doc.get("version") != VERSION:
            raise InvalidStateFile(f"{path} has version {doc.get('version')!r}, not {VERSION}")
        return ClusterState(
            ClusterLayout.from_json(doc["layout"]),
            tuple(ProcessRecord.from_json(p) for p in doc["processes"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidStateFile(f"{path} is not a `braid cluster` state file: {exc!r}") from exc


def save_state(state: ClusterState) -> None:
    """Write ``state`` to its directory's state file atomically."""
    path = state_path(state.layout.directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(scratch, path)


__all__ = [
    "ClusterState",
    "InvalidStateFile",
    "ProcessRecord",
    "load_state",
    "save_state",
    "state_path",
]
