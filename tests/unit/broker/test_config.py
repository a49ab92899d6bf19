"""BrokerConfig loading: defaults, broker.conf syntax, BRAID_* environment, overrides, errors."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from braid.broker.config import (
    KEYS,
    SCALABLE_TOPIC_KEYS,
    BrokerConfig,
    InvalidConfig,
    describe,
    load_config,
    parse_config_text,
)
from braid.broker.gc_policy import BROKER_DEFAULT_THRESHOLDS, GcPolicy
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import InvalidInputError

REPO = Path(__file__).resolve().parents[3]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_pulsar_and_the_seeds() -> None:
    config = load_config(None, {}, {})
    assert config.broker_service_port == 6650
    assert config.web_service_port == 8080
    assert config.max_message_size == 5 * 1024 * 1024
    assert config.keep_alive_interval_seconds == 30
    assert config.broker_deduplication_enabled is False
    assert config.allow_auto_topic_creation is True
    assert config.managed_ledger_max_entries_per_ledger == 50_000
    assert config.dispatcher_max_read_batch_size == 100
    assert config.scalable_topic_enabled is True
    assert config.bind_address == "127.0.0.1"
    assert config.advertised_address == "127.0.0.1"  # follows the bind address when unset
    assert config.data_dir.is_absolute()
    assert dict(config.scalable_topic_settings) == {}


def test_metadata_store_defaults_to_sqlite_file_in_data_dir(tmp_path: Path) -> None:
    config = load_config(None, {"dataDir": str(tmp_path / "d")}, {})
    assert config.data_dir == tmp_path / "d"
    assert config.metadata_store_url.startswith("sqlite:///")
    assert config.metadata_store_url.endswith(".db")
    assert str(tmp_path / "d") in config.metadata_store_url


def test_file_values_are_parsed_with_comments_blanks_and_spaces(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "# a comment\n\n  brokerServicePort = 7000 \nallowAutoTopicCreation=false\n"
        "clusterName=east\nadvertisedAddress=broker.example\nbrokerDeduplicationEnabled=TRUE\n"
        "defaultRetentionTimeInMinutes=-1\n",
    )
    config = load_config(path, {}, {})
    assert config.broker_service_port == 7000
    assert config.allow_auto_topic_creation is False
    assert config.cluster_name == "east"
    assert config.advertised_address == "broker.example"
    assert config.broker_deduplication_enabled is True
    assert config.default_retention_time_in_minutes == -1


def test_empty_value_means_default(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, "advertisedAddress=\nbrokerServicePort=\n"), {}, {})
    assert config.broker_service_port == 6650
    assert config.advertised_address == config.bind_address


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    path = _write(tmp_path, "brokerServicePort=7000\nwebServicePort=7001\n")
    env = {"BRAID_brokerServicePort": "6651", "BRAID_webServicePort": "6652", "PATH": "/bin"}
    config = load_config(path, {"webServicePort": "9000"}, env)
    assert config.broker_service_port == 6651
    assert config.web_service_port == 9000


def test_unknown_keys_are_warned_about_by_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, "brokerServicePrt=7000\n")
    with caplog.at_level(logging.WARNING, logger="braid.broker.config"):
        config = load_config(path, {}, {"BRAID_webServicePrt": "1", "BRAID_LOG_LEVEL": "debug"})
    assert config.broker_service_port == 6650
    text = caplog.text
    assert "brokerServicePrt" in text
    assert "BRAID_webServicePrt" in text
    # Upper-case BRAID_ variables belong to other tools and are not config keys.
    assert "BRAID_LOG_LEVEL" not in text


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("brokerServicePort", "sixty"),
        ("brokerServicePort", "70000"),
        ("webServicePort", "-1"),
        ("allowAutoTopicCreation", "maybe"),
        ("maxMessageSize", "0"),
        ("managedLedgerMaxEntriesPerLedger", "1.5"),
        ("defaultRetentionSizeInMB", "-2"),
        ("metadataStoreUrl", "/no/scheme"),
        ("bindAddress", "127.0.0.1 extra"),
        ("clusterName", "a/b"),
        ("pythonGcThresholds", "700,10"),
        ("pythonGcThresholds", "0,10,10"),
        ("pythonGcThresholds", "many,10,10"),
        ("pythonGcFreezeAfterStartup", "sometimes"),
    ],
)
def test_bad_value_raises_invalid_config_naming_key_and_value(key: str, value: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {key: value}, {})
    assert isinstance(info.value, InvalidInputError)
    assert info.value.key == key
    assert info.value.value == value
    assert key in str(info.value) and value in str(info.value)


def test_bad_environment_value_is_reported_like_a_file_value() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {}, {"BRAID_keepAliveIntervalSeconds": "soon"})
    assert info.value.key == "keepAliveIntervalSeconds"


def test_line_without_equals_is_rejected_with_its_line_number(tmp_path: Path) -> None:
    path = _write(tmp_path, "brokerServicePort=1\njust some words\n")
    with pytest.raises(InvalidConfig, match=r"broker\.conf:2"):
        load_config(path, {}, {})


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="not found"):
        load_config(tmp_path / "absent.conf", {}, {})


def test_scalable_topic_keys_are_kept_raw_for_the_autoscale_policy(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "scalableTopicEnabled=false\nscalableTopicMaxSegments=8\nscalableTopicSplitCooldown=30s\n",
    )
    config = load_config(path, {}, {"BRAID_scalableTopicMergeWindow": "2m"})
    assert config.scalable_topic_enabled is False
    assert dict(config.scalable_topic_settings) == {
        "scalableTopicMaxSegments": "8",
        "scalableTopicSplitCooldown": "30s",
        "scalableTopicMergeWindow": "2m",
    }


def test_config_is_frozen() -> None:
    config = BrokerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.broker_service_port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.scalable_topic_settings["x"] = "y"  # type: ignore[index]


def test_every_field_has_a_config_key() -> None:
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    assert fields == {k.attribute for k in KEYS} | {"scalable_topic_settings", "load_balancer"}
    assert set(describe(BrokerConfig())) == {k.name for k in KEYS}


def test_gc_policy_keys_are_parsed_and_described() -> None:
    config = load_config(
        None, {"pythonGcThresholds": " 1000, 5 ,7", "pythonGcFreezeAfterStartup": "false"}, {}
    )
    assert config.gc_policy() == GcPolicy(freeze_after_startup=False, thresholds=(1000, 5, 7))
    assert describe(config)["pythonGcThresholds"] == "1000,5,7"
    assert BrokerConfig().gc_policy() == GcPolicy(True, BROKER_DEFAULT_THRESHOLDS)


def test_managed_ledger_config_follows_broker_settings() -> None:
    config = load_config(
        None,
        {
            "managedLedgerMaxEntriesPerLedger": "10",
            "managedLedgerMaxSizePerLedgerMbytes": "2",
            "managedLedgerMaxLedgerRolloverTimeMinutes": "3",
            "defaultRetentionTimeInMinutes": "-1",
            "defaultRetentionSizeInMB": "4",
        },
        {},
    )
    ml = config.managed_ledger_config()
    assert ml.max_entries_per_ledger == 10
    assert ml.max_size_per_ledger == 2 * 1024 * 1024
    assert ml.max_ledger_age_s == 180.0
    assert ml.retention_time_s == -1.0
    assert ml.retention_size_bytes == 4 * 1024 * 1024


def test_sample_broker_conf_loads_without_unknown_keys(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="braid.broker.config"):
        config = load_config(REPO / "conf" / "broker.conf", {}, {})
    assert "unknown" not in caplog.text
    assert config.broker_service_port == 6650
    parsed = parse_config_text((REPO / "conf" / "broker.conf").read_text())
    # The sample documents every typed key.
    assert {k.name for k in KEYS} <= set(parsed)


def test_unknown_scalable_topic_key_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="braid.broker.config"):
        config = load_config(None, {"scalableTopicMaxSegmnts": "8"}, {})
    assert "scalableTopicMaxSegmnts" in caplog.text
    assert dict(config.scalable_topic_settings) == {}


def test_bad_auto_scale_value_stops_loading_with_the_key_named() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {"scalableTopicSplitCooldown": "soon"}, {})
    assert info.value.key == "scalableTopicSplitCooldown"
    assert info.value.value == "soon"


def test_inconsistent_auto_scale_values_are_refused() -> None:
    with pytest.raises(InvalidConfig, match="scalableTopicMinSegments=8"):
        load_config(None, {"scalableTopicMinSegments": "8", "scalableTopicMaxSegments": "4"}, {})


@pytest.mark.parametrize("key", sorted(SCALABLE_TOPIC_KEYS))
def test_every_listed_auto_scale_key_is_read_by_the_policy(key: str) -> None:
    # A key the policy ignored would accept nonsense; every listed key must reject it.
    with pytest.raises(InvalidConfig):
        load_config(None, {key: "not-a-value"}, {})


def test_sample_auto_scale_defaults_match_the_policy_defaults() -> None:
    lines = (REPO / "conf" / "broker.conf").read_text().splitlines()
    uncommented = "\n".join(line[1:] for line in lines if line.startswith("#scalableTopic"))
    settings = parse_config_text(uncommented)
    assert set(settings) == SCALABLE_TOPIC_KEYS
    config = load_config(None, settings, {})
    policy = AutoScalePolicy.from_broker_config(config.scalable_topic_settings)
    assert policy == AutoScalePolicy()


def test_disk_keys_use_bookkeepers_names_and_are_checked_together() -> None:
    config = load_config(
        None,
        {"diskUsageThreshold": "0.9", "diskUsageLwmThreshold": "0.8", "diskCheckInterval": "500"},
        {},
    )
    thresholds = config.disk_thresholds()
    assert (thresholds.usage_threshold, thresholds.lwm_threshold) == (0.9, 0.8)
    assert thresholds.check_interval_s == 0.5
    with pytest.raises(InvalidConfig, match="diskUsageLwmThreshold"):
        load_config(None, {"diskUsageThreshold": "0.8", "diskUsageLwmThreshold": "0.9"}, {})
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {"diskUsageThreshold": "95"}, {})
    assert info.value.key == "diskUsageThreshold"


def test_connection_keys_use_pulsars_names() -> None:
    config = load_config(
        None,
        {
            "brokerMaxConnections": "100",
            "brokerMaxConnectionsPerIp": "10",
            "handshakeTimeoutSeconds": "3",
            "mallocMmapThresholdBytes": "0",
        },
        {},
    )
    assert (config.broker_max_connections, config.broker_max_connections_per_ip) == (100, 10)
    assert config.handshake_timeout_seconds == 3
    assert config.malloc_mmap_threshold_bytes == 0


def test_ledger_quorums_and_storage_client_keys_reach_the_managed_ledger_and_the_client() -> None:
    config = load_config(
        None,
        {
            "managedLedgerDefaultEnsembleSize": "3",
            "managedLedgerDefaultWriteQuorum": "2",
            "managedLedgerDefaultAckQuorum": "2",
            "bookkeeperClientSpeculativeReadTimeoutInMillis": "250",
            "bookkeeperClientHealthCheckQuarantineTimeInSeconds": "60",
            "bookkeeperClientQuarantineRatio": "0.5",
            "bookkeeperClientEnforceMinNumRacksPerWriteQuorum": "true",
        },
        {},
    )
    ml = config.managed_ledger_config()
    assert (ml.ensemble, ml.write_quorum, ml.ack_quorum) == (3, 2, 2)
    settings = config.storage_client_settings()
    assert settings.speculative_read_timeout_ms == 250
    assert settings.health.quarantine_s == 60.0 and settings.health.quarantine_ratio == 0.5
    assert settings.placement.rack_aware and settings.placement.enforce_min_racks
    defaults = load_config(None, {}, {}).managed_ledger_config()
    assert (defaults.ensemble, defaults.write_quorum, defaults.ack_quorum) == (1, 1, 1)


@pytest.mark.parametrize(("e", "w", "a"), [("2", "3", "1"), ("3", "2", "3"), ("1", "1", "2")])
def test_quorums_that_cannot_be_met_name_all_three_keys(e: str, w: str, a: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_config(
            None,
            {
                "managedLedgerDefaultEnsembleSize": e,
                "managedLedgerDefaultWriteQuorum": w,
                "managedLedgerDefaultAckQuorum": a,
            },
            {},
        )
    assert set(caught.value.keys) == {
        "managedLedgerDefaultEnsembleSize",
        "managedLedgerDefaultWriteQuorum",
        "managedLedgerDefaultAckQuorum",
    }
    with pytest.raises(InvalidConfig, match="bookkeeperClientQuarantineRatio"):
        load_config(None, {"bookkeeperClientQuarantineRatio": "1.5"}, {})


def test_a_pulsar_standalone_conf_loads_with_its_unused_keys_in_one_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conf = REPO / "tools" / "pulsar_client_ci" / "upstream" / "test-conf" / "standalone-ssl.conf"
    with caplog.at_level(logging.DEBUG, logger="braid.broker.config"):
        config = load_config(conf, {}, {})
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "zookeeperServers" in caplog.text and "topicLevelPoliciesEnabled" in caplog.text
    assert config.authorization_enabled and config.super_user_roles == (
        "localhost",
        "superUser",
        "admin",
    )
    assert config.tls_broker_port == 6651 and config.anonymous_user_role == "anonymous"


def test_a_near_miss_of_a_known_key_is_warned_about_with_the_key_it_resembles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="braid.broker.config"):
        load_config(
            None, {"superUserRols": "a", "managedLedgerMinLedgerRolloverTimeMinutes": "1"}, {}
        )
    assert "superUserRols (did you mean superUserRoles?)" in caplog.text
    assert "managedLedgerMinLedgerRolloverTimeMinutes" not in caplog.text


@pytest.mark.parametrize(
    ("key", "value"),
    [("authorizationEnabled", "maybe"), ("superUserRoles", "a,\x01b")],
)
def test_a_bad_authorization_value_stops_loading_with_the_key_named(key: str, value: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {key: value}, {})
    assert info.value.key == key
