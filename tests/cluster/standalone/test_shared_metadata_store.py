"""Two ``braid standalone`` processes on one metadata store (one SQLite file, one ZooKeeper): the
second is refused, and nothing the first acknowledged is lost (issue 22, ADR 0040).

What used to happen: each process keeps its ledgers' entries in the bookie inside it
(``<dataDir>/bookie-0``, bookie id ``bookie-0`` of storage cluster ``standalone`` in both) and their
metadata in the shared store (``/storage/standalone/ledgers/<id>``, one id generator: ids never
collided). When the second broker loaded a topic the first one was writing, it opened the topic's
managed ledger as a new owner does: it recovered the current ledger, fencing it on the bookies of
its ensemble - ``bookie-0``, which in the second process is its *own* empty bookie. Its fence found
no entry, so it dropped the ledger from the log as empty, deleted its metadata and rolled over to a
ledger of its own. The first broker's bookie was never fenced, so the first broker kept
acknowledging sends into a ledger the store no longer listed: after a restart, or to the second
broker, they were gone. Its controller, terminating that segment for a split, then failed with
"ledger 0 does not exist in cluster standalone" (404) and left the split recorded, in flight,
with nothing running it.

Now the first broker holds an ephemeral claim on the store, and the store is bound to the first
broker's data directory: the second broker exits 1 at start with one log line naming the first
broker's address and data directory, before it touches a ledger.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.cli.process import StandaloneProcess, StandaloneStartError
from tests.support.standalone import produce, read_all
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)

TOPIC = "persistent://public/default/orders"
#: Short ZooKeeper sessions, so a SIGKILLed broker's claim expires within seconds.
SESSION_TIMEOUT_MS = 2000


@pytest.fixture(params=["sqlite", "zookeeper"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'shared' / 'metadata.db'}"
    zookeeper: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    return zookeeper.url(f"/braid-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def first(store_url: str, tmp_path: Path) -> Iterator[StandaloneProcess]:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "a", env=_env(store_url), log_path=tmp_path / "a.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def _env(store_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "BRAID_metadataStoreUrl": store_url,
        "BRAID_metadataStoreSessionTimeoutMillis": str(SESSION_TIMEOUT_MS),
    }


def _refused(process: StandaloneProcess) -> str:
    with pytest.raises(StandaloneStartError) as refused:
        process.start()
    assert not process.running
    return str(refused.value)


def _assert_one_clear_line(output: str, *needles: str) -> None:
    assert "exited with 1 during start-up" in output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if "level=ERROR" in line]
    assert len(errors) == 1, errors
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])


def test_a_second_broker_on_the_store_is_refused_and_nothing_acknowledged_is_lost(
    first: StandaloneProcess, store_url: str, tmp_path: Path
) -> None:
    produce(first, TOPIC, [f"a-{i}" for i in range(20)])

    second = StandaloneProcess(tmp_path / "b", env=_env(store_url), log_path=tmp_path / "b.log")
    output = _refused(second)
    _assert_one_clear_line(
        output, "is in use by broker", first.service_url, first.web_url, str(first.data_dir)
    )

    # The first broker never noticed: it keeps serving, and every receipted message is there.
    produce(first, TOPIC, [f"a-{i}" for i in range(20, 30)])
    assert read_all(first, TOPIC) == [f"a-{i}" for i in range(30)]


def test_a_sigkilled_broker_restarts_on_its_store_and_a_stranger_still_cannot_take_it(
    first: StandaloneProcess, store_url: str, tmp_path: Path
) -> None:
    produce(first, TOPIC, [f"a-{i}" for i in range(10)])
    first.kill()  # its claim lingers until its metadata session ends

    # A stranger is refused whether the claim is still there (ZooKeeper, until the session
    # expires) or already reaped (SQLite): the store's ledgers live in the first data directory.
    second = StandaloneProcess(tmp_path / "b", env=_env(store_url), log_path=tmp_path / "b.log")
    _assert_one_clear_line(_refused(second), str(first.data_dir))

    # The same data directory starts again: on ZooKeeper it waits for its old session to expire.
    first.start(timeout=60)
    assert read_all(first, TOPIC) == [f"a-{i}" for i in range(10)]
    produce(first, TOPIC, ["after-restart"])
    assert read_all(first, TOPIC)[-1] == "after-restart"
