"""Issue 24 acceptance, with real processes: four ``braid bookie`` processes, a broker
(``braid standalone --bookies 0`` on ZooKeeper, E=3, W=2, A=2 in its ``broker.conf``), keyed load
from the official ``pulsar-client`` (``persistent://`` topic) and from Braid's client (scalable
``topic://`` topic, Stream consumer), counted exactly (:mod:`tests.support.keyed_load`).

Why four bookies: with E=3, W=2, A=2 on exactly three, losing one leaves no bookie to replace it
(BookKeeper behaves the same: ``NotEnoughBookies``), so writes could not go on. E=3 of 4 keeps a
spare for the writers' ensemble changes and for auto-recovery's copies (ADR 0035).

* A bookie SIGKILLed mid-stream: writes go on after an ensemble change, no acknowledged message is
  lost, no key reordered; the bookie restarts and rejoins.
* A bookie lost for good (killed, its directories deleted): the same for the clients; then
  auto-recovery - hosted by the bookies and the broker, one auditor elected cluster-wide - brings
  every ledger back to W copies within a bound; with another bookie stopped, every entry of every
  ledger still reads, identical to before.
* A full disk on one bookie: it turns read-only and writers move off it.

The network cut (each bookie on a host of its own) is in ``test_replicated_network_cut.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pulsar
import pytest

from braid.admin import AdminClient
from braid.storage.api import LedgerState
from tests.support.bookie_process import BookieProcess
from tests.support.keyed_load import BraidKeyedLoad, LoadReport, OfficialKeyedLoad, run_until
from tests.support.replicated_cluster import ClusterInspector, ReplicatedCluster
from tests.support.small_fs import Ballast, small_filesystem

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

BOOKIES = 4
#: Small ledgers: the run rolls over, so closed ledgers and open ones both hold the data; consumed
#: ledgers are kept (retention without limit), so every entry can be checked afterwards.
BROKER_KEYS = {
    "managedLedgerMaxEntriesPerLedger": "20",
    "defaultRetentionTimeInMinutes": "-1",
    "defaultRetentionSizeInMB": "-1",
    "autoRecoveryDaemonEnabled": "true",
}
#: Auto-recovery must bring every ledger back to W copies within this many seconds of the loss
#: (ZooKeeper's 10 s session timeout before the registration goes, then the copies).
RECOVERY_BOUND_S = 60.0


class Loads:
    """The official client's and Braid's client's keyed loads, side by side."""

    def __init__(self, service_url: str, web_url: str, name: str) -> None:
        with AdminClient(web_url) as admin:
            admin.scalable_topics.create(f"topic://public/default/{name}-s", segments=2)
        self.official = OfficialKeyedLoad(
            service_url,
            f"persistent://public/default/{name}",
            consumers=2,
            consumer_type=pulsar.ConsumerType.KeyShared,
        ).start()
        self.braid = BraidKeyedLoad(service_url, f"topic://public/default/{name}-s").start()

    def acked(self) -> tuple[int, int]:
        return self.official.acked_count, self.braid.acked_count

    def wait_more(self, each: int, within: float, what: str) -> float:
        """Until both loads got ``each`` more receipts than now; returns the seconds it took."""
        official, braid_ = self.acked()
        return run_until(
            lambda: (
                self.official.acked_count >= official + each
                and self.braid.acked_count >= braid_ + each
            ),
            within,
            f"{each} more receipts on each load ({what}); at {self.acked()}",
        )

    def finish(self) -> list[LoadReport]:
        """Stop producing, wait until everything acknowledged was delivered, report."""
        self.official.stop_producing()
        self.braid.stop_producing()
        self.official.wait_delivered(60)
        self.braid.wait_delivered(60)
        return [self.official.report(), self.braid.report()]

    def close(self) -> None:
        try:
            self.official.close()
        finally:
            self.braid.close()


def assert_nothing_lost_or_reordered(reports: list[LoadReport]) -> None:
    for report in reports:
        print(report.line())
        assert report.acknowledged > 0, report.line()
        assert report.lost == 0, report.line()
        assert report.reordered == 0, f"{report.line()}: {report.order_problems}"


def busiest_bookie(inspector: ClusterInspector) -> str:
    """The bookie in the current ensemble of the most open ledgers (the one to hurt)."""
    counts: dict[str, int] = {}
    for md in inspector.ledgers().values():
        if md.state is LedgerState.OPEN:
            for bookie in md.ensemble:
                counts[bookie] = counts.get(bookie, 0) + 1
    return max(sorted(counts), key=lambda b: counts[b])


@pytest.fixture
def cluster(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> Iterator[ReplicatedCluster]:
    made = ReplicatedCluster(
        tmp_path,
        zk_url,
        [bookies(f"bk-{i}") for i in range(BOOKIES)],
        broker_keys=dict(BROKER_KEYS),
    )
    try:
        yield made
    finally:
        made.stop()


def test_a_bookie_killed_mid_stream_loses_and_reorders_nothing_and_rejoins(
    cluster: ReplicatedCluster,
) -> None:
    cluster.start_bookies()
    broker = cluster.start_broker()
    inspector = ClusterInspector(cluster.zk_url)
    loads = Loads(broker.service_url, broker.web_url, "kill")
    try:
        loads.wait_more(200, 60, "before the kill")
        victim = cluster.bookie(busiest_bookie(inspector))
        changes_before = inspector.ensemble_changes()
        victim.kill()  # SIGKILL: no unregistering, no flush
        took = loads.wait_more(300, 60, f"after SIGKILL of {victim.bookie_id}")
        print(f"writes went on: 300 more receipts each {took:.1f}s after the kill")
        assert inspector.ensemble_changes() > changes_before, "no ensemble change happened"
        open_on_victim = [
            i
            for i, md in inspector.ledgers().items()
            if md.state is LedgerState.OPEN and victim.bookie_id in md.ensemble
        ]
        # The bookie comes back (same id, same directories): it waits for its old registration
        # to expire, then rejoins as writable, and the load goes on.
        victim.start()
        run_until(lambda: victim.bookie_id in inspector.writable(), 60, "the bookie rejoined")
        loads.wait_more(100, 60, "after the rejoin")
        reports = loads.finish()
        print(f"ledgers still open on it before the restart: {open_on_victim}")
    finally:
        loads.close()
        inspector.close()
    assert_nothing_lost_or_reordered(reports)


def test_a_bookie_lost_for_good_is_re_replicated_and_everything_reads_without_it(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    # Auto-recovery in every bookie as well as in the broker: one auditor for the cluster.
    recovery = {"autoRecoveryDaemonEnabled": "true", "lostBookieRecoveryDelay": "0"}
    cluster = ReplicatedCluster(
        tmp_path,
        zk_url,
        [bookies(f"bk-{i}", **recovery) for i in range(BOOKIES)],
        broker_keys=dict(BROKER_KEYS),
    )
    try:
        cluster.start_bookies()
        broker = cluster.start_broker()
        inspector = ClusterInspector(cluster.zk_url)
        try:
            _lose_a_bookie_for_good(cluster, broker.service_url, broker.web_url, inspector)
        finally:
            inspector.close()
    finally:
        cluster.stop()


def _lose_a_bookie_for_good(
    cluster: ReplicatedCluster, service_url: str, web_url: str, inspector: ClusterInspector
) -> None:
    hosts = {b.bookie_id for b in cluster.bookies} | {f"127.0.0.1:{service_url.rsplit(':')[-1]}"}
    run_until(lambda: inspector.auditor() is not None, 30, "an auditor elected")
    assert inspector.auditor() in hosts
    loads = Loads(service_url, web_url, "lost")
    try:
        loads.wait_more(200, 60, "before the loss")
        victim = cluster.bookie(busiest_bookie(inspector))
        victim.kill()
        victim.wipe()  # lost for good: its journal and ledger files are gone
        lost_at = time.monotonic()
        loads.wait_more(200, 60, f"after losing {victim.bookie_id}")
        reports = loads.finish()
    finally:
        loads.close()
    assert_nothing_lost_or_reordered(reports)
    # The broker stops cleanly (its ledgers close); auto-recovery goes on in the bookies.
    assert cluster.broker is not None
    cluster.broker.stop()
    survivors = [b.bookie_id for b in cluster.bookies if b is not victim]
    took = run_until(
        lambda: (
            not any(victim.bookie_id in md.bookies() for md in inspector.ledgers().values())
            and not inspector.under_replicated()
        ),
        RECOVERY_BOUND_S,
        lambda: f"no ledger on {victim.bookie_id} ({inspector.ledgers_naming(victim.bookie_id)})",
    )
    print(
        f"auto-recovery: every ledger off {victim.bookie_id} "
        f"{time.monotonic() - lost_at:.1f}s after the loss ({took:.1f}s after the broker stopped); "
        f"auditor {inspector.auditor()}"
    )
    assert inspector.auditor() in survivors, "the auditor is one of the bookies now"
    copies = inspector.copies(alive=survivors)
    print(f"copies: {copies.entries} entries in {copies.ledgers} ledgers, {copies.copies} copies")
    assert copies.complete, copies.missing
    assert copies.copies == 2 * copies.entries  # W copies of every entry
    before = inspector.read_everything()
    # Only the bookies that must hold W copies between them... minus one more: still readable.
    second = cluster.bookie(survivors[0])
    second.kill()
    run_until(lambda: second.bookie_id not in inspector.writable(), 30, "the second bookie gone")
    after = inspector.read_everything()
    assert after == before and len(after) == copies.entries


def test_a_full_disk_turns_a_bookie_read_only_and_writers_move_off_it(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    with small_filesystem(tmp_path, 64) as fs:
        small = BookieProcess(
            "bk-small",
            fs / "bk-small",
            zk_url,
            extra={"diskCheckInterval": "200", "journalMaxSizeMB": "4"},
        )
        cluster = ReplicatedCluster(
            tmp_path,
            zk_url,
            [small, *(bookies(f"bk-{i}") for i in range(BOOKIES - 1))],
            broker_keys=dict(BROKER_KEYS),
        )
        try:
            cluster.start_bookies()
            broker = cluster.start_broker()
            inspector = ClusterInspector(cluster.zk_url)
            try:
                _fill_a_disk(small, fs, broker.service_url, broker.web_url, inspector)
            finally:
                inspector.close()
        finally:
            cluster.stop()


def _fill_a_disk(
    small: BookieProcess,
    fs: Path,
    service_url: str,
    web_url: str,
    inspector: ClusterInspector,
) -> None:
    loads = Loads(service_url, web_url, "full")
    try:
        loads.wait_more(200, 60, "before the disk fills")
        on_small = inspector.ledgers_naming("bk-small")
        assert on_small, "placement never used bk-small"
        ballast = Ballast(fs)
        ballast.fill(leave_free=0)
        run_until(lambda: inspector.readonly() == ["bk-small"], 30, "bk-small read-only")
        newest = max(inspector.ledgers())
        took = loads.wait_more(300, 60, "with bk-small read-only")
        print(f"writes went on: 300 more receipts each in {took:.1f}s with bk-small read-only")
        ledgers = inspector.ledgers()
        new = {i: md for i, md in ledgers.items() if i > newest}
        assert new, "the load made new ledgers"
        assert not [i for i, md in new.items() if "bk-small" in md.bookies()]
        still = [
            i
            for i, md in ledgers.items()
            if md.state is LedgerState.OPEN and "bk-small" in md.ensemble and i in on_small
        ]
        reports = loads.finish()
        # What bk-small held is still readable (read-only bookies serve reads).
        read = inspector.read_everything(on_small)
        assert read, "bk-small's ledgers read back"
        ballast.release()
        run_until(lambda: "bk-small" in inspector.writable(), 30, "bk-small writable again")
        print(f"open ledgers whose current ensemble kept bk-small (idle writers): {still}")
    finally:
        loads.close()
    assert_nothing_lost_or_reordered(reports)
