"""``braid admin topics`` inspection and cursor commands and the topic/namespace settings commands
(pulsar-admin's names and flags) against a real ``braid standalone`` process, on messages the
official client wrote (issue 31)."""

from __future__ import annotations

import json

import pulsar
import pytest

from braid.admin.client import AdminClient
from braid.cli.main import main
from tests.support.standalone import StandaloneProcess, official_client

pytestmark = pytest.mark.timeout(120)


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> str:
    code = main(["admin", "--url", url, *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_peek_examine_skip_reset_clear_and_expire_from_the_cli(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url, topic = standalone_subprocess.web_url, "persistent://public/default/cli-ops"
    client = official_client(standalone_subprocess)
    try:
        client.subscribe(topic, "sub").close()
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode(), properties={"n": str(i)}) for i in range(5)]
    finally:
        client.close()

    internal = json.loads(run(capsys, url, "-o", "json", "topics", "stats-internal", topic))
    assert internal["numberOfEntries"] == 5 and "sub" in internal["cursors"]
    peeked = json.loads(
        run(capsys, url, "-o", "json", "topics", "peek-messages", topic, "-s", "sub", "-n", "2")
    )
    assert [m["payload"] for m in peeked] == ["m0", "m1"]
    assert peeked[1]["properties"] == {"n": "1"}
    assert "m4" in run(capsys, url, "topics", "examine-message", topic, "-i", "latest")
    three = ids[3]
    out = run(
        capsys, url, "topics", "get-message-by-id", topic,
        "-l", str(three.ledger_id()), "-e", str(three.entry_id()),
    )  # fmt: skip
    assert "m3" in out and f"{three.ledger_id()}:{three.entry_id()}" in out

    with AdminClient(url) as admin:

        def backlog() -> int:
            count: int = admin.topics.stats(topic)["subscriptions"]["sub"]["msgBacklog"]
            return count

        run(capsys, url, "topics", "skip", topic, "-s", "sub", "-n", "2")
        assert backlog() == 3
        run(capsys, url, "topics", "reset-cursor", topic, "-s", "sub", "-t", "1d")
        assert backlog() == 5
        message_id = f"{three.ledger_id()}:{three.entry_id()}"
        run(capsys, url, "topics", "reset-cursor", topic, "-s", "sub", "-m", message_id)
        assert backlog() == 2
        run(capsys, url, "topics", "expire-messages", topic, "-s", "sub", "-t", "1h")
        assert backlog() == 2  # nothing is an hour old
        run(capsys, url, "topics", "clear-backlog", topic, "-s", "sub")
        assert backlog() == 0


def test_settings_commands_set_get_applied_and_remove(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    run(capsys, url, "namespaces", "create", "public/cli-caps")
    topic = "persistent://public/cli-caps/capped"
    run(capsys, url, "namespaces", "set-max-producers-per-topic", "public/cli-caps", "-p", "3")
    get = ["-o", "json", "namespaces", "get-max-producers-per-topic", "public/cli-caps"]
    assert json.loads(run(capsys, url, *get)) == 3
    applied = ["-o", "json", "topics", "get-max-producers", topic, "--applied"]
    assert json.loads(run(capsys, url, *applied)) == 3
    run(capsys, url, "topics", "set-max-producers", topic, "-p", "1")
    assert json.loads(run(capsys, url, *applied)) == 1
    client = official_client(standalone_subprocess)
    try:
        client.create_producer(topic)
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
    finally:
        client.close()
    run(capsys, url, "topics", "remove-max-producers", topic)
    assert json.loads(run(capsys, url, *applied)) == 3

    run(capsys, url, "topics", "set-retention", topic, "-t", "2h", "-s", "10M")
    retention = json.loads(run(capsys, url, "-o", "json", "topics", "get-retention", topic))
    assert retention == {"retentionTimeInMinutes": 120, "retentionSizeInMB": 10}
    run(capsys, url, "topics", "set-deduplication", topic, "--enable")
    assert "deduplication on" in run(capsys, url, "topics", "get-deduplication", topic)
    run(capsys, url, "topics", "remove-deduplication", topic)
    assert "not set" in run(capsys, url, "topics", "get-deduplication", topic)
    run(capsys, url, "topics", "set-max-consumers-per-subscription", topic, "-c", "2")
    get_sub = ["-o", "json", "topics", "get-max-consumers-per-subscription", topic]
    assert json.loads(run(capsys, url, *get_sub)) == 2
