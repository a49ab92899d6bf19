"""``braid admin`` against a real ``braid standalone`` process: tables for people, the API's JSON
with ``--output json``, one-line errors with exit code 1, help that teaches at every level, and
one run of the installed command as a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from braid.cli.admin import parse_time
from braid.cli.main import main
from braid.core.layout_codec import layout_from_metadata
from tests.support.standalone import StandaloneProcess, free_port


@pytest.fixture
def url(standalone_subprocess: StandaloneProcess) -> str:
    return standalone_subprocess.web_url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_create_prints_the_new_dag_as_a_table(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = run(
        capsys,
        "admin",
        "--url",
        url,
        "scalable-topics",
        "create",
        "topic://public/default/orders",
        "--segments",
        "4",
        "--property",
        "team=payments",
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Created topic://public/default/orders with 4 segments."
    assert "epoch 0 · 4 segments (4 active, 0 sealed) · properties team=payments" in out
    assert lines[4].split() == ["SEGMENT", "RANGE", "STATE", "CREATED", "SEALED"]
    assert [line.split()[:3] for line in lines[5:]] == [
        ["0", "0000-3fff", "ACTIVE"],
        ["1", "4000-7fff", "ACTIVE"],
        ["2", "8000-bfff", "ACTIVE"],
        ["3", "c000-ffff", "ACTIVE"],
    ]


def test_split_and_merge_show_children_under_their_parents(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    base = ["admin", "--url", url, "scalable-topics"]
    assert run(capsys, *base, "create", "tree", "--segments", "2")[0] == 0
    code, out, _ = run(capsys, *base, "split", "tree", "1", "--split-hash", "0x9c40")
    assert code == 0
    assert out.splitlines()[0] == "Split segment 1 into 2 [8000-9c3f] and 3 [9c40-ffff]; epoch 1."
    rows = [line.split() for line in out.splitlines()[5:]]
    assert rows == [
        ["0", "0000-7fff", "ACTIVE", "0", "-"],
        ["1", "8000-ffff", "SEALED", "0", "1"],
        ["├─", "2", "8000-9c3f", "ACTIVE", "1", "-"],
        ["└─", "3", "9c40-ffff", "ACTIVE", "1", "-"],
    ]
    code, out, _ = run(capsys, *base, "merge", "tree", "0", "2", "3")
    assert code == 0
    assert out.splitlines()[0] == "Merged segments 0, 2, 3 into 4 [0000-ffff]; epoch 2."
    tree = out.splitlines()[5:]
    # The merged child is listed in full under its first parent in hash order (0) and
    # referenced under the others.
    assert [line.rstrip() for line in tree] == [
        "0        0000-7fff  SEALED  0        2",
        "└─ 4     0000-ffff  ACTIVE  2        -",
        "1        8000-ffff  SEALED  0        1",
        "├─ 2     8000-9c3f  SEALED  1        2",
        "│  └─ 4  (merged; listed under 0)",
        "└─ 3     9c40-ffff  SEALED  1        2",
        "   └─ 4  (merged; listed under 0)",
    ]


def test_stats_tree_subscriptions_and_controller(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    base = ["admin", "--url", url, "scalable-topics"]
    run(capsys, *base, "create", "watched", "--segments", "2")
    subscribe = [*base, "create-subscription", "watched"]
    run(capsys, *subscribe, "billing", "--initial-position", "earliest")
    run(capsys, *subscribe, "audit", "--type", "queue")
    run(capsys, *base, "split", "watched", "0")
    code, out, err = run(capsys, *base, "stats", "topic://public/default/watched")
    assert (code, err) == (0, "")
    assert out.startswith("topic://public/default/watched  epoch 1 · 4 segments (3 active")
    header = out.splitlines()[2].split()
    assert header[:5] == ["SEGMENT", "RANGE", "STATE", "CREATED", "SEALED"]
    assert "BACKLOG" in header and "STORAGE" in header
    assert "audit=0 billing=0" in out
    assert "├─ 2" in out and "└─ 3" in out
    assert "Subscriptions" in out
    subscriptions = out.split("Subscriptions\n")[1].split("\n\n")[0].splitlines()
    assert [row.split()[:2] for row in subscriptions[1:]] == [
        ["audit", "QUEUE"],
        ["billing", "STREAM"],
    ]
    assert "Controller" in out and "leader:" in out and "pulsar://127.0.0.1:" in out
    assert "last split:" in out


def test_json_output_is_the_api_answer(capsys: pytest.CaptureFixture[str], url: str) -> None:
    base = ["admin", "--url", url, "--output", "json", "scalable-topics"]
    code, out, _ = run(capsys, *base, "create", "as-json", "--segments", "3")
    assert (code, out) == (0, "")  # no answer body: nothing printed
    code, out, _ = run(capsys, *base, "get", "as-json")
    layout = layout_from_metadata(json.loads(out))
    assert len(layout.active_segments) == 3
    code, out, _ = run(capsys, *base, "split", "as-json", "2")
    assert layout_from_metadata(json.loads(out)).epoch == 1
    code, out, _ = run(capsys, *base, "merge", "as-json", "0", "1")
    assert layout_from_metadata(json.loads(out)).epoch == 2
    code, out, _ = run(capsys, *base, "stats", "as-json")
    assert json.loads(out)["topic"] == "topic://public/default/as-json"
    code, out, _ = run(capsys, *base, "list", "public/default")
    assert "topic://public/default/as-json" in json.loads(out)
    # The options are accepted after the command too.
    code, out, _ = run(capsys, "admin", "tenants", "list", "--url", url, "-o", "json")
    assert json.loads(out) == ["public"]


def test_tenants_namespaces_and_topics(capsys: pytest.CaptureFixture[str], url: str) -> None:
    def ok(*argv: str) -> str:
        code, out, err = run(capsys, "admin", "--url", url, *argv)
        assert (code, err) == (0, ""), err
        return out

    assert ok("tenants", "create", "acme", "--admin-role", "ops") == "Created tenant acme.\n"
    ok("tenants", "update", "acme", "--admin-role", "dev")
    got = ok("tenants", "get", "acme")
    assert "admin roles:      dev" in got and "allowed clusters: standalone" in got
    ok("namespaces", "create", "acme/orders", "--deduplication", "on")
    assert ok("namespaces", "list", "acme") == "acme/orders\n"
    assert "deduplicationEnabled: yes" in ok("namespaces", "get", "acme/orders")
    assert ok("namespaces", "get-deduplication", "acme/orders") == "acme/orders: deduplication on\n"
    ok("namespaces", "set-deduplication", "acme/orders", "off")
    assert "deduplication off" in ok("namespaces", "get-deduplication", "acme/orders")
    ok("namespaces", "remove-deduplication", "acme/orders")
    assert "not set" in ok("namespaces", "get-deduplication", "acme/orders")
    ok("topics", "create", "persistent://acme/orders/events")
    assert ok("topics", "list", "acme/orders") == "persistent://acme/orders/events\n"
    stats = ok("topics", "stats", "persistent://acme/orders/events")
    assert "messages in:" in stats and "terminated:           no" in stats
    assert ok("topics", "terminate", "persistent://acme/orders/events").startswith(
        "Terminated persistent://acme/orders/events; last message id "
    )
    ok("topics", "delete", "persistent://acme/orders/events")
    ok("namespaces", "delete", "acme/orders")
    ok("tenants", "delete", "acme")
    assert "acme" not in ok("tenants", "list").split()


def test_subscriptions_seek_and_delete(capsys: pytest.CaptureFixture[str], url: str) -> None:
    def ok(*argv: str) -> str:
        code, out, err = run(capsys, "admin", "--url", url, *argv)
        assert (code, err) == (0, ""), err
        return out

    ok("scalable-topics", "create", "lifecycle")
    ok("scalable-topics", "create-subscription", "lifecycle", "billing")
    assert ok("scalable-topics", "seek", "lifecycle", "billing", "--time", "1h").startswith(
        "Moved subscription 'billing' of topic://public/default/lifecycle to "
    )
    ok("scalable-topics", "delete-subscription", "lifecycle", "billing")
    ok("scalable-topics", "delete", "lifecycle", "--force")
    assert "lifecycle" not in ok("scalable-topics", "list")


def test_errors_are_one_line_with_the_reason_and_exit_1(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, out, err = run(capsys, "admin", "--url", url, "scalable-topics", "get", "ghost")
    assert (code, out) == (1, "")
    assert err == (
        "braid admin: error: scalable topic topic://public/default/ghost does not exist "
        "(HTTP 404)\n"
    )
    run(capsys, "admin", "--url", url, "scalable-topics", "create", "sealed", "--segments", "2")
    run(capsys, "admin", "--url", url, "scalable-topics", "split", "sealed", "0")
    code, _, err = run(capsys, "admin", "--url", url, "scalable-topics", "split", "sealed", "0")
    assert code == 1
    assert err == "braid admin: error: cannot split segment 0: it is sealed (HTTP 409)\n"
    code, _, err = run(capsys, "admin", "--url", url, "scalable-topics", "get", "a b")
    assert code == 1 and err.startswith("braid admin: error: invalid topic name 'a b'")
    assert err.count("\n") == 1


def test_no_broker_at_the_url_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    code, out, err = run(capsys, "admin", "--url", dead, "tenants", "list")
    assert (code, out) == (1, "")
    assert err.startswith(f"braid admin: error: no broker answers at {dead}")
    assert err.count("\n") == 1


def test_the_url_comes_from_the_environment(
    capsys: pytest.CaptureFixture[str], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAID_ADMIN_URL", url)
    code, out, _ = run(capsys, "admin", "health")
    assert code == 0
    assert f"url:            {url}" in out and "metadata store: ok" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["admin", "scalable-topics", "split", "t", "x"],  # not a segment id
        ["admin", "scalable-topics", "split", "t", "1", "--split-hash", "0x1ffff"],
        ["admin", "scalable-topics", "merge", "t"],
        ["admin", "scalable-topics", "create", "t", "--segments", "0"],
        ["admin", "scalable-topics", "seek", "t", "s", "--time", "yesterday"],
        ["admin", "namespaces", "set-deduplication", "public/default", "maybe"],
        ["admin", "--output", "yaml", "tenants", "list"],
    ],
)
def test_invalid_arguments_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["admin"],
        ["admin", "scalable-topics"],
        ["admin", "scalable-topics", "split"],
        ["admin", "scalable-topics", "stats"],
        ["admin", "tenants", "update"],
        ["admin", "namespaces", "create"],
        ["admin", "topics"],
    ],
)
def test_help_at_every_level_teaches_with_examples(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text
    assert "braid admin " in text.split("examples:")[1]


def test_a_group_without_a_command_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "scalable-topics"]) == 2
    assert "split" in capsys.readouterr().err


def test_parse_time_accepts_epoch_durations_and_iso() -> None:
    assert parse_time("1735689600000") == 1_735_689_600_000
    assert parse_time("10m", now_ms=1_000_000) == 400_000
    assert parse_time("2h", now_ms=10_000_000) == 2_800_000
    assert parse_time("2025-01-01T00:00:00Z") == 1_735_689_600_000
    assert parse_time("2025-01-01T01:00:00+01:00") == 1_735_689_600_000


def test_the_installed_command_runs(url: str) -> None:
    env = {**os.environ, "BRAID_ADMIN_URL": url}
    command = [sys.executable, "-m", "braid.cli.main", "admin", "scalable-topics"]
    created = subprocess.run(
        [*command, "create", "from-shell", "--segments", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    assert "Created topic://public/default/from-shell with 2 segments." in created.stdout
    failed = subprocess.run(
        [*command, "split", "from-shell", "42"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert failed.stderr.startswith("braid admin: error: segment 42 is not in the layout")
    assert failed.stderr.rstrip().endswith("(HTTP 404)")


def test_rates_and_consumers_are_shown_when_the_broker_reports_them() -> None:
    from braid.cli.admin_output import render_stats

    stats = {
        "topic": "topic://t/n/x",
        "epoch": 1,
        "segments": {
            "0": {
                "state": "SEALED",
                "hashRange": "0000-ffff",
                "parentIds": [],
                "childIds": [1],
                "createdAtEpoch": 0,
                "sealedAtEpoch": 1,
            },
            "1": {
                "state": "ACTIVE",
                "hashRange": "0000-ffff",
                "parentIds": [0],
                "childIds": [],
                "createdAtEpoch": 1,
                "sealedAtEpoch": 0,
                "topicStats": {
                    "msgInCounter": 42,
                    "msgRateIn": 12.25,
                    "msgRateOut": 3.0,
                    "storageSize": 2048,
                    "subscriptions": {"s": {"msgBacklog": 7, "consumers": [{"msgOutCounter": 35}]}},
                },
            },
        },
        "subscriptions": {
            "s": {
                "type": "STREAM",
                "registeredConsumers": ["c1", "c2"],
                "coordinator": {
                    "drainedSegments": [0],
                    "consumers": {
                        "c1": {"connected": True, "assignedSegments": [1]},
                        "c2": {"connected": False, "assignedSegments": [], "inGracePeriod": True},
                    },
                },
            }
        },
        "controller": {"leaderBrokerUrl": "pulsar://b:6650", "isLeader": True},
    }
    text = render_stats(stats)
    lines = text.splitlines()
    assert lines[2].split() == [
        "SEGMENT", "RANGE", "STATE", "CREATED", "SEALED", "MSGS", "IN", "MSGS", "OUT",
        "RATE", "IN", "RATE", "OUT", "STORAGE", "BACKLOG",
    ]  # fmt: skip
    assert lines[4].split() == [
        "└─", "1", "0000-ffff", "ACTIVE", "1", "-", "42", "35", "12.2/s", "3.0/s", "2.0", "KiB",
        "s=7",
    ]  # fmt: skip
    assert "s             STREAM  7        2          0" in text
    assert "s             c1        yes         1" in text
    assert "s             c2        no (grace)  -" in text
