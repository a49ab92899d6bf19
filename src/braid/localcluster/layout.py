"""What ``braid cluster up`` runs and where: counts, ports, directories and configuration files.

A :class:`ClusterLayout` is chosen once, by :func:`plan`, when a cluster directory is first used,
and kept in the state file: later ``up``\\ s of the same directory reuse its ports, so a bookie
comes back on the address its ledgers name and a client's service URL stays right. Everything
lives under the cluster directory::

    DIR/cluster.json              the state file (layout + the processes started)
    DIR/conf/zoo.cfg              ZooKeeper's configuration
    DIR/conf/bookie-N.conf        each bookie's bookkeeper.conf
    DIR/conf/broker-N.conf        each broker's broker.conf
    DIR/data/<name>/              each process's data directory
    DIR/logs/<name>.log           each process's output (one place for every log)

Ports: a base port ``P`` gives instance ``N`` (1-based) port ``P + N - 1``; base 0 asks the kernel
for free ports. :func:`plan` refuses (:class:`PortInUse`) a port something already listens on,
naming the port, its process and the flag to change.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from braid.core.errors import ConflictError, InvalidInputError
from braid.localcluster.ports import free_port, port_free

STATE_FILE = "cluster.json"
CHROOT = "/braid"


class PortInUse(ConflictError):
    """A port the cluster would listen on is taken."""


@dataclass(frozen=True)
class ProcessSpec:
    """One process of the cluster: its role, its name and how to start it."""

    role: str  # "zookeeper" | "bookie" | "broker"
    name: str
    argv: tuple[str, ...]
    config: Path
    config_text: str
    data_dir: Path
    log: Path
    ports: Mapping[str, int] = field(default_factory=dict)
    urls: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterLayout:
    """Where every process of one local cluster listens and keeps its files."""

    directory: Path
    cluster: str
    address: str
    zookeeper_port: int
    bookie_ports: tuple[int, ...]
    broker_ports: tuple[int, ...]
    web_ports: tuple[int, ...]
    #: ``key=value`` lines added to every broker.conf (``--broker-setting``).
    broker_settings: tuple[tuple[str, str], ...] = ()
    #: ``key=value`` lines added to every bookkeeper.conf (``--bookie-setting``).
    bookie_settings: tuple[tuple[str, str], ...] = ()

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    @property
    def metadata_url(self) -> str:
        return f"zk://{self.address}:{self.zookeeper_port}{CHROOT}"

    @property
    def service_url(self) -> str:
        """Every broker in one URL (the official client and Braid's take several hosts)."""
        return "pulsar://" + ",".join(f"{self.address}:{p}" for p in self.broker_ports)

    @property
    def web_urls(self) -> list[str]:
        return [f"http://{self.address}:{p}" for p in self.web_ports]

    def log_dir(self) -> Path:
        return self.directory / "logs"

    def _paths(self, name: str, conf_name: str) -> tuple[Path, Path, Path]:
        return (
            self.directory / "conf" / conf_name,
            self.directory / "data" / name,
            self.log_dir() / f"{name}.log",
        )

    def zookeeper(self, argv: list[str]) -> ProcessSpec:
        """ZooKeeper's spec; ``argv`` is :func:`braid.localcluster.zookeeper.command`'s."""
        from braid.localcluster.zookeeper import zoo_cfg

        config, data, log = self._paths("zookeeper", "zoo.cfg")
        return ProcessSpec(
            "zookeeper",
            "zookeeper",
            tuple(argv),
            config,
            zoo_cfg(data, self.address, self.zookeeper_port),
            data,
            log,
            {"client": self.zookeeper_port},
            {"metadata store": self.metadata_url},
        )

    def bookies(self) -> list[ProcessSpec]:
        specs = []
        for i, port in enumerate(self.bookie_ports, start=1):
            name = f"bookie-{i}"
            config, data, log = self._paths(name, f"{name}.conf")
            settings = {
                "bookieId": name,
                "advertisedAddress": self.address,
                "bookiePort": str(port),
                "httpServerEnabled": "false",
                "journalDirectories": str(data),
                "ledgerDirectories": str(data),
                "metadataServiceUri": self.metadata_url,
                **dict(self.bookie_settings),
            }
            argv = (sys.executable, "-m", "braid.cli.main", "bookie", "--config", str(config))
            specs.append(
                ProcessSpec(
                    "bookie",
                    name,
                    argv,
                    config,
                    _conf_text(settings),
                    data,
                    log,
                    {"bookie": port},
                    {"bookie": f"{self.address}:{port}"},
                )
            )
        return specs

    def brokers(self) -> list[ProcessSpec]:
        replicas = len(self.bookie_ports)
        specs = []
        for i, (port, web) in enumerate(zip(self.broker_ports, self.web_ports, strict=True), 1):
            name = f"broker-{i}"
            config, data, log = self._paths(name, f"{name}.conf")
            settings = {
                "clusterName": self.cluster,
                "metadataStoreUrl": self.metadata_url,
                "configurationMetadataStoreUrl": self.metadata_url,
                "bindAddress": self.address,
                "advertisedAddress": self.address,
                "brokerServicePort": str(port),
                "webServicePort": str(web),
                "managedLedgerDefaultEnsembleSize": str(min(3, replicas)),
                "managedLedgerDefaultWriteQuorum": str(min(2, replicas)),
                "managedLedgerDefaultAckQuorum": str(min(2, replicas)),
                **dict(self.broker_settings),
            }
            argv = (
                sys.executable,
                "-m",
                "braid.cli.main",
                "broker",
                "--config",
                str(config),
                "--data-dir",
                str(data),
            )
            specs.append(
                ProcessSpec(
                    "broker",
                    name,
                    argv,
                    config,
                    _conf_text(settings),
                    data,
                    log,
                    {"service": port, "web": web},
                    {
                        "service": f"pulsar://{self.address}:{port}",
                        "web": f"http://{self.address}:{web}",
                    },
                )
            )
        return specs

    def ports(self) -> dict[int, str]:
        """Every port of the layout and what listens on it."""
        found = {self.zookeeper_port: "ZooKeeper's client port (--zookeeper-port)"}
        for i, port in enumerate(self.bookie_ports, start=1):
            found[port] = f"bookie-{i}'s port (--bookie-port)"
        for i, (port, web) in enumerate(zip(self.broker_ports, self.web_ports, strict=True), 1):
            found[port] = f"broker-{i}'s service port (--broker-port)"
            found[web] = f"broker-{i}'s web port (--web-port)"
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "cluster": self.cluster,
            "address": self.address,
            "zookeeperPort": self.zookeeper_port,
            "bookiePorts": list(self.bookie_ports),
            "brokerPorts": list(self.broker_ports),
            "webPorts": list(self.web_ports),
            "brokerSettings": [list(kv) for kv in self.broker_settings],
            "bookieSettings": [list(kv) for kv in self.bookie_settings],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ClusterLayout:
        return cls(
            directory=Path(doc["directory"]),
            cluster=str(doc["cluster"]),
            address=str(doc["address"]),
            zookeeper_port=int(doc["zookeeperPort"]),
            bookie_ports=tuple(int(p) for p in doc["bookiePorts"]),
            broker_ports=tuple(int(p) for p in doc["brokerPorts"]),
            web_ports=tuple(int(p) for p in doc["webPorts"]),
            broker_settings=tuple((str(k), str(v)) for k, v in doc.get("brokerSettings", [])),
            bookie_settings=tuple((str(k), str(v)) for k, v in doc.get("bookieSettings", [])),
        )


def _conf_text(settings: Mapping[str, str]) -> str:
    head = "# Written by `braid cluster up`; edits are lost on the next `up` of a new directory.\n"
    return head + "".join(f"{key}={value}\n" for key, value in settings.items())


def _free_port(address: str, taken: set[int]) -> int:
    port = free_port(address, taken)
    taken.add(port)
    return port


def _ports(address: str, base: int, count: int, taken: set[int]) -> tuple[int, ...]:
    if base == 0:
        return tuple(_free_port(address, taken) for _ in range(count))
    ports = tuple(range(base, base + count))
    taken.update(ports)
    return ports


def plan(
    directory: Path,
    *,
    brokers: int,
    bookies: int,
    cluster: str = "local",
    address: str = "127.0.0.1",
    zookeeper_port: int = 2181,
    bookie_port: int = 3181,
    broker_port: int = 6650,
    web_port: int = 8080,
    broker_settings: Mapping[str, str] | None = None,
    bookie_settings: Mapping[str, str] | None = None,
) -> ClusterLayout:
    """Choose a new cluster's ports (0 = free ones from the kernel).

    Raises:
        InvalidInputError: a count below 1, or two roles' port ranges overlap.
    """
    if brokers < 1 or bookies < 1:
        raise InvalidInputError("a cluster needs at least 1 broker and 1 bookie")
    taken: set[int] = set()
    layout = ClusterLayout(
        directory=directory.resolve(),
        cluster=cluster,
        address=address,
        zookeeper_port=_ports(address, zookeeper_port, 1, taken)[0],
        bookie_ports=_ports(address, bookie_port, bookies, taken),
        broker_ports=_ports(address, broker_port, brokers, taken),
        web_ports=_ports(address, web_port, brokers, taken),
        broker_settings=tuple((broker_settings or {}).items()),
        bookie_settings=tuple((bookie_settings or {}).items()),
    )
    if len(layout.ports()) != 1 + bookies + 2 * brokers:
        raise InvalidInputError(
            "the port ranges of --zookeeper-port, --bookie-port, --broker-port and --web-port "
            "overlap; give bases further apart"
        )
    return layout


def check_ports_free(
    layout: ClusterLayout, *, recorded: bool = False, only: Sequence[ProcessSpec] | None = None
) -> None:
    """Raises :class:`PortInUse` naming the first port of ``layout`` (or of the processes
    ``only``) that is taken (``recorded``: the layout comes from a state file, so its ports
    cannot be changed)."""
    ports = layout.ports()
    if only is not None:
        ports = {p: what for p, what in ports.items() if any(p in s.ports.values() for s in only)}
    for port, what in sorted(ports.items()):
        if not port_free(layout.address, port):
            fix = (
                f"{layout.directory} keeps the ports it was first started with; use a new --dir"
                if recorded
                else "pass another base port to the flag named (0 = free ports)"
            )
            raise PortInUse(
                f"port {port} on {layout.address} ({what}) is in use by another process: stop "
                f"it, or {fix}"
            )


__all__ = [
    "CHROOT",
    "STATE_FILE",
    "ClusterLayout",
    "PortInUse",
    "ProcessSpec",
    "check_ports_free",
    "plan",
    "port_free",
]
