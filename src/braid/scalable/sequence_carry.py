"""Carry deduplication state from sealed parents to their children (PIP-460 "exactly-once
across splits", ADR 0055).

A step of every split and merge, run by the controller after the parents are terminated and
before the layout CAS publishes the children: read each parent's final state through the
Segments seam and hand each child what it inherits
(:meth:`~braid.core.inherited_sequence_ids.InheritedSequenceIds.for_child`). Because no client
can reach a child before the CAS, the child holds its inherited state before its first message;
because the parents are sealed, their state is final. The step is idempotent (the child merges,
maximum per range and name), so a controller that dies after it, or during it, leaves a state the
next leader's roll-forward simply repeats.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from braid.core.inherited_sequence_ids import InheritedSequenceIds
from braid.core.names import TopicName
from braid.core.segment_info import SegmentInfo
from braid.scalable.coordinator import segment_topic_name
from braid.scalable.segments import SegmentAdmin

log = logging.getLogger(__name__)


async def carry_sequence_ids(
    segments: SegmentAdmin,
    topic: TopicName,
    parents: Sequence[SegmentInfo],
    children: Sequence[SegmentInfo],
) -> None:
    """Give every child of a split or merge its parents' deduplication state."""
    states = [
        (parent.hash_range, await segments.sequence_ids(segment_topic_name(topic, parent)))
        for parent in parents
    ]
    if not any(state.own or state.inherited for _, state in states):
        return
    for child in children:
        inherited = InheritedSequenceIds.for_child(child.hash_range, states)
        if inherited:
            await segments.inherit_sequence_ids(segment_topic_name(topic, child), inherited)
            log.debug(
                "%s: segment %d inherits sequence ids over %d range(s)",
                topic,
                child.segment_id,
                len(inherited.floors),
            )


__all__ = ["carry_sequence_ids"]
