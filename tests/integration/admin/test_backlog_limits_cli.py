"""Backlog quotas, retention and message TTL through the admin REST API (Pulsar's paths and
bodies, 412 for what Pulsar refuses) and ``braid admin namespaces|topics`` (pulsar-admin's
command names, flags and units), against a real ``braid standalone`` process."""

from __future__ import annotations

import json

import httpx
import pytest

from braid.cli.main import main
from tests.support.standalone import StandaloneProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def url(standalone_subprocess: StandaloneProcess) -> str:
    return standalone_subprocess.web_url


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main(["admin", "--url", url, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _namespace(url: str, name: str) -> str:
    base = f"{url}/admin/v2/namespaces/public/{name}"
    assert httpx.put(base, json={}).status_code == 204
    return base


def test_namespace_quota_rest_round_trip_and_pulsars_refusals(url: str) -> None:
    base = _namespace(url, "quota-rest")
    assert httpx.get(base + "/backlogQuotaMap").json() == {}
    quota = {"limitSize": 1_000_000, "limitTime": -1, "policy": "producer_exception"}
    assert httpx.post(base + "/backlogQuota", json=quota).status_code == 204  # default type
    got = httpx.get(base + "/backlogQuotaMap").json()
    assert got == {"destination_storage": {**quota, "limit": 1_000_000}}
    assert httpx.get(base).json()["backlog_quota_map"] == got  # Pulsar's Policies key
    bad = {"limitSize": 10, "policy": "drop_everything"}
    refused = httpx.post(base + "/backlogQuota", json=bad)
    assert refused.status_code == 412 and "policy must be one of" in refused.json()["reason"]
    wrong_type = httpx.post(base + "/backlogQuota?backlogQuotaType=bytes", json=quota)
    assert wrong_type.status_code == 412
    # A quota the namespace's retention could not hold is refused, as Pulsar does.
    retention = {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}
    assert httpx.post(base + "/retention", json=retention).status_code == 204
    too_big = {"limitSize": 2 * 1024 * 1024, "limitTime": -1, "policy": "producer_exception"}
    assert httpx.post(base + "/backlogQuota", json=too_big).status_code == 412
    assert httpx.delete(base + "/backlogQuota").status_code == 204
    assert httpx.get(base + "/backlogQuotaMap").json() == {}


def test_retention_and_message_ttl_rest_round_trip(url: str) -> None:
    base = _namespace(url, "ttl-rest")
    assert httpx.get(base + "/retention").json() is None
    assert httpx.get(base + "/messageTTL").json() is None
    retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    assert httpx.post(base + "/retention", json=retention).status_code == 204
    assert httpx.get(base + "/retention").json() == retention
    assert httpx.post(base + "/messageTTL", json=3600).status_code == 204
    assert httpx.get(base + "/messageTTL").json() == 3600
    assert httpx.post(base + "/messageTTL", json=-5).status_code == 412
    assert httpx.get(base).json()["message_ttl_in_seconds"] == 3600
    assert httpx.delete(base + "/messageTTL").status_code == 204
    assert httpx.delete(base + "/retention").status_code == 204
    assert httpx.get(base + "/messageTTL").json() is None
    assert httpx.get(base + "/retention").json() is None


def test_topic_quotas_and_ttl_on_persistent_and_scalable_topics(url: str) -> None:
    quota = {"limitSize": -1, "limitTime": 7200, "policy": "consumer_backlog_eviction"}
    for base in (
        f"{url}/admin/v2/persistent/public/default/quota-topic",
        f"{url}/admin/v2/scalable/public/default/quota-dag",
    ):
        url_set = base + "/backlogQuota?backlogQuotaType=message_age"
        assert httpx.post(url_set, json=quota).status_code == 204
        assert httpx.get(base + "/backlogQuotaMap").json()["message_age"]["limitTime"] == 7200
        assert httpx.delete(url_set).status_code == 204
        assert httpx.get(base + "/backlogQuotaMap").json() == {}
        # A POST with no body still says JSON: the admin API refuses other POSTs (ADR 0044).
        json_type = {"Content-Type": "application/json"}
        assert httpx.post(base + "/messageTTL?messageTTL=600", headers=json_type).status_code == 204
        assert httpx.get(base + "/messageTTL").json() == 600
        assert httpx.post(base + "/messageTTL?messageTTL=-1", headers=json_type).status_code == 412
        assert httpx.delete(base + "/messageTTL").status_code == 204
        assert httpx.get(base + "/messageTTL").json() is None


def test_cli_backlog_quota_retention_and_ttl_commands(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    _namespace(url, "quota-cli")
    ns = "public/quota-cli"
    code, out, err = run(
        capsys, url, "namespaces", "set-backlog-quota", ns, "-l", "10M", "-p", "producer_exception"
    )
    assert code == 0, err
    code, out, _ = run(capsys, url, "-o", "json", "namespaces", "get-backlog-quotas", ns)
    assert json.loads(out)["destination_storage"]["limitSize"] == 10 * 1024 * 1024
    code, out, _ = run(
        capsys, url, "namespaces", "set-backlog-quota", ns, "-lt", "2h", "-t", "message_age",
        "-p", "consumer_backlog_eviction",
    )  # fmt: skip
    code, out, _ = run(capsys, url, "namespaces", "get-backlog-quotas", ns)
    assert "message_age: limitSize -1 B, limitTime 7200 s, policy consumer_backlog_eviction" in out
    assert run(capsys, url, "namespaces", "remove-backlog-quota", ns, "-t", "message_age")[0] == 0
    code, out, _ = run(capsys, url, "-o", "json", "namespaces", "get-backlog-quotas", ns)
    assert list(json.loads(out)) == ["destination_storage"]
    with pytest.raises(SystemExit):
        run(
            capsys,
            url,
            "namespaces",
            "set-backlog-quota",
            ns,
            "-l",
            "10X",
            "-p",
            "producer_exception",
        )
    assert run(capsys, url, "namespaces", "set-retention", ns, "-t", "3h", "-s", "1G")[0] == 0
    code, out, _ = run(capsys, url, "namespaces", "get-retention", ns)
    assert "180 min / 1024 MB" in out
    assert run(capsys, url, "namespaces", "set-message-ttl", ns, "-ttl", "1h")[0] == 0
    code, out, _ = run(capsys, url, "namespaces", "get-message-ttl", ns)
    assert out.strip() == f"{ns}: message TTL 3600 s"
    topic = "persistent://public/quota-cli/orders"
    code, out, err = run(
        capsys, url, "topics", "set-backlog-quota", topic, "-l", "1G", "-p", "producer_request_hold"
    )
    assert code == 0, err
    code, out, _ = run(capsys, url, "-o", "json", "topics", "get-backlog-quotas", topic)
    assert json.loads(out)["destination_storage"]["policy"] == "producer_request_hold"
    assert run(capsys, url, "topics", "set-message-ttl", topic, "-ttl", "30m")[0] == 0
    code, out, _ = run(capsys, url, "topics", "get-message-ttl", topic)
    assert out.strip() == f"{topic}: message TTL 1800 s"
    assert run(capsys, url, "topics", "remove-message-ttl", topic)[0] == 0
    code, out, _ = run(capsys, url, "topics", "get-message-ttl", topic)
    assert "not set" in out


def test_a_deleted_topics_policies_do_not_come_back_with_a_topic_of_the_same_name(
    url: str,
) -> None:
    """Pulsar deletes a topic's policies with the topic: a new topic of the same name starts
    with the namespace's policies, not the old topic's quota and TTL."""
    json_type = {"Content-Type": "application/json"}
    quota = {"limitSize": 1024, "limitTime": -1, "policy": "producer_exception"}
    persistent = f"{url}/admin/v2/persistent/public/default/policies-reborn"
    partitioned = f"{url}/admin/v2/persistent/public/default/policies-reborn-p"
    scalable = f"{url}/admin/v2/scalable/public/default/policies-reborn-dag"
    assert httpx.put(persistent, headers=json_type).status_code == 204
    assert httpx.put(partitioned + "/partitions", json=2).status_code == 204
    assert httpx.put(scalable, json={"numInitialSegments": 2}).status_code == 204
    for base in (persistent, partitioned, scalable):
        assert httpx.post(base + "/backlogQuota", json=quota).status_code == 204
        assert httpx.post(base + "/messageTTL?messageTTL=60", headers=json_type).status_code == 204
    assert httpx.delete(persistent).status_code == 204
    assert httpx.delete(partitioned + "/partitions").status_code == 204
    assert httpx.delete(scalable).status_code == 204

    assert httpx.put(persistent, headers=json_type).status_code == 204
    assert httpx.put(partitioned + "/partitions", json=2).status_code == 204
    assert httpx.put(scalable, json={"numInitialSegments": 2}).status_code == 204
    for base in (persistent, partitioned, scalable):
        assert httpx.get(base + "/backlogQuotaMap").json() == {}, base
        assert httpx.get(base + "/messageTTL").json() is None, base
