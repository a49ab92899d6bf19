"""The auto-scaler's decision log: splits and merges kept apart from the decisions not taken,
repeats of a decision not taken folded into one entry, both bounded, and one ``seq`` that moves
with every change."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.scalable.autoscale_decisions import AutoScaleDecisionLog
from braid.scalable.autoscaler import DecisionRecord


def _none(
    at_ms: int, reason: str = "dead_band", detail: str = "between thresholds"
) -> DecisionRecord:
    return DecisionRecord(at_ms, "tick", "none", reason, detail)


def _split(at_ms: int, segment_id: int = 0) -> DecisionRecord:
    return DecisionRecord(
        at_ms,
        "tick",
        "split",
        "load-driven",
        "a rate is at 3.00x its split threshold",
        (segment_id,),
        0x8000,
    )


def test_a_repeated_decision_not_taken_is_folded_with_its_first_and_last_time() -> None:
    log = AutoScaleDecisionLog()
    log.append(_none(1000, detail="segment 0 between thresholds"))
    log.append(_none(2000, detail="segment 1 between thresholds"))
    log.append(_none(3000, detail="segment 0 between thresholds"))
    [entry] = log.to_json()["notTaken"]
    assert entry["count"] == 3 and entry["firstAtMs"] == 1000 and entry["atMs"] == 3000
    assert entry["detail"] == "segment 0 between thresholds" and entry["seq"] == 3


def test_another_reason_starts_a_new_entry_and_splits_stay_apart() -> None:
    log = AutoScaleDecisionLog()
    log.append(_none(1000))
    log.append(_split(2000))
    log.append(_none(3000, "split_cooldown", "a split is warranted but ..."))
    log.append(_none(4000))
    doc = log.to_json()
    assert [d["reason"] for d in doc["notTaken"]] == ["dead_band", "split_cooldown", "dead_band"]
    assert [d["action"] for d in doc["taken"]] == ["split"]
    assert doc["taken"][0]["segmentIds"] == [0] and doc["taken"][0]["splitHash"] == 0x8000
    assert doc["seq"] == 4 and doc["taken"][0]["seq"] == 2


def test_a_long_quiet_stretch_never_pushes_the_splits_out() -> None:
    log = AutoScaleDecisionLog(taken_capacity=3, not_taken_capacity=2)
    for i in range(5):
        log.append(_split(i, i))
    for i in range(100):
        log.append(_none(100 + i, reason=("dead_band", "no_load_record")[i % 2]))
    assert [d.record.segment_ids for d in log.taken()] == [(2,), (3,), (4,)]
    assert len(log.not_taken()) == 2


@given(st.lists(st.sampled_from(["split", "dead_band", "split_cooldown", "merge"]), max_size=60))
def test_seq_moves_with_every_append_and_entries_stay_ordered(kinds: list[str]) -> None:
    log = AutoScaleDecisionLog(taken_capacity=5, not_taken_capacity=4)
    for at, kind in enumerate(kinds):
        if kind in ("split", "merge"):
            log.append(DecisionRecord(at, "tick", kind, "r", "d"))
        else:
            log.append(_none(at, kind))
        assert log.seq == at + 1
    for entries in (log.taken(), log.not_taken()):
        seqs = [e.seq for e in entries]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    folded = sum(e.count for e in log.not_taken())
    assert folded <= sum(1 for k in kinds if k not in ("split", "merge"))


def test_a_log_keeps_at_least_one_entry_of_each_kind() -> None:
    with pytest.raises(ValueError):
        AutoScaleDecisionLog(taken_capacity=0)
