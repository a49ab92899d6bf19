"""Property tests of PIP-483's decision: caps, cooldowns, adjacency, determinism, liveness."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.autoscale_evaluator import (
    AutoScaleState,
    Decision,
    Merge,
    NoAction,
    NoActionReason,
    Split,
    decide,
)
from braid.core.autoscale_policy import (
    AutoScalePolicy,
    AutoScalePolicyOverride,
    InvalidAutoScalePolicy,
)
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import decode_layout, encode_layout
from braid.core.segment_load import SegmentLoad, is_material_change

NOW = 10_000_000
DEFAULTS = AutoScalePolicy()


def make_load(rates: Sequence[float], modified_ms: int = 0) -> SegmentLoad:
    return SegmentLoad(rates[0], rates[1], rates[2], rates[3], modified_ms=modified_ms)


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    """A layout reached from ``initial(1..4)`` by up to 10 random splits and adjacent merges."""
    layout = SegmentLayout.initial(draw(st.integers(1, 4)))
    for step in range(draw(st.integers(0, 10))):
        active = layout.active_segments
        if len(active) >= 2 and draw(st.booleans()):
            i = draw(st.integers(0, len(active) - 2))
            layout = layout.merge_segments([active[i].segment_id, active[i + 1].segment_id], step)
        else:
            layout = layout.split_segment(draw(st.sampled_from(active)).segment_id, step)
    return layout


def _rate(draw: st.DrawFn, merge: float, split: float, profile: str) -> float:
    cold = [0.0, merge / 2, merge * 0.999]
    if profile == "cold":
        return draw(st.sampled_from(cold))
    # Cold, at the merge threshold, dead band, at the split threshold, hot by different factors
    # (so the most overloaded segment is not a tie).
    levels = [*cold, merge, (merge + split) / 2, split, split * 1.5, split * 3, split * 7]
    return draw(st.sampled_from(levels))


@st.composite
def loads_for(draw: st.DrawFn, layout: SegmentLayout) -> dict[int, SegmentLoad]:
    """Load records biased towards cold segments, so merges are reached as often as splits."""
    loads = {}
    for segment in layout.active_segments:
        profile = draw(st.sampled_from(["cold", "mixed", "cold", "none", "mixed", "cold"]))
        if profile == "none":
            continue  # no load record yet
        rates = [
            _rate(draw, merge, split, profile)
            for merge, split in zip(
                DEFAULTS.merge_thresholds, DEFAULTS.split_thresholds, strict=True
            )
        ]
        modified = NOW - draw(st.sampled_from([900_000, 900_000, 900_000, 300_000, 299_999, 0]))
        loads[segment.segment_id] = make_load(rates, modified)
    return loads


@st.composite
def policies(draw: st.DrawFn) -> AutoScalePolicy:
    max_segments = draw(st.sampled_from([16, 16, 12, 8, 6, 4, 3, 2, 1]))
    return AutoScalePolicy(
        enabled=draw(st.sampled_from([True] * 9 + [False])),
        max_segments=max_segments,
        min_segments=draw(st.integers(1, max_segments)),
        max_dag_depth=draw(st.integers(0, 4)),
    )


@st.composite
def states(draw: st.DrawFn) -> AutoScaleState:
    ago = st.sampled_from([None, 3_600_000, None, 300_000, 299_999, 60_000, 0])
    last_split, last_merge = draw(ago), draw(ago)
    return AutoScaleState(
        last_split_at_ms=None if last_split is None else NOW - last_split,
        last_merge_at_ms=None if last_merge is None else NOW - last_merge,
        operation_in_flight=draw(st.sampled_from([False] * 19 + [True])),
    )


consumer_counts = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 12), max_size=3)


def expected_split_target(
    layout: SegmentLayout,
    loads: Mapping[int, SegmentLoad],
    consumers: Mapping[str, int],
    policy: AutoScalePolicy,
) -> int | None:
    """PIP-483's choice of segment to split, written out independently of ``decide``.

    Consumer-driven (a STREAM subscription has more consumers than there are active segments):
    the busiest splittable segment by msgRateIn, a segment without a record counting as 0.
    Otherwise the splittable segment with the largest rate/split-threshold ratio among those
    over a threshold. Ties go to the lowest range start.
    """
    active = layout.active_segments
    splittable = [s for s in active if s.hash_range.size >= 2]

    def score(segment_id: int) -> float:
        load = loads.get(segment_id)
        if max(consumers.values(), default=0) > len(active):
            return 0.0 if load is None else load.msg_rate_in
        assert load is not None
        return max(r / t for r, t in zip(load.rates, policy.split_thresholds, strict=True))

    if max(consumers.values(), default=0) <= len(active):
        splittable = [
            s
            for s in splittable
            if (load := loads.get(s.segment_id)) is not None
            and any(r > t for r, t in zip(load.rates, policy.split_thresholds, strict=True))
        ]
    best: int | None = None
    for segment in splittable:  # active segments come sorted by range start
        if best is None or score(segment.segment_id) > score(best):
            best = segment.segment_id
    return best


def assert_safe(
    decision: Decision,
    layout: SegmentLayout,
    loads: Mapping[int, SegmentLoad],
    consumers: Mapping[str, int],
    policy: AutoScalePolicy,
    state: AutoScaleState,
) -> None:
    """Whatever ``decide`` returned breaks no cap, cooldown, window, depth or adjacency rule."""
    active = layout.active_segments
    if not isinstance(decision, NoAction):
        assert policy.enabled and not state.operation_in_flight
    if isinstance(decision, Split):
        assert len(active) < policy.max_segments
        segment = layout.segment(decision.segment_id)
        assert segment.is_active and segment.hash_range.size >= 2
        assert state.last_split_at_ms is None or NOW - state.last_split_at_ms >= 60_000
        load = loads.get(decision.segment_id)
        hot = load is not None and any(
            rate > limit for rate, limit in zip(load.rates, policy.split_thresholds, strict=True)
        )
        assert hot or max(consumers.values(), default=0) > len(active)
        assert decision.segment_id == expected_split_target(layout, loads, consumers, policy)
        layout.split_segment(decision.segment_id, NOW)  # the executor accepts it
    elif isinstance(decision, Merge):
        assert len(active) > policy.min_segments
        assert state.last_merge_at_ms is None or NOW - state.last_merge_at_ms >= 300_000
        first, second = layout.segment(decision.segment_id1), layout.segment(decision.segment_id2)
        assert first.is_active and second.is_active
        assert first.hash_range.end + 1 == second.hash_range.start
        for segment in (first, second):
            load = loads[segment.segment_id]
            assert all(
                rate < limit
                for rate, limit in zip(load.rates, policy.merge_thresholds, strict=True)
            )
            assert NOW - load.modified_ms >= policy.merge_window_ms
            assert layout.merge_depth(segment.segment_id) < policy.max_dag_depth
        assert len(active) - 1 >= max(consumers.values(), default=0)
        merged = layout.merge_segments([first.segment_id, second.segment_id], NOW)
        child = merged.active_segments[
            [s.hash_range.start for s in merged.active_segments].index(first.hash_range.start)
        ]
        assert merged.merge_depth(child.segment_id) <= policy.max_dag_depth
    else:
        assert isinstance(decision, NoAction)
        assert decision.detail


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_decide_respects_every_cap_guard_and_adjacency_rule(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    loads = data.draw(loads_for(layout))
    consumers = data.draw(consumer_counts)
    policy = data.draw(policies())
    state = data.draw(states())
    decision = decide(layout, loads, consumers, policy, state, NOW)
    assert_safe(decision, layout, loads, consumers, policy, state)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_decide_is_deterministic_whatever_the_mapping_order(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    loads = data.draw(loads_for(layout))
    consumers = data.draw(consumer_counts)
    policy = data.draw(policies())
    state = data.draw(states())
    first = decide(layout, loads, consumers, policy, state, NOW)
    again = decide(layout, loads, consumers, policy, state, NOW)
    shuffled_loads = dict(reversed(list(loads.items())))
    shuffled_consumers = dict(reversed(list(consumers.items())))
    reordered = decide(layout, shuffled_loads, shuffled_consumers, policy, state, NOW)
    rebuilt = decide(decode_layout(encode_layout(layout)), loads, consumers, policy, state, NOW)
    assert first == again == reordered == rebuilt


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_hot_splittable_segment_below_the_cap_always_splits(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    loads = data.draw(loads_for(layout))
    hot = data.draw(st.sampled_from(layout.active_segments))
    loads[hot.segment_id] = make_load([DEFAULTS.split_msg_rate_in_threshold * 2, 0.0, 0.0, 0.0])
    policy = AutoScalePolicy(max_segments=len(layout.active_segments) + 1)
    decision = decide(layout, loads, {}, policy, AutoScaleState(), NOW)
    assert isinstance(decision, Split)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_load_driven_split_picks_the_most_overloaded_segment(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    # Each metric at a multiple of its split threshold; several segments hot by different
    # factors on different metrics, so "most overloaded" is a real choice.
    factors = st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0, 7.0])
    loads = {}
    for segment in layout.active_segments:
        ratios = data.draw(st.tuples(factors, factors, factors, factors))
        loads[segment.segment_id] = make_load(
            [ratio * limit for ratio, limit in zip(ratios, DEFAULTS.split_thresholds, strict=True)]
        )
    policy = AutoScalePolicy(max_segments=64)
    decision = decide(layout, loads, {}, policy, AutoScaleState(), NOW)
    expected = expected_split_target(layout, loads, {}, policy)
    if expected is None:
        assert not isinstance(decision, Split)
    else:
        assert isinstance(decision, Split)
        assert decision.segment_id == expected


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_at_max_segments_a_wanted_split_reports_max_segments(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    count = len(layout.active_segments)
    loads = {s.segment_id: make_load([5_000.0, 0.0, 0.0, 0.0]) for s in layout.active_segments}
    consumers = {"s": count + data.draw(st.integers(1, 5))}
    decision = decide(
        layout, loads, consumers, AutoScalePolicy(max_segments=count), AutoScaleState(), NOW
    )
    assert isinstance(decision, NoAction)
    assert decision.reason is NoActionReason.MAX_SEGMENTS


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_durably_cold_topic_merges_unless_a_cap_holds(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    old = NOW - DEFAULTS.merge_window_ms
    loads = {
        s.segment_id: SegmentLoad(1.0, 1.0, 1.0, 1.0, modified_ms=old)
        for s in layout.active_segments
    }
    policy = AutoScalePolicy(
        min_segments=data.draw(st.integers(1, 3)), max_dag_depth=data.draw(st.integers(0, 4))
    )
    decision = decide(layout, loads, {}, policy, AutoScaleState(), NOW)
    assert_safe(decision, layout, loads, {}, policy, AutoScaleState())
    active = layout.active_segments
    mergeable = [
        (a.segment_id, b.segment_id)
        for a, b in itertools.pairwise(active)
        if max(layout.merge_depth(a.segment_id), layout.merge_depth(b.segment_id))
        < policy.max_dag_depth
    ]
    if len(active) <= policy.min_segments:
        assert isinstance(decision, NoAction)
        assert decision.reason is NoActionReason.MIN_SEGMENTS
    elif not mergeable:
        assert isinstance(decision, NoAction)
        assert decision.reason is NoActionReason.MAX_DAG_DEPTH
    else:
        assert isinstance(decision, Merge)
        # Equal loads everywhere: the tie goes to the lowest-starting mergeable pair.
        assert (decision.segment_id1, decision.segment_id2) == mergeable[0]


rates = st.tuples(*[st.sampled_from([0.0, 1.0, 74.0, 75.0, 100.0, 125.0, 126.0])] * 4)


@settings(max_examples=200, deadline=None)
@given(old=rates, new=rates)
def test_material_change_matches_the_relative_threshold_rule(
    old: tuple[float, ...], new: tuple[float, ...]
) -> None:
    last, current = make_load(old), make_load(new)
    expected = any(
        (a == 0.0) != (b == 0.0) or (a != 0.0 and abs(b - a) / a > 0.25)
        for a, b in itertools.zip_longest(old, new)
    )
    assert is_material_change(last, current, 0.25) is expected
    assert is_material_change(None, current, 0.25)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
override_docs = st.dictionaries(
    st.sampled_from(["enabled", "maxSegments", "splitCooldownMs", "mergeMsgRateInThreshold", "x"]),
    json_values,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_load_record_decoder_never_crashes(data: bytes) -> None:
    try:
        record = SegmentLoad.decode(data, modified_ms=0)
    except InvalidAutoScalePolicy:
        return
    assert SegmentLoad.decode(record.encode(), modified_ms=0) == record


@settings(max_examples=300, deadline=None)
@given(doc=json_values | override_docs)
def test_override_decoder_never_crashes_and_round_trips(doc: object) -> None:
    try:
        override = AutoScalePolicyOverride.from_json(doc)
    except InvalidAutoScalePolicy:
        return
    assert AutoScalePolicyOverride.from_json(override.to_json()) == override
