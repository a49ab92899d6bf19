"""The auto-scaling part of ``braid demo``: a scalable topic's layout evolving on synthetic load.

It drives the real pure core - :class:`~braid.core.layout.SegmentLayout` and
:func:`~braid.core.autoscale_evaluator.decide` - through a scripted day in the life of a topic:
traffic ramps up (load-driven splits), stream consumers join (a consumer-driven split), traffic
fades (lazy merges once segments have stayed cold for the merge window). Time is simulated, so
the whole day runs in well under a second, and every decision - including the ones *not* taken -
is printed with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from braid.core.autoscale_evaluator import AutoScaleState, Merge, NoAction, Split, decide
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.layout import SegmentLayout
from braid.core.segment_load import SegmentLoad

_MINUTE_MS = 60_000


@dataclass(frozen=True)
class _Phase:
    title: str
    minutes: int
    msg_rate_in_total: float  # spread over the hash ring in proportion to each segment's width
    stream_consumers: int


_SCRIPT = (
    _Phase("quiet start: 500 msg/s, one consumer", 3, 500.0, 1),
    _Phase("traffic ramps to 30k msg/s", 6, 30_000.0, 1),
    _Phase("5 stream consumers join subscription 'analytics'", 3, 30_000.0, 5),
    _Phase("night: traffic drops to 200 msg/s, consumers leave", 40, 200.0, 1),
)


def _loads(
    layout: SegmentLayout,
    total_rate: float,
    previous: Mapping[int, SegmentLoad],
    now_ms: int,
    threshold: float,
) -> dict[int, SegmentLoad]:
    """Synthesize each active segment's load; like the real reporter, rewrite a record (and so
    its modified time) only when a rate moved materially since the last write."""
    out: dict[int, SegmentLoad] = {}
    for seg in layout.active_segments:
        share = seg.hash_range.size / 65536
        rate = total_rate * share
        current = SegmentLoad(
            msg_rate_in=rate,
            bytes_rate_in=rate * 1024,
            msg_rate_out=rate,
            bytes_rate_out=rate * 1024,
            modified_ms=now_ms,
        )
        last = previous.get(seg.segment_id)
        if last is not None and abs(last.msg_rate_in - rate) <= threshold * max(
            last.msg_rate_in, 1
        ):
            out[seg.segment_id] = last  # immaterial change: the stored record keeps its old mtime
        else:
            out[seg.segment_id] = current
    return out


def _describe(layout: SegmentLayout) -> str:
    return " ".join(f"{s.segment_id}:{s.hash_range.to_hex()}" for s in layout.active_segments)


def run_autoscale_demo(emit: Callable[[str], None] = print) -> SegmentLayout:
    """Run the scripted scenario, printing through ``emit``; returns the final layout."""
    policy = AutoScalePolicy()
    layout = SegmentLayout.initial(1, now_ms=0)
    state = AutoScaleState(last_split_at_ms=None, last_merge_at_ms=None, operation_in_flight=False)
    loads: dict[int, SegmentLoad] = {}
    now_ms = 0
    last_reason = ""
    emit(
        f"policy: split above {policy.split_msg_rate_in_threshold:.0f} msg/s in, merge below "
        f"{policy.merge_msg_rate_in_threshold:.0f} msg/s once cold for "
        f"{policy.merge_window_ms // _MINUTE_MS} min, at most {policy.max_segments} segments"
    )
    emit(f"t=0m     epoch {layout.epoch}  active [{_describe(layout)}]")
    for phase in _SCRIPT:
        emit(f"--- {phase.title}")
        for _ in range(phase.minutes):
            now_ms += _MINUTE_MS
            loads = _loads(
                layout,
                phase.msg_rate_in_total,
                loads,
                now_ms,
                policy.load_report_rate_change_threshold,
            )
            decision = decide(
                layout, loads, {"analytics": phase.stream_consumers}, policy, state, now_ms
            )
            stamp = f"t={now_ms // _MINUTE_MS}m".ljust(8)
            if isinstance(decision, Split):
                layout = layout.split_segment(decision.segment_id, now_ms)
                state = AutoScaleState(now_ms, state.last_merge_at_ms, False)
                loads.pop(decision.segment_id, None)
                emit(
                    f"{stamp} SPLIT {decision.segment_id} ({decision.reason}) -> epoch "
                    f"{layout.epoch}  active [{_describe(layout)}]"
                )
            elif isinstance(decision, Merge):
                layout = layout.merge_segments([decision.segment_id1, decision.segment_id2], now_ms)
                state = AutoScaleState(state.last_split_at_ms, now_ms, False)
                loads.pop(decision.segment_id1, None)
                loads.pop(decision.segment_id2, None)
                emit(
                    f"{stamp} MERGE {decision.segment_id1}+{decision.segment_id2} "
                    f"({decision.reason}) -> epoch {layout.epoch}  active [{_describe(layout)}]"
                )
            elif isinstance(decision, NoAction) and decision.reason.name != last_reason:
                # Print a guard once when it starts holding, not every minute it keeps holding.
                emit(f"{stamp} no action: {decision.reason.name.lower()} ({decision.detail})")
            last_reason = decision.reason.name if isinstance(decision, NoAction) else ""
    emit(
        f"final: epoch {layout.epoch}, {len(layout.active_segments)} active, "
        f"{len(layout.segments) - len(layout.active_segments)} sealed segments in the DAG"
    )
    return layout
