"""``braid admin topics *-partitioned-topic``, ``braid admin schemas``, the namespace schema
compatibility strategy commands and the compaction commands (``topics compact |
compaction-status``, ``namespaces *-compaction-threshold``) against a real ``braid standalone``
process (keyed messages for compaction written by the official client)."""

from __future__ import annotations

import json
from pathlib import Path

import pulsar
import pytest

from braid.cli.main import main
from tests.support.polling import wait_for
from tests.support.standalone import StandaloneProcess


@pytest.fixture
def url(standalone_subprocess: StandaloneProcess) -> str:
    return standalone_subprocess.web_url


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main(["admin", "--url", url, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_partitioned_topic_commands(capsys: pytest.CaptureFixture[str], url: str) -> None:
    topic = "persistent://public/default/cli-parts"
    code, out, err = run(capsys, url, "topics", "create-partitioned-topic", topic, "-p", "2")
    assert (code, err) == (0, "")
    assert out.strip() == f"Created {topic} with 2 partitions."
    code, out, _ = run(capsys, url, "topics", "get-partitioned-topic-metadata", topic)
    assert out.strip() == f"{topic}: 2 partitions"
    assert run(capsys, url, "topics", "update-partitioned-topic", topic, "-p", "4")[0] == 0
    code, out, _ = run(
        capsys, url, "--output", "json", "topics", "get-partitioned-topic-metadata", topic
    )
    assert json.loads(out) == {"partitions": 4}
    code, out, _ = run(capsys, url, "topics", "list-partitioned-topics", "public/default")
    assert topic in out.splitlines()
    code, out, err = run(capsys, url, "topics", "update-partitioned-topic", topic, "-p", "3")
    assert code == 1
    assert err.startswith("braid admin: error:") and "can only grow" in err
    assert run(capsys, url, "topics", "delete-partitioned-topic", topic)[0] == 0
    code, out, _ = run(capsys, url, "topics", "get-partitioned-topic-metadata", topic)
    assert out.strip() == f"{topic}: not partitioned"


def test_schema_commands(capsys: pytest.CaptureFixture[str], url: str, tmp_path: Path) -> None:
    topic = "persistent://public/default/cli-schemas"
    definition = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    payload = tmp_path / "order.json"
    payload.write_text(
        json.dumps({"type": "AVRO", "schema": json.dumps(definition), "properties": {}})
    )
    code, out, err = run(capsys, url, "schemas", "upload", topic, "--filename", str(payload))
    assert (code, err) == (0, "")
    assert out.strip() == f"Registered a AVRO schema for {topic}: version 0."
    code, out, _ = run(capsys, url, "schemas", "get", topic)
    assert "version:" in out and "AVRO" in out and '"long"' in out
    code, out, _ = run(capsys, url, "--output", "json", "schemas", "get", topic, "--version", "0")
    assert json.loads(json.loads(out)["data"]) == definition

    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps({**definition, "fields": [{"name": "id", "type": "string"}]}))
    code, _, err = run(
        capsys, url, "schemas", "upload", topic, "--type", "AVRO", "--schema", f"@{avsc}"
    )
    assert code == 1 and "Incompatible" in err and "(HTTP 409)" in err

    code, out, _ = run(
        capsys,
        url,
        "namespaces",
        "set-schema-compatibility-strategy",
        "public/default",
        "always_compatible",
    )
    assert code == 0
    code, out, _ = run(
        capsys, url, "namespaces", "get-schema-compatibility-strategy", "public/default"
    )
    assert out.strip() == "public/default: schema compatibility strategy ALWAYS_COMPATIBLE"
    code, out, _ = run(
        capsys, url, "schemas", "upload", topic, "--type", "AVRO", "--schema", f"@{avsc}"
    )
    assert out.strip().endswith("version 1.")
    code, out, _ = run(capsys, url, "schemas", "get-all", topic)
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["0", "1"]
    run(
        capsys,
        url,
        "namespaces",
        "set-schema-compatibility-strategy",
        "public/default",
        "UNDEFINED",
    )

    code, out, _ = run(capsys, url, "schemas", "delete", topic)
    assert out.strip() == f"Deleted the schema of {topic} (version 2 marks the delete)."
    code, _, err = run(capsys, url, "schemas", "get", topic)
    assert code == 1 and "(HTTP 404)" in err
    code, _, err = run(capsys, url, "schemas", "upload", topic)
    assert code == 1 and "--filename" in err


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
