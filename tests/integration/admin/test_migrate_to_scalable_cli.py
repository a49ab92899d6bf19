"""``braid admin topics migrate-to-scalable`` against a real ``braid standalone`` process
(issue 33, ADR 0063).

The official client writes keyed messages to a 4-partition topic with a Failover and a Shared
subscription, each read part-way. ``--prepare`` creates the segments and touches no partition,
``--rollback`` undoes it, then the migration runs: the old producer is refused, Braid's client
writes to the new name, and its Stream subscription reads every unacknowledged old message and
every new one exactly once, each key in order across the hand-over; its Queue subscription reads
the same set exactly once. ``--status`` reports the end state.
"""

from __future__ import annotations

import contextlib
import json

import pulsar
import pytest

import braid
from braid.cli.main import main
from tests.support.keyed_order import assert_each_key_in_order, drain_braid, payload, take_official
from tests.support.standalone import StandaloneProcess, official_client

pytestmark = pytest.mark.timeout(240)

KEYS = [f"key-{i}" for i in range(8)]
OLD, NEW = 10, 5


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> dict[str, object]:
    code = main(["admin", "--url", url, "-o", "json", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, object] = json.loads(captured.out)
    return result


def test_migrate_to_scalable_from_the_cli_keeps_every_key_in_order(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    source, target = "persistent://public/default/cli-orders", "topic://public/default/cli-orders"
    main(["admin", "--url", url, "topics", "create-partitioned-topic", source, "-p", "4"])
    capsys.readouterr()
    official = official_client(standalone_subprocess)
    try:
        earliest = pulsar.InitialPosition.Earliest
        ordered = official.subscribe(
            source, "ordered", consumer_type=pulsar.ConsumerType.Failover, initial_position=earliest
        )
        shared = official.subscribe(
            source, "shared", consumer_type=pulsar.ConsumerType.Shared, initial_position=earliest
        )
        producer = official.create_producer(source, batching_enabled=False)
        for seq in range(OLD):
            for key in KEYS:
                producer.send(payload(key, seq), partition_key=key)
        read_ordered, read_shared = take_official(ordered, 30), take_official(shared, 25)

        prepared = run(
            capsys, url, "topics", "migrate-to-scalable", source, "--segments", "2", "--prepare"
        )
        assert prepared["phase"] == "SEGMENTS_CREATED" and prepared["canRollBack"] is True
        assert prepared["subscriptions"] == {"ordered": "STREAM", "shared": "QUEUE"}
        rolled = run(capsys, url, "topics", "migrate-to-scalable", source, "--rollback")
        assert rolled["phase"] == "ROLLED_BACK"
        # The partitions still serve: this message is read after the migration like the rest.
        producer.send(payload("still", 0), partition_key="still")

        done = run(capsys, url, "topics", "migrate-to-scalable", source, "--segments", "2")
        assert done["phase"] == "DONE" and done["partitionsLeft"] == []
        ordered.close()
        shared.close()
        with pytest.raises(pulsar.TopicTerminated):
            producer.send(payload("late", 0), partition_key=KEYS[0])
    finally:
        # The C++ client reports AlreadyClosed for producers a terminated topic closed already.
        with contextlib.suppress(pulsar.AlreadyClosed):
            official.close()

    status = run(capsys, url, "topics", "migrate-to-scalable", source, "--status")
    assert status["phase"] == "DONE" and status["target"] == target

    everything = {payload(k, s) for k in KEYS for s in range(OLD + NEW)} | {payload("still", 0)}
    with braid.Client(standalone_subprocess.service_url, operation_timeout=15) as client:
        new_producer = client.create_producer(target)
        for seq in range(OLD, OLD + NEW):
            for key in KEYS:
                new_producer.send(payload(key, seq), key=key)
        stream = client.subscribe_stream(target, "ordered")
        expected = everything - read_ordered
        got = drain_braid(stream, len(expected))
        assert len(got) == len(set(got)) and set(got) == expected
        assert_each_key_in_order(got)
        queue = client.subscribe_queue(target, "shared")
        expected_queue = everything - read_shared
        got_queue = drain_braid(queue, len(expected_queue))
        assert len(got_queue) == len(set(got_queue)) and set(got_queue) == expected_queue


def test_a_migration_to_more_segments_than_a_new_topic_may_have_is_refused_before_anything(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    # As a create: at most scalableTopicMaxSegments (64). The OpenAPI fuzz test once asked for
    # 17,179 and the request ran past its 30 s timeout creating segment topics.
    url = standalone_subprocess.web_url
    source = "persistent://public/default/too-many-segments"
    main(["admin", "--url", url, "topics", "create-partitioned-topic", source, "-p", "2"])
    capsys.readouterr()
    argv = ["admin", "--url", url, "topics", "migrate-to-scalable", source]
    assert main([*argv, "--segments", "65", "--prepare"]) != 0
    assert "at most 64 segments (scalableTopicMaxSegments), got 65" in capsys.readouterr().err
    assert main([*argv, "--status"]) != 0  # nothing was recorded
    assert "no migration" in capsys.readouterr().err.lower()
    assert run(capsys, url, *argv[3:], "--segments", "64", "--prepare")["phase"]
