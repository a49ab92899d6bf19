"""``braid cluster up|down|status`` run as a user runs it: a child ``braid`` process that starts
Debian's ZooKeeper, three ``braid bookie`` and three ``braid broker`` processes detached from
it, on free 127.0.0.1 ports, with every file under the test's directory.

* Up, then the official client produces through one broker and consumes through another; status
  shows every process alive, three registered brokers and a leader; ``up`` again starts nothing;
  a SIGKILLed broker shows as dead (and leaves the registry with its session); ``up`` on the
  partly-up cluster starts that broker alone, on its ports; ``down`` says what it stopped and
  leaves no process running.
* A cluster whose processes were all SIGKILLed (a stale state file) comes back with ``up`` on the
  same ports, with its messages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from braid.localcluster.processes import ProcessId, is_running
from tests.support.polling import wait_for
from tests.support.zookeeper import missing_requirement

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(420),
    pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement())),
]

SRC = str(Path(__file__).resolve().parents[3] / "src")
FREE_PORTS = [
    "--zookeeper-port",
    "0",
    "--bookie-port",
    "0",
    "--broker-port",
    "0",
    "--web-port",
    "0",
]
SESSION = ["--broker-setting", "metadataStoreSessionTimeoutMillis=4000"]


def braid_cluster(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "braid.cli.main", "cluster", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def recorded(directory: Path) -> list[dict[str, Any]]:
    processes: list[dict[str, Any]] = json.loads((directory / "cluster.json").read_text())[
        "processes"
    ]
    return processes


def status(directory: Path) -> tuple[int, dict[str, Any]]:
    done = braid_cluster("status", "--dir", str(directory), "--output", "json", check=False)
    return done.returncode, json.loads(done.stdout)


def _alive(process: dict[str, Any]) -> bool:
    return is_running(ProcessId(process["pid"], process["startTime"]))


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """The cluster's directory; whatever the test did, its recorded processes are gone after."""
    directory = tmp_path / "cluster"
    seen: dict[int, dict[str, Any]] = {}
    try:
        yield directory
    finally:
        if (directory / "cluster.json").exists():
            seen.update((p["pid"], p) for p in recorded(directory))
            braid_cluster("down", "--dir", str(directory), "--timeout", "10", check=False)
        for process in seen.values():  # in case `down` itself failed: by id, never by name
            if _alive(process):
                os.kill(process["pid"], signal.SIGKILL)


def produce_and_consume(service_urls: list[str], topic: str, count: int, *, send: bool) -> None:
    producing = pulsar.Client(service_urls[0], operation_timeout_seconds=60)
    consuming = pulsar.Client(service_urls[-1], operation_timeout_seconds=60)
    try:
        consumer = consuming.subscribe(
            topic, "try", initial_position=pulsar.InitialPosition.Earliest
        )
        if send:
            producer = producing.create_producer(topic)
            for n in range(count):
                producer.send(f"m-{n}".encode())
        got = []
        for _ in range(count):
            message = consumer.receive(timeout_millis=60_000)
            got.append(message.data().decode())
            consumer.acknowledge(message)
        assert got == [f"m-{n}" for n in range(count)]
    finally:
        producing.close()
        consuming.close()


def test_up_serves_clients_status_sees_a_dead_broker_and_down_leaves_no_process(
    cluster_dir: Path,
) -> None:
    up = braid_cluster("up", "--dir", str(cluster_dir), *FREE_PORTS, *SESSION)
    print(up.stdout)
    assert "service URL (any broker): pulsar://127.0.0.1:" in up.stdout
    assert f"logs:   {cluster_dir}/logs/" in up.stdout
    processes = recorded(cluster_dir)
    assert [p["name"] for p in processes] == [
        "zookeeper",
        *(f"bookie-{i}" for i in (1, 2, 3)),
        *(f"broker-{i}" for i in (1, 2, 3)),
    ]
    for process in processes:  # every log and data directory under the one directory
        assert Path(process["log"]).parent == cluster_dir / "logs"
        assert Path(process["dataDir"]).parent == cluster_dir / "data"
        assert process["pid"] != os.getpid()
    brokers = [p for p in processes if p["role"] == "broker"]
    produce_and_consume(
        [b["urls"]["service"] for b in brokers], "persistent://public/default/try", 20, send=True
    )

    code, seen = status(cluster_dir)
    assert code == 0, seen
    assert all(p["running"] for p in seen["processes"])
    broker_ids = sorted(b["urls"]["service"].removeprefix("pulsar://") for b in brokers)
    assert seen["registeredBrokers"] == broker_ids
    assert seen["leaderBroker"] in broker_ids

    again = braid_cluster("up", "--dir", str(cluster_dir))
    assert "already up" in again.stdout, again.stdout
    assert recorded(cluster_dir) == processes  # nothing started, nothing forgotten

    victim = brokers[1]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(lambda: not _alive(victim), within=30, message="the broker to die")
    code, seen = status(cluster_dir)
    assert code == 1
    dead = [p["name"] for p in seen["processes"] if not p["running"]]
    assert dead == ["broker-2"]
    text = braid_cluster("status", "--dir", str(cluster_dir), check=False).stdout
    assert "broker-2" in text and "DEAD" in text
    wait_for(
        lambda: len(status(cluster_dir)[1]["registeredBrokers"]) == 2,
        within=60,
        message="the killed broker to leave the registry",
    )
    # `up` on a partly-up cluster starts only the dead broker, on its ports.
    partly = braid_cluster("up", "--dir", str(cluster_dir))
    assert "starting the others" in partly.stdout and "started broker-2" in partly.stdout
    assert "started broker-1" not in partly.stdout
    now = recorded(cluster_dir)
    (restarted,) = [p for p in now if p["name"] == "broker-2"]
    assert restarted["pid"] != victim["pid"] and restarted["urls"] == victim["urls"]
    assert sorted(p["pid"] for p in now if p["name"] != "broker-2") == sorted(
        p["pid"] for p in processes if p is not victim
    )
    code, seen = status(cluster_dir)
    assert code == 0, seen

    down = braid_cluster("down", "--dir", str(cluster_dir))
    print(down.stdout)
    lines = down.stdout.splitlines()
    for process in now:
        assert f"{process['name']} (pid {process['pid']}): stopped (SIGTERM)" in lines, lines
    assert not [p["name"] for p in [*processes, *now] if _alive(p)]
    assert recorded(cluster_dir) == []
    assert braid_cluster("down", "--dir", str(cluster_dir)).stdout.startswith("nothing was running")


def test_a_cluster_whose_processes_all_died_comes_back_with_its_data(cluster_dir: Path) -> None:
    braid_cluster(
        "up", "--dir", str(cluster_dir), "--brokers", "1", "--bookies", "1", *FREE_PORTS, *SESSION
    )
    first = recorded(cluster_dir)
    (broker,) = [p for p in first if p["role"] == "broker"]
    url = broker["urls"]["service"]
    client = pulsar.Client(url, operation_timeout_seconds=60)
    try:
        client.subscribe("persistent://public/default/kept", "later")
        producer = client.create_producer("persistent://public/default/kept")
        for n in range(10):
            producer.send(f"m-{n}".encode())
    finally:
        client.close()
    for process in first:  # a crash of everything (or a reboot): the state file is stale
        os.kill(process["pid"], signal.SIGKILL)
    wait_for(lambda: not any(_alive(p) for p in first), within=30, message="every process to die")

    mismatch = braid_cluster("up", "--dir", str(cluster_dir), "--brokers", "2", check=False)
    assert mismatch.returncode == 1 and "holds a cluster of 1" in mismatch.stderr

    again = braid_cluster("up", "--dir", str(cluster_dir))
    assert "none runs (stale" in again.stdout, again.stdout
    second = recorded(cluster_dir)
    assert [p["urls"] for p in second] == [p["urls"] for p in first]  # same ports
    assert {p["pid"] for p in second}.isdisjoint({p["pid"] for p in first})
    client = pulsar.Client(url, operation_timeout_seconds=60)
    try:
        consumer = client.subscribe("persistent://public/default/kept", "later")
        got = [consumer.receive(timeout_millis=60_000).data().decode() for _ in range(10)]
    finally:
        client.close()
    assert got == [f"m-{n}" for n in range(10)]
    down = braid_cluster("down", "--dir", str(cluster_dir), "--delete-data")
    assert "deleted the cluster's files" in down.stdout
    assert not any(_alive(p) for p in second)
    assert not (cluster_dir / "cluster.json").exists()
