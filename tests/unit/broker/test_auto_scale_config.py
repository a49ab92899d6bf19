"""PIP-483's ``scalableTopic*`` keys at start-up: each value alone, then the merged settings once.

A pair that is only consistent together (split 300 / merge 30: 300 alone is below the default
merge threshold of 1000) must load, whichever source each value comes from; a truly inconsistent
pair must be refused naming both keys; a malformed value is still reported on its own key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.broker.config import BrokerConfig, InvalidConfig, load_config
from braid.core.autoscale_policy import AutoScalePolicy

SPLIT_IN = "scalableTopicSplitMsgRateInThreshold"
MERGE_IN = "scalableTopicMergeMsgRateInThreshold"
MIN_SEGMENTS = "scalableTopicMinSegments"
MAX_SEGMENTS = "scalableTopicMaxSegments"

#: Where each of the two values comes from.
SOURCES = [
    ("file", "file"),
    ("env", "env"),
    ("file", "env"),
    ("env", "file"),
    ("flag", "file"),
    ("env", "flag"),
]


def load_pair(
    tmp_path: Path, first: tuple[str, str], second: tuple[str, str], sources: tuple[str, str]
) -> BrokerConfig:
    """Load two settings, each from the ``broker.conf`` file, a ``BRAID_<key>`` variable or a
    command-line flag as ``sources`` says; a file is written only when one is used."""
    in_file: dict[str, str] = {}
    env: dict[str, str] = {"BRAID_LOG_LEVEL": "INFO"}  # an unrelated variable, ignored
    flags: dict[str, str] = {}
    for (key, value), source in zip((first, second), sources, strict=True):
        if source == "file":
            in_file[key] = value
        elif source == "env":
            env[f"BRAID_{key}"] = value
        else:
            flags[key] = value
    path = None
    if in_file:
        path = tmp_path / "broker.conf"
        path.write_text("".join(f"{key}={value}\n" for key, value in in_file.items()))
    return load_config(path, flags, env)


def policy_of(config: BrokerConfig) -> AutoScalePolicy:
    return AutoScalePolicy.from_broker_config(config.scalable_topic_settings)


@pytest.mark.parametrize("sources", SOURCES)
def test_lower_ingest_thresholds_consistent_only_together_load(
    tmp_path: Path, sources: tuple[str, str]
) -> None:
    config = load_pair(tmp_path, (SPLIT_IN, "300"), (MERGE_IN, "30"), sources)
    policy = policy_of(config)
    assert (policy.split_msg_rate_in_threshold, policy.merge_msg_rate_in_threshold) == (300, 30)
    # Everything else keeps PIP-483's defaults.
    assert policy.split_bytes_rate_in_threshold == AutoScalePolicy().split_bytes_rate_in_threshold


@pytest.mark.parametrize("sources", SOURCES)
def test_an_inconsistent_pair_is_refused_naming_both_keys(
    tmp_path: Path, sources: tuple[str, str]
) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_pair(tmp_path, (SPLIT_IN, "300"), (MERGE_IN, "500"), sources)
    error = info.value
    assert set(error.keys) == {SPLIT_IN, MERGE_IN}
    assert error.key is None
    message = str(error)
    assert f"{SPLIT_IN}=300" in message and f"{MERGE_IN}=500" in message
    assert "dead band" in message


@pytest.mark.parametrize(
    ("split", "merge"),
    [
        ("scalableTopicSplitBytesRateInThreshold", "scalableTopicMergeBytesRateInThreshold"),
        ("scalableTopicSplitMsgRateOutThreshold", "scalableTopicMergeMsgRateOutThreshold"),
        ("scalableTopicSplitBytesRateOutThreshold", "scalableTopicMergeBytesRateOutThreshold"),
    ],
)
@pytest.mark.parametrize("sources", [("file", "env"), ("env", "file")])
def test_every_threshold_pair_follows_the_same_rule(
    tmp_path: Path, split: str, merge: str, sources: tuple[str, str]
) -> None:
    # 3 and 1 are below every default merge threshold (bytes are plain bytes here).
    config = load_pair(tmp_path, (split, "3"), (merge, "1"), sources)
    assert config.scalable_topic_settings == {split: "3", merge: "1"}
    policy_of(config)
    with pytest.raises(InvalidConfig) as info:
        load_pair(tmp_path, (split, "3"), (merge, "5"), sources)
    assert set(info.value.keys) == {split, merge}


@pytest.mark.parametrize("sources", SOURCES)
def test_min_and_max_segments_consistent_only_together_load(
    tmp_path: Path, sources: tuple[str, str]
) -> None:
    # minSegments=80 alone exceeds the default maxSegments of 64.
    config = load_pair(tmp_path, (MIN_SEGMENTS, "80"), (MAX_SEGMENTS, "100"), sources)
    policy = policy_of(config)
    assert (policy.min_segments, policy.max_segments) == (80, 100)


@pytest.mark.parametrize("sources", SOURCES)
def test_min_above_max_segments_is_refused_naming_both_keys(
    tmp_path: Path, sources: tuple[str, str]
) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_pair(tmp_path, (MIN_SEGMENTS, "8"), (MAX_SEGMENTS, "4"), sources)
    assert set(info.value.keys) == {MIN_SEGMENTS, MAX_SEGMENTS}
    assert f"{MIN_SEGMENTS}=8 must not exceed {MAX_SEGMENTS}=4" in str(info.value)


def test_a_value_that_conflicts_with_a_default_names_the_default_key_too() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {}, {f"BRAID_{SPLIT_IN}": "300"})
    assert set(info.value.keys) == {SPLIT_IN, MERGE_IN}
    assert f"{MERGE_IN} (default 1000)" in str(info.value)
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {MIN_SEGMENTS: "65"}, {})
    assert f"{MIN_SEGMENTS}=65 must not exceed {MAX_SEGMENTS} (default 64)" in str(info.value)


def test_the_environment_overrides_the_file_before_consistency_is_checked(
    tmp_path: Path,
) -> None:
    # The file alone is inconsistent; the environment replaces the bad merge threshold.
    path = tmp_path / "broker.conf"
    path.write_text(f"{SPLIT_IN}=300\n{MERGE_IN}=500\n")
    config = load_config(path, {}, {f"BRAID_{MERGE_IN}": "30"})
    assert policy_of(config).merge_msg_rate_in_threshold == 30


@pytest.mark.parametrize("sources", SOURCES)
def test_a_malformed_value_is_reported_on_its_own_key_even_beside_its_pair(
    tmp_path: Path, sources: tuple[str, str]
) -> None:
    with pytest.raises(InvalidConfig) as info:
        load_pair(tmp_path, (SPLIT_IN, "fast"), (MERGE_IN, "30"), sources)
    assert (info.value.key, info.value.value, info.value.keys) == (SPLIT_IN, "fast", (SPLIT_IN,))


def test_an_out_of_range_value_is_reported_on_its_own_key() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {MAX_SEGMENTS: "0", MIN_SEGMENTS: "1"}, {})
    assert (info.value.key, info.value.value) == (MAX_SEGMENTS, "0")
    assert "must be >= 1" in str(info.value)
    with pytest.raises(InvalidConfig) as info:
        load_config(None, {MAX_SEGMENTS: "70000"}, {})
    assert info.value.key == MAX_SEGMENTS
    assert "65536" in str(info.value)
