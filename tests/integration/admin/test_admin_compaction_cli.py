"""``braid admin topics compact | compaction-status`` and the namespace compaction-threshold
commands against a real ``braid standalone`` process (keyed messages written by the official
client, the compacted result read back by a read-compacted reader)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pulsar
import pytest

from braid.cli.main import main
from tests.support.polling import wait_for
from tests.support.standalone import StandaloneProcess


@pytest.fixture(autouse=True)
def _keep_logging() -> Iterator[None]:
    """``main`` configures the root logger for a process; put the test run's back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main(["admin", "--url", url, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_compact_and_compaction_status(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    topic = "persistent://public/default/cli-compact"
    code, out, _ = run(capsys, url, "topics", "create", topic)
    assert code == 0
    code, out, _ = run(capsys, url, "topics", "compaction-status", topic)
    assert (code, out.strip()) == (0, f"{topic}: compaction NOT_RUN")

    client = pulsar.Client(
        standalone_subprocess.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for key, value in [("a", b"1"), ("b", b"1"), ("a", b"2"), ("b", b"")]:
            producer.send(value, partition_key=key)
        code, out, err = run(capsys, url, "topics", "compact", topic)
        assert (code, err) == (0, "")
        assert out.startswith(f"Compaction of {topic} started")

        def status() -> str:
            code, out, _ = run(
                capsys, url, "--output", "json", "topics", "compaction-status", topic
            )
            assert code == 0
            return str(json.loads(out)["status"])

        wait_for(lambda: status() == "SUCCESS", message="compaction to finish")
        reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
        values = []
        while reader.has_message_available():
            msg = reader.read_next(timeout_millis=10_000)
            values.append((msg.partition_key(), msg.data()))
        assert values == [("a", b"2")]
    finally:
        client.close()

    code, _, err = run(capsys, url, "topics", "compact", "persistent://public/default/nowhere")
    assert code == 1 and "(HTTP 404)" in err


def test_namespace_compaction_threshold(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    ns = "public/default"
    code, out, _ = run(capsys, url, "namespaces", "get-compaction-threshold", ns)
    assert out.strip() == f"{ns}: compaction threshold not set (the broker's applies)"
    assert run(capsys, url, "namespaces", "set-compaction-threshold", ns, "1048576")[0] == 0
    code, out, _ = run(
        capsys, url, "--output", "json", "namespaces", "get-compaction-threshold", ns
    )
    assert json.loads(out) == 1048576
    with pytest.raises(SystemExit) as refused:
        run(capsys, url, "namespaces", "set-compaction-threshold", ns, "-5")
    assert refused.value.code == 2 and "expected 0 or more bytes" in capsys.readouterr().err
    assert run(capsys, url, "namespaces", "remove-compaction-threshold", ns)[0] == 0
    code, out, _ = run(capsys, url, "namespaces", "get-compaction-threshold", ns)
    assert code == 0 and "not set" in out
