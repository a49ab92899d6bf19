"""PIP-483's admin surface on a real ``braid standalone``: the topic and namespace auto-scale
overrides (REST, AdminClient, ``braid admin``), the extended topic stats and ``/metrics``."""

from __future__ import annotations

import itertools
import json

import httpx
import pytest

from braid.admin.client import AdminClient, AdminInvalidInputError, AdminNotFoundError
from braid.cli.main import main
from tests.support.standalone import StandaloneProcess

_names = itertools.count()


@pytest.fixture
def topic(admin_client: AdminClient) -> str:
    name = f"topic://public/default/auto-{next(_names)}"
    admin_client.scalable_topics.create(name, segments=2)
    return name


@pytest.fixture
def namespace(admin_client: AdminClient) -> str:
    name = f"public/auto-ns-{next(_names)}"
    admin_client.namespaces.create(name)
    return name


def test_a_topic_override_round_trips_and_shows_in_the_effective_policy(
    admin_client: AdminClient, topic: str
) -> None:
    assert admin_client.scalable_topics.get_auto_scale_policy(topic) is None
    admin_client.scalable_topics.set_auto_scale_policy(
        topic, {"maxSegments": 8, "splitCooldownMs": 30_000, "enabled": True}
    )
    assert admin_client.scalable_topics.get_auto_scale_policy(topic) == {
        "enabled": True,
        "maxSegments": 8,
        "splitCooldownMs": 30_000,
    }
    section = admin_client.scalable_topics.stats(topic)["autoScale"]
    assert section["effectivePolicy"]["maxSegments"] == 8
    assert section["effectivePolicy"]["mergeCooldownMs"] == 300_000  # broker default
    assert section["overrides"]["topic"] == {
        "enabled": True,
        "maxSegments": 8,
        "splitCooldownMs": 30_000,
    }
    assert section["running"] is True and section["lastDecision"] is not None
    # The layout (ScalableTopicMetadata) carries it as autoScalePolicy, epoch unchanged.
    layout = admin_client.scalable_topics.get(topic)
    assert layout["autoScalePolicy"]["maxSegments"] == 8 and layout["epoch"] == 0
    admin_client.scalable_topics.remove_auto_scale_policy(topic)
    assert admin_client.scalable_topics.get_auto_scale_policy(topic) is None


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"splitMsgRateInThreshold": 500}, ["splitMsgRateInThreshold", "mergeMsgRateInThreshold"]),
        ({"minSegments": 10, "maxSegments": 4}, ["minSegments", "maxSegments"]),
        ({"splitCooldownMs": -1}, ["splitCooldownMs"]),
        ({"mergeWindow": 5}, ["mergeWindow"]),
        ({"enabled": "yes"}, ["enabled"]),
    ],
)
def test_an_invalid_topic_override_is_a_400_naming_the_keys(
    admin_client: AdminClient, topic: str, policy: dict[str, object], named: list[str]
) -> None:
    with pytest.raises(AdminInvalidInputError) as caught:
        admin_client.scalable_topics.set_auto_scale_policy(topic, policy)
    assert caught.value.status == 400
    for key in named:
        assert key in caught.value.reason
    assert admin_client.scalable_topics.get_auto_scale_policy(topic) is None


def test_the_topic_override_is_checked_after_resolution_over_the_namespace(
    admin_client: AdminClient, namespace: str
) -> None:
    admin_client.namespaces.set_scalable_topic_auto_scale_policy(
        namespace, {"mergeMsgRateInThreshold": 5_000}
    )
    assert admin_client.namespaces.get_scalable_topic_auto_scale_policy(namespace) == {
        "mergeMsgRateInThreshold": 5_000
    }
    topic = f"topic://{namespace}/t"
    admin_client.scalable_topics.create(topic)
    with pytest.raises(AdminInvalidInputError) as caught:
        admin_client.scalable_topics.set_auto_scale_policy(
            topic, {"splitMsgRateInThreshold": 3_000}
        )
    assert "from the namespace" in caught.value.reason
    assert "splitMsgRateInThreshold" in caught.value.reason
    # Setting both at the topic level is consistent on its own.
    admin_client.scalable_topics.set_auto_scale_policy(
        topic, {"splitMsgRateInThreshold": 3_000, "mergeMsgRateInThreshold": 300}
    )
    effective = admin_client.scalable_topics.stats(topic)["autoScale"]["effectivePolicy"]
    assert effective["splitMsgRateInThreshold"] == 3_000
    assert effective["mergeMsgRateInThreshold"] == 300
    admin_client.namespaces.remove_scalable_topic_auto_scale_policy(namespace)
    assert admin_client.namespaces.get_scalable_topic_auto_scale_policy(namespace) is None
    admin_client.scalable_topics.delete(topic)


def test_an_invalid_namespace_override_is_refused_against_broker_conf(
    admin_client: AdminClient, namespace: str
) -> None:
    with pytest.raises(AdminInvalidInputError) as caught:
        admin_client.namespaces.set_scalable_topic_auto_scale_policy(
            namespace, {"mergeBytesRateOutThreshold": 999_000_000}
        )
    assert "mergeBytesRateOutThreshold" in caught.value.reason
    assert "splitBytesRateOutThreshold" in caught.value.reason
    with pytest.raises(AdminInvalidInputError, match="unknown auto-scale policy key 'bogus'"):
        admin_client.namespaces.set_scalable_topic_auto_scale_policy(namespace, {"bogus": 1})
    with pytest.raises(AdminNotFoundError):
        admin_client.namespaces.set_scalable_topic_auto_scale_policy(
            "public/no-such-ns", {"enabled": False}
        )
    with pytest.raises(AdminNotFoundError):
        admin_client.scalable_topics.get_auto_scale_policy("topic://public/default/no-such")


def test_a_raw_body_that_is_not_an_object_is_a_400(
    standalone_subprocess: StandaloneProcess, topic: str
) -> None:
    path = topic.removeprefix("topic://")
    for body in ("[1, 2]", "null", "not json"):
        answer = httpx.post(
            f"{standalone_subprocess.web_url}/admin/v2/scalable/{path}/autoScalePolicy",
            content=body,
            headers={"content-type": "application/json"},
            timeout=10,
        )
        assert answer.status_code == 400, (body, answer.text)
        assert "reason" in answer.json()


def test_metrics_expose_the_auto_scale_counters_and_the_broker_counters(
    admin_client: AdminClient, topic: str
) -> None:
    admin_client.scalable_topics.stats(topic)  # starts the controller: its leader reports
    persistent = f"persistent://public/default/metrics-{next(_names)}"
    admin_client.topics.create(persistent)
    text = admin_client.metrics()
    assert f'pulsar_scalable_topic_active_segments{{topic="{topic}"}} 2.0' in text
    for name in (
        "auto_splits_total",
        "auto_merges_total",
        "split_suppressed_max_segments_total",
        "merge_suppressed_max_depth_total",
    ):
        assert f'pulsar_scalable_topic_{name}{{topic="{topic}"}} 0.0' in text
    labels = f'cluster="standalone",namespace="public/default",topic="{persistent}"'
    for name in ("in_messages", "in_bytes", "out_messages", "out_bytes"):
        assert f"pulsar_{name}_total{{{labels}}} 0.0" in text
    assert "# TYPE pulsar_subscription_back_log gauge" in text


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_braid_admin_sets_gets_and_removes_the_overrides(
    capsys: pytest.CaptureFixture[str], admin_client: AdminClient, topic: str, namespace: str
) -> None:
    url = admin_client.url
    code, out, err = run(
        capsys,
        "admin",
        "--url",
        url,
        "scalable-topics",
        "set-auto-scale-policy",
        topic,
        "--max-segments",
        "8",
        "--split-cooldown",
        "30s",
        "--split-bytes-rate-in-threshold",
        "20MB",
        "--merge-bytes-rate-in-threshold",
        "2MB",
    )
    assert code == 0, err
    assert "Auto-scale override of" in out
    code, out, _ = run(
        capsys,
        "admin",
        "--url",
        url,
        "-o",
        "json",
        "scalable-topics",
        "get-auto-scale-policy",
        topic,
    )
    assert json.loads(out) == {
        "maxSegments": 8,
        "splitCooldownMs": 30_000,
        "splitBytesRateInThreshold": 20_000_000.0,
        "mergeBytesRateInThreshold": 2_000_000.0,
    }
    code, out, _ = run(capsys, "admin", "--url", url, "scalable-topics", "stats", topic)
    assert code == 0
    assert "Auto split/merge" in out and "Effective policy" in out
    assert "segments:       1..8" in out
    assert "topic override:" in out
    code, out, err = run(
        capsys,
        "admin",
        "--url",
        url,
        "scalable-topics",
        "set-auto-scale-policy",
        topic,
        "--split-msg-rate-in-threshold",
        "10",
    )
    assert code == 1
    assert "splitMsgRateInThreshold" in err and "mergeMsgRateInThreshold" in err
    code, out, err = run(
        capsys, "admin", "--url", url, "scalable-topics", "set-auto-scale-policy", topic
    )
    assert code == 1 and "at least one setting" in err
    code, out, _ = run(
        capsys, "admin", "--url", url, "scalable-topics", "remove-auto-scale-policy", topic
    )
    assert code == 0
    code, out, _ = run(
        capsys, "admin", "--url", url, "scalable-topics", "get-auto-scale-policy", topic
    )
    assert "no auto-scale override" in out
    code, out, err = run(
        capsys,
        "admin",
        "--url",
        url,
        "namespaces",
        "set-scalable-topic-auto-scale-policy",
        namespace,
        "--enabled",
        "off",
        "--load-report-rate-change-threshold",
        "10%",
    )
    assert code == 0, err
    code, out, _ = run(
        capsys,
        "admin",
        "--url",
        url,
        "-o",
        "json",
        "namespaces",
        "get-scalable-topic-auto-scale-policy",
        namespace,
    )
    assert json.loads(out) == {"enabled": False, "loadReportRateChangeThreshold": 0.1}
    code, out, _ = run(
        capsys,
        "admin",
        "--url",
        url,
        "namespaces",
        "remove-scalable-topic-auto-scale-policy",
        namespace,
    )
    assert code == 0
    assert admin_client.namespaces.get_scalable_topic_auto_scale_policy(namespace) is None
