"""How ``braid admin scalable-topics stats`` shows auto split/merge, and the policy flags."""

from __future__ import annotations

import argparse

import pytest

from braid.cli import admin_output as out
from braid.cli.admin import add_admin_parser
from braid.cli.admin_commands import _policy_from_args
from braid.core.errors import InvalidInputError

STATS = {
    "topic": "topic://public/default/orders",
    "epoch": 1,
    "segments": {
        "0": {"state": "SEALED", "hashRange": {"start": 0, "end": 65535}, "parentIds": []},
        "1": {
            "state": "ACTIVE",
            "hashRange": {"start": 0, "end": 0xD3FF},
            "parentIds": [0],
            "load": {
                "msgRateIn": 812.5,
                "bytesRateIn": 81250.0,
                "msgRateOut": 812.5,
                "bytesRateOut": 81250.0,
                "ageMs": 95_000,
                "balancedSplitHash": 0x6A00,
            },
        },
        "2": {"state": "ACTIVE", "hashRange": {"start": 0xD400, "end": 65535}, "parentIds": [0]},
    },
    "controller": {"leaderBrokerUrl": "pulsar://127.0.0.1:6650", "isLeader": True},
    "autoScale": {
        "running": True,
        "lastDecision": {
            "atMs": 1_700_000_060_000,
            "trigger": "tick",
            "action": "none",
            "reason": "split_cooldown",
            "detail": "a split is warranted but the last split was at 1700000030000",
        },
        "counters": {
            "autoSplits": 1,
            "autoMerges": 0,
            "splitSuppressedMaxSegments": 0,
            "mergeSuppressedMaxDepth": 2,
        },
        "effectivePolicy": {
            "enabled": True,
            "minSegments": 1,
            "maxSegments": 8,
            "maxDagDepth": 10,
            "splitMsgRateInThreshold": 10000.0,
            "mergeMsgRateInThreshold": 1000.0,
            "splitCooldownMs": 60_000,
            "mergeCooldownMs": 300_000,
            "mergeWindowMs": 300_000,
            "autoScaleIntervalMs": 60_000,
            "loadReportIntervalMs": 10_000,
            "loadReportRateChangeThreshold": 0.25,
        },
        "overrides": {"namespace": None, "topic": {"maxSegments": 8}},
    },
}


def test_stats_explain_the_last_decision_the_load_and_the_policy() -> None:
    text = out.render_stats(STATS)
    assert "Auto split/merge" in text
    assert "last decision:        none (split_cooldown)" in text
    assert "a split is warranted" in text and "2023-11-14T22:14:20Z (tick)" in text
    assert "1 / 0" in text and "2 merges at maxDagDepth" in text
    row = next(line for line in text.splitlines() if line.startswith("1 ") and "/s" in line)
    assert "812.5/s" in row and "79.3 KiB/s" in row and "95s" in row and "0x6a00" in row
    assert any(line.startswith("2 ") and "no load record yet" in line for line in text.splitlines())
    assert "segments:       1..8" in text
    assert "split > 10000/s, merge < 1000/s" in text
    assert "split 1m, merge 5m, merge window 5m" in text
    assert "rewrite on > 25%" in text
    assert 'topic override: {"maxSegments": 8}' in text and "namespace override: none" in text


def test_an_invalid_policy_is_shown_with_its_reason() -> None:
    doc = {**STATS, "autoScale": {"effectivePolicy": None, "policyError": "bad keys"}}
    assert "invalid, auto split/merge is off: bad keys" in out.render_auto_scale(doc)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_admin_parser(parser.add_subparsers())
    return parser.parse_args(["admin", *argv])


def test_policy_flags_come_from_the_knob_table_and_parse_with_units() -> None:
    args = parse(
        "scalable-topics",
        "set-auto-scale-policy",
        "orders",
        "--enabled",
        "off",
        "--merge-window",
        "2m",
        "--split-bytes-rate-out-threshold",
        "1GiB",
        "--json",
        '{"maxSegments": 4, "enabled": true}',
    )
    assert _policy_from_args(args) == {
        "enabled": False,  # the flag wins over --json
        "maxSegments": 4,
        "mergeWindowMs": 120_000,
        "splitBytesRateOutThreshold": float(2**30),
    }
    with pytest.raises(InvalidInputError, match="at least one setting"):
        _policy_from_args(parse("namespaces", "set-scalable-topic-auto-scale-policy", "a/b"))
    with pytest.raises(InvalidInputError, match="--json is not valid JSON"):
        _policy_from_args(
            parse("namespaces", "set-scalable-topic-auto-scale-policy", "a/b", "--json", "{")
        )
