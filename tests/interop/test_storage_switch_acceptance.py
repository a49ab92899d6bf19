"""Issue 14 acceptance: a running ``braid standalone`` assembly moves from its storage cluster to a
second one (its own SQLite metadata root, its own bookie data directory) while clients keep going:

* the official ``pulsar-client`` produces and consumes on a ``persistent://`` topic with a
  schema, the Braid client on a scalable ``topic://`` topic (key-ordered Stream consumer);
* register (``bookieClusters``) -> precheck (refused, then ``advance-idgen``) -> switch -> BUILD ->
  PROMOTE -> CLEANUP -> close-client of the old cluster: no client sees an error, nothing
  acknowledged is lost, no key is out of order;
* at PROMOTE's end the schema and cursor ledgers exist on the new cluster with the same ids and
  identical entries; afterwards new ledgers live on the new cluster and old topic data was read
  from the old one; once it aged out, stopping the old cluster's bookies changes nothing.

The standalone runs on its own event loop in a thread (``StandaloneServer``, what the command
runs), so the test can also look at its storage clusters directly.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pulsar
from pulsar.schema import StringSchema

import braid
from braid.admin import AdminClient
from braid.cli.standalone import StandaloneServer
from braid.core.storage_switch import ItemStatus
from braid.ledger.factory import DefaultManagedLedgerFactory
from tests.integration.e2e.workload import (
    ConsumerGroup,
    KeyedProducers,
    ack_cumulative,
    order_violations,
    wait_delivered,
)
from tests.support.polling import wait_for
from tests.support.standalone import standalone_config
from tests.support.switch_stack import ledger_entries

T = TypeVar("T")
ROUNDS = 30


class BackgroundStandalone:
    """A :class:`StandaloneServer` on its own event loop in a daemon thread."""

    def __init__(self, server: StandaloneServer) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        try:
            self.call(self.server.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


class OfficialClientTraffic:
    """An official-client producer (with a String schema) and consumer, running until stopped."""

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.consumer = client.subscribe(
            topic,
            "switch-sub",
            schema=StringSchema(),
            initial_position=pulsar.InitialPosition.Earliest,
        )
        self.producer = client.create_producer(topic, schema=StringSchema())
        self.sent: list[str] = []
        self.received: list[str] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._produced = threading.Event()  # set once the producer thread has ended
        self._threads = [
            threading.Thread(target=self._produce, name="official-producer"),
            threading.Thread(target=self._consume, name="official-consumer"),
        ]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        i = 0
        try:
            while not self._stop.is_set():
                value = f"m-{i}"
                self.producer.send(value)
                self.sent.append(value)
                i += 1
        except BaseException as exc:
            self.errors.append(exc)

    def _consume(self) -> None:
        deadline: float | None = None
        try:
            # Once the producer has stopped (its last send returned, so ``sent`` is final):
            # until every sent message arrived (a count would be fooled by a redelivered
            # duplicate), for at most 60 s.
            while not self._produced.is_set() or not set(self.received) >= set(self.sent):
                if self._produced.is_set():
                    deadline = deadline or time.monotonic() + 60
                    if time.monotonic() > deadline:
                        return
                try:
                    message = self.consumer.receive(timeout_millis=100)
                except pulsar.Timeout:
                    continue
                self.received.append(message.value())
                self.consumer.acknowledge(message)
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        producer, consumer = self._threads
        producer.join(60)
        assert not producer.is_alive(), f"{producer.name} did not stop"
        self._produced.set()
        consumer.join(70)
        assert not consumer.is_alive(), f"{consumer.name} did not stop"


def _ledgers_by_cluster(factory: DefaultManagedLedgerFactory) -> dict[str, set[str]]:
    """For every open managed ledger: the clusters its ledgers are stamped with."""
    return {
        name: {info.bookie_cluster_name for info in ml.ledgers}
        for name, ml in factory._ledgers.items()
    }


def test_switch_under_load_with_the_official_and_the_braid_client(tmp_path: Path) -> None:
    new_uri = f"sqlite:///{tmp_path / 'new-cluster' / 'metadata.db'}"
    config = standalone_config(
        tmp_path / "data",
        managed_ledger_max_entries_per_ledger=20,
        bookie_clusters=(("new", new_uri),),
    )
    background = BackgroundStandalone(StandaloneServer(config))
    server = background.server
    try:
        background.call(server.start())
        persistent = "persistent://public/default/switch-orders"
        scalable = "topic://public/default/switch-events"
        allowed = {"rounds": 8}
        cond = threading.Condition()

        def gate(round_index: int) -> None:
            with cond:
                cond.wait_for(lambda: round_index < allowed["rounds"], timeout=120)

        def allow(rounds: int) -> None:
            with cond:
                allowed["rounds"] = rounds
                cond.notify_all()

        with (
            AdminClient(server.web_service_url) as admin,
            braid.Client(server.service_url, operation_timeout=30) as bclient,
        ):
            admin.scalable_topics.create(scalable, segments=2)
            official_client = pulsar.Client(server.service_url, operation_timeout_seconds=30)
            group = ConsumerGroup(
                server.service_url,
                lambda client, name: client.subscribe_stream(
                    scalable, "billing", consumer_name=name, initial_position="earliest"
                ),
                ack_cumulative,
            )
            try:
                official = OfficialClientTraffic(official_client, persistent)
                group.join("c1")
                producers = KeyedProducers(
                    bclient, scalable, producers=2, keys=40, rounds=ROUNDS, gate=gate
                ).start()
                wait_for(lambda: producers.acked_count >= 2 * 40 * 6, within=60)
                wait_for(lambda: len(official.sent) >= 50, within=60)

                # register (bookieClusters) -> precheck -> advance-idgen -> switch
                assert {c["name"]: c["status"] for c in admin.bookie_clusters.list()} == {
                    "standalone": "ACTIVE",
                    "new": "STANDBY",
                }
                assert admin.bookie_clusters.precheck("new")["ready"] is False
                assert admin.bookie_clusters.advance_idgen("new")["ready"] is True
                status = admin.bookie_clusters.switch("new")
                assert status["activeCluster"] == "new"
                allow(16)

                def phase() -> str:
                    return str(admin.bookie_clusters.status()["switch"]["phase"])

                wait_for(lambda: phase() == "CLEANUP", within=60, message="PROMOTE done")
                # I10: the schema and cursor ledgers exist on the new cluster, same ids, same
                # entries as on the old one.
                state = background.call(server.storage_clusters.registry.state())  # type: ignore[union-attr]
                assert state is not None
                items = state[0].items
                kinds = {i.kind.value for i in items}
                assert kinds == {"SCHEMA", "CURSOR"}, items
                assert not state[0].failed(), state[0].failed()
                compared = 0
                for item in items:
                    if item.status is not ItemStatus.PROMOTED:
                        continue
                    new = background.call(_read(server, "new", item.ledger_id))
                    if new is None:
                        # A promoted cursor wrote again since: it started a ledger on the new
                        # cluster and dropped the copy nothing pointed at any more.
                        assert item.kind.value == "CURSOR", item
                        continue
                    old = background.call(_read(server, "standalone", item.ledger_id))
                    assert old == new and old, item
                    compared += 1
                assert compared >= 1

                allow(22)
                preview = admin.bookie_clusters.cleanup()
                assert preview["dryRun"] is True and preview["ledgers"]
                admin.bookie_clusters.cleanup(dry_run=False, force=True)
                wait_for(lambda: phase() == "DONE", within=60, message="CLEANUP done")
                statuses = {c["name"]: c["status"] for c in admin.bookie_clusters.list()}
                assert statuses == {"standalone": "DEPRECATED", "new": "ACTIVE"}

                # Keep going until every log's old-cluster ledgers are consumed and trimmed.
                allow(ROUNDS - 2)
                factory = server.ml_factory
                assert factory is not None

                def only_new() -> bool:
                    stamps = background.call(_async(lambda: _ledgers_by_cluster(factory)))
                    return bool(stamps) and all(c == {"new"} for c in stamps.values())

                def stamps() -> str:
                    found = background.call(_async(lambda: _ledgers_by_cluster(factory)))
                    return f"every log's ledgers on the new cluster: {found}"

                wait_for(only_new, within=90, message=stamps)
                # The old cluster's retained data aged out: stop its bookies.
                admin.bookie_clusters.close_client("standalone")
                # Its bookies are stopped, not merely unused: this process holds no file of
                # theirs any more (journal, entry logs, indexes).
                bookie_dirs = sorted((tmp_path / "data").glob("bookie-*"))
                assert bookie_dirs
                assert _open_files_under(bookie_dirs) == []
                allow(ROUNDS)
                producers.join()
                wait_delivered(producers.acked_pairs, group.log)
                official.stop()
            finally:
                group.close()
                official_client.close()

        assert producers.failures == []
        assert len(producers.acked_pairs()) == producers.total
        assert order_violations(group.log.snapshot()) == []
        assert official.errors == []
        assert set(official.received) >= set(official.sent)
        with AdminClient(server.web_service_url) as admin:
            metrics = admin.metrics()
        assert 'pulsar_bookie_cluster_active{cluster="new"} 1.0' in metrics
        assert "migration_ledgers_cleaned_total" in metrics
    finally:
        background.stop()


def _open_files_under(dirs: list[Path]) -> list[str]:
    """The files this process has open below any of ``dirs`` (from ``/proc/self/fd``)."""
    roots = [str(d.resolve()) + "/" for d in dirs]
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed between listing and reading
            continue
        if any(target.startswith(root) for root in roots):
            found.append(target)
    return found


async def _async(fn: Any) -> Any:
    return fn()


async def _read(
    server: StandaloneServer, cluster: str, ledger_id: int
) -> list[tuple[int, bytes]] | None:
    service = server.storage_clusters
    assert service is not None
    return await ledger_entries(service._router.client_for(cluster), ledger_id)
