"""The pieces of ``braid cluster`` that need no cluster: process identity and stopping (real child
processes), the state file, the port plan and the ZooKeeper check."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from braid.core.errors import InvalidInputError
from braid.localcluster.layout import PortInUse, check_ports_free, plan
from braid.localcluster.processes import (
    ProcessId,
    Stopped,
    cpu_seconds,
    identify,
    is_running,
    spawn,
    stop,
)
from braid.localcluster.state import (
    ClusterState,
    InvalidStateFile,
    ProcessRecord,
    load_state,
    save_state,
)
from braid.localcluster.zookeeper import ZooKeeperMissing, find_zookeeper, zoo_cfg
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(60)

_SLEEPER = "import time\nwhile True: time.sleep(1)\n"
_STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + _SLEEPER


def _spawn(tmp_path: Path, code: str) -> ProcessId:
    process = spawn([sys.executable, "-c", code], tmp_path / "child.log")
    assert is_running(process)
    return process


def test_a_child_is_stopped_by_sigterm_and_its_identity_is_gone_after(tmp_path: Path) -> None:
    child = _spawn(tmp_path, _SLEEPER)
    assert os.getsid(child.pid) == child.pid  # a session of its own: detached from the terminal
    assert cpu_seconds(child) is not None
    assert stop([child], term_timeout_s=20) == {child: Stopped.TERMINATED}
    assert not is_running(child)
    assert cpu_seconds(child) is None
    assert stop([child], term_timeout_s=1) == {child: Stopped.NOT_RUNNING}


def test_a_child_ignoring_sigterm_is_killed_after_the_bound(tmp_path: Path) -> None:
    # The child ignores SIGTERM only once its handler is installed: wait for that.
    log = tmp_path / "child.log"
    child = _spawn(
        tmp_path, _STUBBORN.replace("while True", "print('ready', flush=True)\nwhile True")
    )
    wait_for(lambda: "ready" in log.read_text(), within=30, message="the child's handler")
    assert stop([child], term_timeout_s=0.5) == {child: Stopped.KILLED}
    assert not is_running(child)


def test_a_recycled_process_id_is_not_the_recorded_process() -> None:
    me = identify(os.getpid())
    assert me is not None and is_running(me)
    impostor = ProcessId(me.pid, me.start_time + 1)  # same id, another start: another process
    assert not is_running(impostor)
    assert stop([impostor], term_timeout_s=1) == {impostor: Stopped.NOT_RUNNING}
    assert is_running(me)  # and it was not signalled


def test_the_state_file_round_trips_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    layout = plan(
        tmp_path,
        brokers=2,
        bookies=3,
        zookeeper_port=0,
        bookie_port=0,
        broker_port=0,
        web_port=0,
        broker_settings={"a": "1"},
    )
    assert load_state(tmp_path) is None
    record = ProcessRecord(
        "broker",
        "broker-1",
        123,
        456,
        tmp_path / "l",
        tmp_path / "d",
        tmp_path / "c",
        {"service": "pulsar://127.0.0.1:1"},
    )
    state = ClusterState(layout).with_process(record)
    save_state(state)
    assert load_state(tmp_path) == state
    assert json.loads((tmp_path / "cluster.json").read_text())["version"] == 1
    (tmp_path / "cluster.json").write_text('{"something": "else"}')
    with pytest.raises(InvalidStateFile):
        load_state(tmp_path)
    (tmp_path / "cluster.json").write_text("not json")
    with pytest.raises(InvalidStateFile):
        load_state(tmp_path)


def test_ports_follow_the_base_and_a_port_in_use_is_named(tmp_path: Path) -> None:
    layout = plan(
        tmp_path,
        brokers=3,
        bookies=2,
        zookeeper_port=12181,
        bookie_port=13181,
        broker_port=16650,
        web_port=18080,
    )
    assert layout.broker_ports == (16650, 16651, 16652)
    assert layout.web_ports == (18080, 18081, 18082)
    assert layout.service_url == "pulsar://127.0.0.1:16650,127.0.0.1:16651,127.0.0.1:16652"
    confs = [b.config_text for b in layout.brokers()]
    assert "managedLedgerDefaultEnsembleSize=2\n" in confs[0]  # no more than the bookies
    assert "brokerServicePort=16651\n" in confs[1]
    with pytest.raises(InvalidInputError, match="overlap"):
        plan(tmp_path, brokers=3, bookies=1, broker_port=16650, web_port=16651)
    with pytest.raises(InvalidInputError):
        plan(tmp_path, brokers=0, bookies=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = plan(
            tmp_path,
            brokers=1,
            bookies=1,
            zookeeper_port=0,
            bookie_port=0,
            broker_port=port,
            web_port=0,
        )
        with pytest.raises(PortInUse, match=f"port {port} .*broker-1's service port"):
            check_ports_free(busy)


def test_a_missing_zookeeper_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperMissing, match="apt-get install zookeeper"):
        find_zookeeper(jar=tmp_path / "zookeeper.jar")
    with pytest.raises(ZooKeeperMissing, match="Java runtime"):
        find_zookeeper(environ={"PATH": str(tmp_path)})
    assert "clientPortAddress=127.0.0.1\n" in zoo_cfg(tmp_path, "127.0.0.1", 2181)


def test_cluster_up_without_zookeeper_names_the_package_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from braid.cli.main import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no `java` on it
    directory = tmp_path / "c"
    assert main(["cluster", "up", "--dir", str(directory)]) == 1
    err = capsys.readouterr().err
    assert "braid cluster up: error:" in err and "apt-get install zookeeper" in err
    assert not directory.exists()
    assert main(["cluster", "status", "--dir", str(directory)]) == 1
    assert "no cluster in" in capsys.readouterr().err
