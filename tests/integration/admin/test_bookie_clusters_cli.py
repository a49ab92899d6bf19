"""``braid admin bookie-clusters`` against a real ``braid standalone`` process: register, a
refused switch (409, one line, exit 1), advance-idgen, switch, ``status`` as tables, a cleanup dry
run, and the same answers through ``--output json`` and :class:`AdminClient`.

The commands are spelled as PIP-470 writes them (``register --name ... --status STANDBY``,
``precheck --name``, ``switch --target``, ``close-client --name``) and, where the test says so,
with the cluster name positionally; the switch states are PIP-470's names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from braid.admin.client import AdminClient, AdminConflictError, AdminNotFoundError
from braid.cli.main import main
from tests.support.polling import wait_for
from tests.support.standalone import StandaloneProcess


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_pip470_phases_1_to_6_with_pip470_cli_flags_and_state_names(
    capsys: pytest.CaptureFixture[str],
    standalone_subprocess: StandaloneProcess,
    tmp_path: Path,
) -> None:
    url = standalone_subprocess.web_url
    uri = f"sqlite:///{tmp_path / 'new' / 'metadata.db'}"
    admin = ["admin", "--url", url, "bookie-clusters"]
    with AdminClient(url) as client:
        client.topics.create("persistent://public/default/cli-switch")
        client.schemas.upload("persistent://public/default/cli-switch", "STRING", "")

        assert client.bookie_clusters.status()["state"] == "NOT_REGISTERED"
        code, out, err = run(
            capsys,
            *admin,
            "register",
            "--name",
            "new",
            "--metadata-service-uri",
            uri,
            "--status",
            "STANDBY",
        )
        assert (code, err) == (0, "") and "Registered storage cluster new (STANDBY)." in out
        assert client.bookie_clusters.status()["state"] == "STANDBY"
        assert 'pulsar_bookie_cluster_switch_state{state="STANDBY"} 1.0' in client.metrics()
        code, _, err = run(capsys, *admin, "register", "alias", "--uri", uri)  # positional
        assert code == 1 and "collides with storage cluster 'new'" in err and "409" in err

        code, out, _ = run(capsys, *admin, "list")
        rows = [line.split() for line in out.splitlines()]
        assert rows[0][:4] == ["NAME", "STATUS", "ACTIVE", "CLIENT"]
        assert rows[1][:3] == ["new", "STANDBY", "closed"]
        assert rows[2][:3] == ["standalone", "ACTIVE", "yes"]

        code, out, _ = run(capsys, *admin, "precheck", "--name", "new")
        assert code == 0 and "NOT ready" in out
        code, _, err = run(capsys, *admin, "switch", "--target", "new")
        assert code == 1 and "precheck failed" in err and "409" in err
        code, _, err = run(capsys, *admin, "switch", "new", "--target", "other")
        assert code == 1 and "two different names" in err
        code, _, err = run(capsys, *admin, "switch")
        assert code == 1 and "--target NAME" in err
        with pytest.raises(AdminConflictError):
            client.bookie_clusters.switch("new")
        with pytest.raises(AdminNotFoundError):
            client.bookie_clusters.get("nope")

        code, out, _ = run(capsys, *admin, "advance-idgen", "new", "--margin", "1000")
        assert code == 0 and "I11 (idgen beyond source): ready" in out
        code, out, err = run(capsys, *admin, "switch", "--target", "new")
        assert (code, err) == (0, ""), err
        assert out.startswith("Switched to new") and "active storage cluster: new" in out

        wait_for(
            lambda: client.bookie_clusters.status()["switch"]["phase"] == "CLEANUP",
            within=30,
        )
        status = client.bookie_clusters.status()
        assert status["state"] == "CLEANUP" and status["switch"]["awaitingRollbackWindow"]
        code, out, _ = run(capsys, *admin, "status")
        assert "switch state: CLEANUP" in out
        assert "CLEANUP (waiting for the rollback window to close)" in out
        assert any(line.split()[:2] == ["promoted", "1"] for line in out.splitlines()), out
        code, out, _ = run(capsys, *admin, "--output", "json", "status")
        assert json.loads(out)["switch"]["progress"]["PROMOTED"] == 1

        code, out, _ = run(capsys, *admin, "cleanup")
        assert "cleanup would delete 1 old-cluster ledger(s):" in out and "dry run" in out
        code, _, err = run(capsys, *admin, "cleanup", "--execute")
        assert code == 1 and "dual-read window runs until" in err
        code, _, err = run(capsys, *admin, "close-client", "--name", "new")
        assert code == 1 and "new is the active cluster" in err
        assert client.schemas.get("persistent://public/default/cli-switch")["type"] == "STRING"
        metrics = client.metrics()
        assert 'pulsar_bookie_cluster_switch_total{result="success"} 1.0' in metrics
        assert 'pulsar_bookie_cluster_switch_total{result="failure"} 2.0' in metrics
        assert 'pulsar_bookie_cluster_switch_state{state="CLEANUP"} 1.0' in metrics
        assert 'pulsar_bookie_cluster_switch_state{state="BUILD"} 0.0' in metrics
