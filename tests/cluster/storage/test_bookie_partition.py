"""Bookies and writers cut off by the network: each in a network namespace of its own, with its
own address, made by the test; a cut takes the host's link down (packets dropped, as when a cable
is pulled).

* An old writer cut off while a new owner fences its ledger cannot write to it when it comes back.
* A bookie cut off: requests to it fail promptly (timeout -> ``BookieUnavailable``), its
  registration goes when its session expires, and when the link is back it stops (session lost)
  and, restarted, rejoins with its data (cookie intact).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.metadata import open_store
from braid.storage.api import BookieUnavailable, StorageError
from braid.storage.bookie_net_client import NetBookieClient
from braid.storage.remote import RegisteredBookieSet
from tests.support import netns
from tests.support.netns import Host, NetworkLab
from tests.support.polling import eventually
from tests.support.zookeeper import ZooKeeperServer
from tests.support.zookeeper import missing_requirement as zk_missing

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

BOOKIE_PORT = 3181  # each bookie has an address of its own: BookKeeper's default port is free
SRC = str(Path(__file__).resolve().parents[3] / "src")

# The old writer: adds entries 0..9 to ledger 5, says so, then waits for "go" on a socket of its
# own and tries entry 10, printing what happened.
_WRITER = """
import asyncio, socket, sys
from braid.storage.bookie_net_client import NetBookieClient

async def main(bookie: str, own: str) -> None:
    client = NetBookieClient("bk", (bookie, 3181), add_timeout_s=60)
    for i in range(10):
        await client.add_entry(5, i, b"old-%d" % i, last_add_confirmed=i - 1, length=0)
    srv = socket.socket(); srv.bind((own, 7000)); srv.listen()
    print("acked 0..9", flush=True)
    conn, _ = await asyncio.get_running_loop().run_in_executor(None, srv.accept)
    conn.close()
    try:
        await client.add_entry(5, 10, b"old-10", last_add_confirmed=9, length=0)
        print("result ok", flush=True)
    except Exception as exc:
        print("result", type(exc).__name__, flush=True)
    await client.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    reason = netns.missing_requirement() or zk_missing()
    if reason:
        pytest.skip(reason)
    with NetworkLab() as made:
        yield made


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


class _Bookie:
    """A ``braid bookie`` inside a lab host."""

    def __init__(self, lab: NetworkLab, host: Host, zk_url: str, directory: Path) -> None:
        self.lab, self.host, self.directory = lab, host, directory
        self.conf = directory.parent / "bk.conf"
        self.conf.write_text(
            f"bookieId=bk\nadvertisedAddress={host.address}\nbookiePort={BOOKIE_PORT}\n"
            f"httpServerEnabled=false\njournalDirectories={directory}\n"
            f"ledgerDirectories={directory}\nmetadataServiceUri={zk_url}\n"
        )
        self.log = directory.parent / "bk.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = self.lab.popen(
                self.host,
                [sys.executable, "-m", "braid.cli.main", "bookie", "--config", str(self.conf)],
                env=_env(),
                stdout=out,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")


async def test_a_fenced_writer_cut_off_by_the_network_cannot_write_when_it_comes_back(
    lab: NetworkLab, tmp_path: Path
) -> None:
    zk_host, bk_host, writer_host = lab.add_host("zk"), lab.add_host("bk"), lab.add_host("w")
    zk = ZooKeeperServer(bind_address=zk_host.address, command_prefix=tuple(zk_host.exec_prefix()))
    zk.start()
    try:
        bookie = _Bookie(lab, bk_host, zk.url("/fence"), tmp_path / "bk")
        bookie.start()
        store = await open_store(zk.url("/fence"))
        members = await RegisteredBookieSet.open(store, "standalone")
        try:
            await eventually(lambda: members.writable() == ["bk"], within=60, message=bookie.output)
            writer = lab.popen(
                writer_host,
                [sys.executable, "-c", _WRITER, bk_host.address, writer_host.address],
                env=_env(),
                stdout=subprocess.PIPE,
            )
            assert writer.stdout is not None
            line = await asyncio.to_thread(writer.stdout.readline)
            assert line.strip() == b"acked 0..9"
            lab.cut(writer_host)  # the old writer is partitioned away...
            new_owner = members.client("bk")
            fenced = await new_owner.fence(5)  # ...while the new owner fences its ledger
            assert fenced.last_entry_id == 9
            lab.restore(writer_host)  # the old writer comes back and tries to go on
            with socket.create_connection((writer_host.address, 7000), timeout=30):
                pass
            result = await asyncio.wait_for(asyncio.to_thread(writer.stdout.readline), 60)
            assert result.strip() == b"result LedgerFenced"
            entries = await new_owner.read_entries(5, 0, 9)
            assert [e.data for e in entries] == [b"old-%d" % i for i in range(10)]
            with pytest.raises(StorageError):
                await new_owner.read_entry(5, 10)
            writer.stdout.close()
        finally:
            await members.close()
            await store.close()
    finally:
        zk.stop()


async def test_a_bookie_cut_off_fails_requests_promptly_loses_its_registration_and_rejoins(
    lab: NetworkLab, tmp_path: Path
) -> None:
    zk_host, bk_host = lab.add_host("zk"), lab.add_host("bk")
    zk = ZooKeeperServer(bind_address=zk_host.address, command_prefix=tuple(zk_host.exec_prefix()))
    zk.start()
    try:
        bookie = _Bookie(lab, bk_host, zk.url("/cut"), tmp_path / "bk")
        bookie.start()
        store = await open_store(zk.url("/cut"))
        members = await RegisteredBookieSet.open(store, "standalone")
        client = NetBookieClient("bk", (bk_host.address, BOOKIE_PORT), add_timeout_s=2)
        try:
            await eventually(lambda: members.writable() == ["bk"], within=60, message=bookie.output)
            await client.add_entry(1, 0, b"before", last_add_confirmed=-1, length=6)
            lab.cut(bk_host)
            errors: list[StorageError | None] = []
            started = time.monotonic()
            for i in range(1, 21):
                client.send_add(1, i, b"during", lambda _e, err: errors.append(err), i - 1, 0)
            await eventually(lambda: len(errors) == 20, within=10)
            assert time.monotonic() - started < 5
            assert all(isinstance(e, BookieUnavailable) for e in errors)
            # Its ZooKeeper session expires (10 s): the registration goes.
            await eventually(lambda: members.writable() == [], within=60)
            lab.restore(bk_host)
            # Back on the network, it learns its session is gone and stops by itself...
            assert bookie.proc is not None
            code = await asyncio.to_thread(bookie.proc.wait, 60)
            assert code == 1 and "metadata session lost" in bookie.output()
            # ...and, restarted (its directories intact), rejoins with its data.
            bookie.start()
            await eventually(lambda: members.writable() == ["bk"], within=60, message=bookie.output)
            await eventually(lambda: _readable(client), within=30)
            assert (await client.read_entry(1, 0)).data == b"before"
        finally:
            await client.close()
            await members.close()
            await store.close()
    finally:
        zk.stop()


async def _readable(client: NetBookieClient) -> bool:
    try:
        await client.read_lac(1)
    except BookieUnavailable:
        return False
    return True
