"""Issue 24 acceptance: a bookie cut off by the network. Each of four bookies runs in a network
namespace of its own with its own address (a :class:`~tests.support.netns.NetworkLab` host made by
the test), ZooKeeper in another, an old writer in another; the broker (``braid standalone
--bookies 0``, E=3, W=2, A=2) and the test's clients in the root namespace. Four bookies, not three:
with E=3 of exactly 3 a lost bookie leaves no replacement (ADR 0035).

One bookie's link goes down mid-stream (packets dropped, as when a cable is pulled):

* the official client's and Braid's client's writes go on after an ensemble change (requests to
  the cut bookie time out after ``bookkeeperClientTimeoutInSeconds``), no acknowledged message is
  lost, no key reordered;
* its registration expires with its ZooKeeper session and auto-recovery brings every ledger back to
  W copies on the other bookies, within a bound; every entry reads without it;
* a second process that held a ledger open on that bookie (the *old writer*) is cut off too; a new
  owner fences and closes the ledger meanwhile; when both links come back the old writer cannot
  write to the fenced ledger (the cut bookie was never fenced, but every write set holds a fenced
  bookie and the metadata is closed), and the entry it tried is on no bookie.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from braid.storage.api import StorageError
from tests.cluster.storage.test_replicated_acceptance import (
    BROKER_KEYS,
    RECOVERY_BOUND_S,
    Loads,
    assert_nothing_lost_or_reordered,
)
from tests.support.bookie_process import BookieProcess
from tests.support.keyed_load import run_until
from tests.support.netns import NetworkLab, network_lab
from tests.support.replicated_cluster import ClusterInspector, ReplicatedCluster
from tests.support.zookeeper import ZooKeeperServer
from tests.support.zookeeper import missing_requirement as zk_missing

__all__ = ["network_lab"]

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(180),
    pytest.mark.skipif(zk_missing() is not None, reason=str(zk_missing())),
]

SRC = str(Path(__file__).resolve().parents[3] / "src")
WRITER_PORT = 7000

# The old writer: a ledger client of its own (E=3, W=2, A=2 over the registered bookies) adds
# entries 0..9, prints the ledger and its ensemble, waits for a connection on its own address
# ("go"), tries entry 10 and prints what happened.
_WRITER = """
import asyncio, socket, sys
from braid.metadata import open_store
from braid.storage.remote import open_remote_cluster

async def main(zk_url: str, own: str) -> None:
    store = await open_store(zk_url)
    client = await open_remote_cluster(store, "standalone", min_bookies=4, wait_s=60,
                                       add_timeout_s=60, read_timeout_s=60)
    writer = await client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    for i in range(10):
        await writer.add_entry(b"old-%d" % i)
    srv = socket.socket(); srv.bind((own, int(sys.argv[3]))); srv.listen()
    ensemble = ",".join(writer.metadata.ensemble)
    print(f"ledger {writer.ledger_id} {ensemble}", flush=True)
    conn, _ = await asyncio.get_running_loop().run_in_executor(None, srv.accept)
    conn.close()
    try:
        await writer.add_entry(b"old-10")
        print("result ok", flush=True)
    except Exception as exc:
        print("result", type(exc).__name__, flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_a_bookie_cut_off_by_the_network_loses_nothing_and_its_fenced_ledger_stays_fenced(
    network_lab: NetworkLab, tmp_path: Path
) -> None:
    lab = network_lab
    zk_host = lab.add_host("zk")
    lab.add_host("writer")
    hosts = [lab.add_host(f"bk-{i}") for i in range(4)]
    zk = ZooKeeperServer(bind_address=zk_host.address, command_prefix=tuple(zk_host.exec_prefix()))
    zk.start()
    zk_url = zk.url("/cut")
    bookies = [
        BookieProcess(
            host.name,
            tmp_path / host.name,
            zk_url,
            extra={"httpServerEnabled": "false"},
            address=host.address,
            exec_prefix=host.exec_prefix(),
        )
        for host in hosts
    ]
    cluster = ReplicatedCluster(
        tmp_path,
        zk_url,
        bookies,
        broker_keys={**BROKER_KEYS, "bookkeeperClientTimeoutInSeconds": "3"},
    )
    try:
        cluster.start_bookies()
        broker = cluster.start_broker()
        inspector = ClusterInspector(zk_url)
        try:
            _cut_a_bookie(lab, cluster, inspector, broker.service_url, broker.web_url, zk_url)
        finally:
            inspector.close()
    finally:
        cluster.stop()
        zk.stop()


def _cut_a_bookie(
    lab: NetworkLab,
    cluster: ReplicatedCluster,
    inspector: ClusterInspector,
    service_url: str,
    web_url: str,
    zk_url: str,
) -> None:
    writer_host = lab.hosts["writer"]
    writer = lab.popen(
        writer_host,
        [sys.executable, "-c", _WRITER, zk_url, writer_host.address, str(WRITER_PORT)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert writer.stdout is not None
    line = _result_line(writer.stdout, "ledger ").split()
    ledger_id, ensemble = int(line[1]), line[2].split(",")
    loads = Loads(service_url, web_url, "cut")
    try:
        loads.wait_more(200, 60, "before the cut")
        victim = cluster.bookie(ensemble[0])
        lab.cut(lab.hosts[victim.bookie_id])
        lab.cut(writer_host)  # the old writer is partitioned away with it
        cut_at = time.monotonic()
        took = loads.wait_more(300, 60, f"after cutting {victim.bookie_id}")
        print(f"writes went on: 300 more receipts each {took:.1f}s after the cut")
        # A new owner takes the old writer's ledger: fences what it can reach, closes it.
        reader = inspector.call(inspector.client.open_ledger(ledger_id, recovery=True))
        assert reader.last_add_confirmed == 9
        reports = loads.finish()
    finally:
        loads.close()
    assert_nothing_lost_or_reordered(reports)
    survivors = [b.bookie_id for b in cluster.bookies if b is not victim]
    run_until(
        lambda: (
            not any(victim.bookie_id in md.bookies() for md in inspector.ledgers().values())
            and not inspector.under_replicated()
        ),
        RECOVERY_BOUND_S,
        lambda: f"no ledger on {victim.bookie_id} ({inspector.ledgers_naming(victim.bookie_id)})",
    )
    print(
        f"auto-recovery: every ledger off {victim.bookie_id} {time.monotonic() - cut_at:.1f}s "
        "after the cut"
    )
    copies = inspector.copies(alive=survivors)
    print(f"copies: {copies.entries} entries in {copies.ledgers} ledgers, {copies.copies} copies")
    assert copies.complete, copies.missing
    assert copies.copies == 2 * copies.entries
    assert len(inspector.read_everything()) == copies.entries
    # Both links come back; the old writer tries to go on.
    lab.restore(lab.hosts[victim.bookie_id])
    lab.restore(writer_host)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((writer_host.address, WRITER_PORT), timeout=5):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
    result = _result_line(writer.stdout)
    writer.stdout.close()
    assert result == "result LedgerFenced", result
    md = inspector.ledgers()[ledger_id]
    assert md.last_entry_id == 9
    for bookie in survivors:
        with pytest.raises(StorageError):
            inspector.call(inspector.client.bookie(bookie).read_entry(ledger_id, 10))


def _result_line(out: IO[bytes], prefix: str = "result") -> str:
    """The old writer's next line starting with ``prefix`` (its store client logs too)."""
    seen = []
    while line := out.readline().decode():
        if line.startswith(prefix):
            return line.strip()
        seen.append(line)
    raise AssertionError("the old writer exited:\n" + "".join(seen[-20:]))
