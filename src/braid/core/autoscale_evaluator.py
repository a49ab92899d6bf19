"""PIP-483's ``AutoScalePolicyEvaluator``: the pure auto split/merge decision.

The controller leader's auto-scaler (an I/O shell in the scalable layer) gathers a snapshot — the
topic's :class:`~braid.core.layout.SegmentLayout`, the latest
:class:`~braid.core.segment_load.SegmentLoad` of each active segment, the consumer count of each
STREAM/CHECKPOINT subscription, the resolved :class:`~braid.core.autoscale_policy.AutoScalePolicy`
and the topic's :class:`AutoScaleState` — and calls :func:`decide`, which returns at most one
action: :class:`Split`, :class:`Merge` or :class:`NoAction` naming the guard that held. Nothing
here reads a clock or does I/O; ``now_ms`` is passed in.

Braid adds one guard the PIP does not spell out, to keep the anti-flip-flop promise: a merge is not
proposed when it would leave fewer active segments than the largest STREAM subscription has
consumers, because the consumer-driven split rule would immediately undo it
(:attr:`NoActionReason.CONSUMER_DEMAND`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_info import SegmentInfo
from braid.core.segment_load import SegmentLoad


@dataclass(frozen=True)
class AutoScaleState:
    """Per-topic auto-scale memory kept by the controller leader (in memory).

    The I/O shell sets ``last_split_at_ms`` / ``last_merge_at_ms`` after it *executes* a split or
    merge — automatic or manual (PIP-483: a manual split starts the split cooldown, a manual merge
    the merge cooldown) — and ``operation_in_flight`` while one is running.
    """

    last_split_at_ms: int | None = None
    last_merge_at_ms: int | None = None
    operation_in_flight: bool = False

    def after_split(self, now_ms: int) -> AutoScaleState:
        """The state once a split (auto or manual) has completed at ``now_ms``."""
        return replace(self, last_split_at_ms=now_ms, operation_in_flight=False)

    def after_merge(self, now_ms: int) -> AutoScaleState:
        """The state once a merge (auto or manual) has completed at ``now_ms``."""
        return replace(self, last_merge_at_ms=now_ms, operation_in_flight=False)


class NoActionReason(Enum):
    """Why :func:`decide` proposed nothing: the guard that held (feeds stats and metrics).

    ``MAX_SEGMENTS`` is reported only when a split was warranted (PIP-483's
    ``split_suppressed_max_segments`` metric) and ``MAX_DAG_DEPTH`` only when a pair was cold for
    the whole window but its lineage is at the cap (``merge_suppressed_max_depth``).
    """

    DISABLED = "disabled"  # the resolved policy has enabled=False
    OPERATION_IN_FLIGHT = "operation_in_flight"  # a split or merge is still running
    MAX_SEGMENTS = "max_segments"  # a split is warranted; the topic is at maxSegments
    SPLIT_COOLDOWN = "split_cooldown"  # a split is warranted; last split within splitCooldown
    UNSPLITTABLE = "unsplittable"  # only one-hash-wide segments are over a split threshold
    MERGE_COOLDOWN = "merge_cooldown"  # a merge is warranted; last merge within mergeCooldown
    MIN_SEGMENTS = "min_segments"  # the topic is at or below minSegments
    CONSUMER_DEMAND = "consumer_demand"  # a merge would leave fewer segments than consumers
    MAX_DAG_DEPTH = "max_dag_depth"  # every durably cold pair's lineage is at maxDagDepth
    MERGE_WINDOW = "merge_window"  # a pair is cold, but not yet for mergeWindow
    NO_LOAD_RECORD = "no_load_record"  # a segment has no SegmentLoadStats record yet
    DEAD_BAND = "dead_band"  # load sits between the merge and split thresholds
    #: Braid (PIP-486): more consumers than segments, but they share segments by entry bucket
    #: and no segment's load warrants a split.
    BUCKET_SHARING = "bucket_sharing"


@dataclass(frozen=True)
class Split:
    """Split the active segment ``segment_id`` at its midpoint."""

    segment_id: int
    reason: str


@dataclass(frozen=True)
class Merge:
    """Merge two hash-adjacent active segments; ``segment_id1`` has the lower range start."""

    segment_id1: int
    segment_id2: int
    reason: str


@dataclass(frozen=True)
class NoAction:
    """Nothing to do this time; ``reason`` names the guard that held, ``detail`` explains it."""

    reason: NoActionReason
    detail: str


Decision = Split | Merge | NoAction

# Merge-pair evaluation stages, in the order a pair passes them; a pair that fails later got
# "closer" to merging, so its failure is the most informative reason to report.
_STAGE_NO_LOAD, _STAGE_NOT_COLD, _STAGE_WINDOW, _STAGE_DEPTH, _STAGE_ELIGIBLE = range(5)
_STAGE_REASON = {
    _STAGE_NO_LOAD: NoActionReason.NO_LOAD_RECORD,
    _STAGE_NOT_COLD: NoActionReason.DEAD_BAND,
    _STAGE_WINDOW: NoActionReason.MERGE_WINDOW,
    _STAGE_DEPTH: NoActionReason.MAX_DAG_DEPTH,
}


def decide(
    layout: SegmentLayout,
    load_by_segment: Mapping[int, SegmentLoad],
    stream_consumers_by_subscription: Mapping[str, int],
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
) -> Decision:
    """PIP-483's ``AutoScalePolicyEvaluator.decide``: at most one split or merge, or why not.

    Args:
        layout: the topic's current layout.
        load_by_segment: the latest load record per segment id; records of segments that are not
            active are ignored; an active segment without one counts as idle for splits and can
            never be merged.
        stream_consumers_by_subscription: consumer count of each STREAM/CHECKPOINT subscription
            (QUEUE subscriptions must not be passed: more segments add no parallelism for them).
        policy: the resolved policy.
        state: cooldown and in-flight memory. This function does not change it: the caller sets
            ``last_split_at_ms`` / ``last_merge_at_ms`` after executing the action (and after
            manual splits and merges too), see :class:`AutoScaleState`.
        now_ms: the current wall-clock time in ms (same clock as the store's modified times).

    Returns:
        Split pass first: if any STREAM subscription has more consumers than there are active
        segments (the per-subscription maximum, not the sum) - and than their entry buckets can
        serve by sharing (``layout.entry_buckets``, PIP-486) - split the busiest segment by
        msgRateIn; otherwise split the most overloaded segment (largest rate/threshold over the
        four metrics) among those with any rate above its split threshold. A wanted split is
        held back by ``maxSegments`` and ``splitCooldown``. Only if no split fires, the merge
        pass: among hash-adjacent active pairs where both segments have a load record with all
        four rates below the merge thresholds, unchanged for at least ``mergeWindow``
        (``now_ms - modified_ms``) and a merge depth below ``maxDagDepth``, merge the coldest
        pair (smallest sum of rate/merge-threshold over both segments), held back by
        ``mergeCooldown``, ``minSegments`` and consumer demand. Ties go to the lowest range start.
        The depth rule "neither segment is at maxDagDepth merges" (``merge_depth < maxDagDepth``
        for both) is the same as "the merged child's depth ``max(d1, d2) + 1`` stays
        ``<= maxDagDepth``". When a wanted split was held back and no merge fires, the split's
        guard is reported.

    Raises:
        InvalidInputError: a consumer count is negative or not an integer, ``now_ms`` is not an
            integer, or a load entry is not a :class:`SegmentLoad`.
    """
    if isinstance(now_ms, bool) or not isinstance(now_ms, int):
        raise InvalidInputError(f"now_ms must be integer milliseconds, got {now_ms!r}")
    required, busiest_subscription = _required_consumers(stream_consumers_by_subscription)
    if not policy.enabled:
        return NoAction(NoActionReason.DISABLED, "auto split/merge is disabled for this topic")
    if state.operation_in_flight:
        return NoAction(NoActionReason.OPERATION_IN_FLIGHT, "a split or merge is still in progress")
    active = list(layout.active_segments)
    loads = {seg.segment_id: _load_of(load_by_segment, seg.segment_id) for seg in active}

    held_split = _split_pass(
        active, loads, required, busiest_subscription, policy, state, now_ms, layout.entry_buckets
    )
    if isinstance(held_split, Split):
        return held_split
    merge = _merge_pass(layout, active, loads, required, policy, state, now_ms)
    if isinstance(merge, Merge) or held_split is None:
        return merge
    return held_split


def _required_consumers(counts: Mapping[str, int]) -> tuple[int, str | None]:
    """The largest per-subscription consumer count and the subscription that has it."""
    required, which = 0, None
    for name in sorted(counts):
        count = counts[name]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidInputError(
                f"consumer count of subscription {name!r} must be a non-negative integer, "
                f"got {count!r}"
            )
        if count > required:
            required, which = count, name
    return required, which


def _load_of(load_by_segment: Mapping[int, SegmentLoad], segment_id: int) -> SegmentLoad | None:
    load = load_by_segment.get(segment_id)
    if load is not None and not isinstance(load, SegmentLoad):
        raise InvalidInputError(
            f"load of segment {segment_id} must be a SegmentLoad, got {type(load).__name__}"
        )
    return load


def _split_pass(
    active: Sequence[SegmentInfo],
    loads: Mapping[int, SegmentLoad | None],
    required: int,
    busiest_subscription: str | None,
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
    entry_buckets: int = 1,
) -> Split | NoAction | None:
    """The split that is warranted (or the guard holding it back), or None if none is.

    With several entry buckets per segment (PIP-486) extra consumers share segments by bucket, so
    consumers outnumbering segments warrant a split only beyond what the buckets can serve; up
    to that, only a segment's load does (reported as ``BUCKET_SHARING`` when nothing is hot).
    """
    count = len(active)
    target: SegmentInfo | None
    shared = count < required <= count * entry_buckets
    if required > count and not shared:
        # Consumer-driven: give the extra consumer the busiest segment's half. Segments with no
        # record count as rate 0; ties go to the lowest range start (active is sorted by it).
        splittable = [seg for seg in active if seg.hash_range.size >= 2]
        target = max(splittable, key=lambda seg: _msg_rate_in(loads, seg), default=None)
        why = (
            f"consumer-driven: subscription {busiest_subscription!r} has {required} consumers "
            f"for {count} active segments"
        )
    else:
        # "Over" compares rates to thresholds directly (a ratio can round to exactly 1.0).
        hot = [
            (seg, _overload(load, policy))
            for seg in active
            if (load := loads[seg.segment_id]) is not None
            and any(r > t for r, t in zip(load.rates, policy.split_thresholds, strict=True))
        ]
        if not hot:
            if shared:
                return NoAction(
                    NoActionReason.BUCKET_SHARING,
                    f"subscription {busiest_subscription!r} has {required} consumers for {count} "
                    f"active segments; they share segments by entry bucket ({entry_buckets} per "
                    "segment) and no segment's load warrants a split",
                )
            return None
        # A segment covering one hash position cannot split; the next most overloaded can.
        candidates = [(seg, score) for seg, score in hot if seg.hash_range.size >= 2]
        target, score = max(candidates, key=lambda pair: pair[1], default=(None, 0.0))
        why = f"load-driven: a rate is at {score:.2f}x its split threshold"
    if count >= policy.max_segments:
        return NoAction(
            NoActionReason.MAX_SEGMENTS,
            f"a split is warranted but the topic has {count} active segments "
            f"(maxSegments={policy.max_segments})",
        )
    if _in_cooldown(state.last_split_at_ms, policy.split_cooldown_ms, now_ms):
        return NoAction(
            NoActionReason.SPLIT_COOLDOWN,
            f"a split is warranted but the last split was at {state.last_split_at_ms} "
            f"(splitCooldown={policy.split_cooldown_ms} ms)",
        )
    if target is None:
        return NoAction(
            NoActionReason.UNSPLITTABLE,
            "every segment over a split threshold covers a single hash position",
        )
    return Split(target.segment_id, f"{why}; splitting segment {target.segment_id}")


def _merge_pass(
    layout: SegmentLayout,
    active: Sequence[SegmentInfo],
    loads: Mapping[int, SegmentLoad | None],
    required: int,
    policy: AutoScalePolicy,
    state: AutoScaleState,
    now_ms: int,
) -> Merge | NoAction:
    """The coldest mergeable adjacent pair, or the guard that held."""
    count = len(active)
    # A tiling layout has no gaps, so consecutive active segments are adjacent; check anyway,
    # since mergeSegments only accepts hash-adjacent pairs.
    pairs = [
        (first, second)
        for first, second in itertools.pairwise(active)
        if first.hash_range.is_adjacent_to(second.hash_range)
    ]
    if not pairs:
        return NoAction(
            NoActionReason.MIN_SEGMENTS,
            f"no two adjacent active segments ({count} active, minSegments={policy.min_segments})",
        )
    best_stage, best_detail = -1, ""
    eligible: list[tuple[float, SegmentInfo, SegmentInfo]] = []
    for first, second in pairs:
        stage, detail = _pair_stage(layout, first, second, loads, policy, now_ms)
        if stage == _STAGE_ELIGIBLE:
            first_load, second_load = loads[first.segment_id], loads[second.segment_id]
            assert first_load is not None and second_load is not None  # eligible implies loads
            heat = _coldness(first_load, policy) + _coldness(second_load, policy)
            eligible.append((heat, first, second))
        if stage > best_stage:
            best_stage, best_detail = stage, detail
    if best_stage < _STAGE_DEPTH:
        return NoAction(_STAGE_REASON[best_stage], best_detail)
    # Some pair has been cold for the whole window: the topic-level guards now decide.
    if _in_cooldown(state.last_merge_at_ms, policy.merge_cooldown_ms, now_ms):
        return NoAction(
            NoActionReason.MERGE_COOLDOWN,
            f"a merge is warranted but the last merge was at {state.last_merge_at_ms} "
            f"(mergeCooldown={policy.merge_cooldown_ms} ms)",
        )
    if count <= policy.min_segments:
        return NoAction(
            NoActionReason.MIN_SEGMENTS,
            f"a merge is warranted but the topic has {count} active segments "
            f"(minSegments={policy.min_segments})",
        )
    if count - 1 < required:
        return NoAction(
            NoActionReason.CONSUMER_DEMAND,
            f"a merge would leave {count - 1} segments for a subscription with {required} "
            "consumers",
        )
    if not eligible:
        return NoAction(NoActionReason.MAX_DAG_DEPTH, best_detail)
    _, first, second = min(eligible, key=lambda item: item[0])
    return Merge(
        first.segment_id,
        second.segment_id,
        f"cold for at least {policy.merge_window_ms} ms: merging adjacent segments "
        f"{first.segment_id} and {second.segment_id}",
    )


def _pair_stage(
    layout: SegmentLayout,
    first: SegmentInfo,
    second: SegmentInfo,
    loads: Mapping[int, SegmentLoad | None],
    policy: AutoScalePolicy,
    now_ms: int,
) -> tuple[int, str]:
    """How far an adjacent pair gets towards merging, with a sentence saying where it stopped."""
    pair = (first, second)
    for seg in pair:
        if loads[seg.segment_id] is None:
            return _STAGE_NO_LOAD, f"segment {seg.segment_id} has no load record yet"
    for seg in pair:
        load = loads[seg.segment_id]
        assert load is not None
        if not all(
            rate < limit for rate, limit in zip(load.rates, policy.merge_thresholds, strict=True)
        ):
            return _STAGE_NOT_COLD, (
                f"segment {seg.segment_id} is between its merge and split thresholds"
            )
    for seg in pair:
        load = loads[seg.segment_id]
        assert load is not None
        cold_for = now_ms - load.modified_ms
        if cold_for < policy.merge_window_ms:
            return _STAGE_WINDOW, (
                f"segment {seg.segment_id} has been cold for {cold_for} ms "
                f"(mergeWindow={policy.merge_window_ms} ms)"
            )
    for seg in pair:
        depth = layout.merge_depth(seg.segment_id)
        if depth >= policy.max_dag_depth:
            return _STAGE_DEPTH, (
                f"a merge is warranted but segment {seg.segment_id}'s lineage already has "
                f"{depth} merges (maxDagDepth={policy.max_dag_depth})"
            )
    return _STAGE_ELIGIBLE, ""


def _in_cooldown(last_at_ms: int | None, cooldown_ms: int, now_ms: int) -> bool:
    return last_at_ms is not None and now_ms - last_at_ms < cooldown_ms


def _msg_rate_in(loads: Mapping[int, SegmentLoad | None], seg: SegmentInfo) -> float:
    load = loads[seg.segment_id]
    return 0.0 if load is None else load.msg_rate_in


def _overload(load: SegmentLoad, policy: AutoScalePolicy) -> float:
    """Largest rate/split-threshold ratio: how overloaded a hot segment is, for ranking."""
    # Split thresholds are > merge thresholds >= 0, so never zero.
    return max(
        rate / limit for rate, limit in zip(load.rates, policy.split_thresholds, strict=True)
    )


def _coldness(load: SegmentLoad, policy: AutoScalePolicy) -> float:
    """Sum of rate/merge-threshold ratios: unit-free, so bytes do not swamp message counts."""
    # Only called for cold segments, whose rates are strictly below positive merge thresholds.
    return sum(
        rate / limit for rate, limit in zip(load.rates, policy.merge_thresholds, strict=True)
    )


__all__ = [
    "AutoScaleState",
    "Decision",
    "Merge",
    "NoAction",
    "NoActionReason",
    "Split",
    "decide",
]
