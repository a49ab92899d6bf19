"""The one ``ScalableTopicDAG`` codec (:mod:`braid.protocol.dag`): round trips over random DAGs,
golden bytes built independently of it, and the broken DAGs it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.layout import SegmentLayout
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout, SegmentInfo
from braid.protocol.dag import DagSegment, ScalableTopicDag, SegmentBroker
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.unit.core.test_assignment_properties import layouts

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
_SPLITS = st.lists(st.integers(1, 0xFFFF), unique=True, max_size=6).map(lambda s: tuple(sorted(s)))


@st.composite
def dags(draw: st.DrawFn) -> ScalableTopicDag:
    """A valid DAG: a random layout, random wire extras, segments and brokers in any order."""
    layout = draw(layouts())
    ids = sorted(layout.segments)
    segments = [
        DagSegment(info, draw(st.none() | _TEXT), draw(_SPLITS))
        for info in layout.segments.values()
    ]
    served = draw(st.lists(st.sampled_from(ids), unique=True))
    brokers = [SegmentBroker(sid, draw(_TEXT), draw(st.none() | _TEXT)) for sid in served]
    return ScalableTopicDag(
        epoch=layout.epoch,
        segments=tuple(draw(st.permutations(segments))),
        segment_brokers=tuple(draw(st.permutations(brokers))),
        controller_broker_url=draw(st.none() | _TEXT),
        controller_broker_url_tls=draw(st.none() | _TEXT),
    )


@settings(max_examples=300, deadline=None)
@given(dag=dags())
def test_a_dag_survives_encoding_to_bytes_and_back(dag: ScalableTopicDag) -> None:
    wire = dag.to_proto().SerializeToString()
    back = ScalableTopicDag.from_proto(pb.ScalableTopicDAG.FromString(wire))
    assert back == dag
    assert back.layout.segments == dag.layout.segments and back.epoch == dag.epoch
    assert back.to_proto().SerializeToString() == wire  # one canonical encoding


@settings(max_examples=100, deadline=None)
@given(dag=dags())
def test_segments_and_brokers_are_kept_in_segment_id_order(dag: ScalableTopicDag) -> None:
    ids = [s.info.segment_id for s in dag.segments]
    assert ids == sorted(ids) == sorted(dag.layout.segments)
    served = [b.segment_id for b in dag.segment_brokers]
    assert served == sorted(served)
    assert dag.layout.next_segment_id == ids[-1] + 1


def _split_dag() -> ScalableTopicDag:
    layout = SegmentLayout.initial(1, now_ms=10).split_segment(0, now_ms=20)
    return ScalableTopicDag(
        epoch=1,
        segments=(
            DagSegment(layout.segments[0]),
            DagSegment(layout.segments[1], entry_bucket_splits=(0x4000, 0x8000, 0xC000)),
            DagSegment(layout.segments[2]),
        ),
        segment_brokers=(
            SegmentBroker(1, "pulsar://b1:6650", "pulsar+ssl://b1:6651"),
            SegmentBroker(2, "pulsar://b2:6650"),
        ),
        controller_broker_url="pulsar://ctl:6650",
        controller_broker_url_tls="pulsar+ssl://ctl:6651",
    )


def _split_dag_built_field_by_field() -> pb.ScalableTopicDAG:
    """The DAG of :func:`_split_dag`, set field by field on the generated class."""
    dag = pb.ScalableTopicDAG()
    dag.epoch = 1
    parent = dag.segments.add()
    parent.segment_id = 0
    parent.hash_start = 0x0000
    parent.hash_end = 0xFFFF
    parent.state = pb.SEALED
    parent.child_ids.append(1)
    parent.child_ids.append(2)
    parent.created_at_epoch = 0
    parent.sealed_at_epoch = 1
    parent.created_at_ms = 10
    parent.sealed_at_ms = 20
    for sid, start, end in ((1, 0x0000, 0x7FFF), (2, 0x8000, 0xFFFF)):
        child = dag.segments.add()
        child.segment_id = sid
        child.hash_start = start
        child.hash_end = end
        child.state = pb.ACTIVE
        child.parent_ids.append(0)
        child.created_at_epoch = 1
        child.created_at_ms = 20
        if sid == 1:
            child.entry_bucket_splits.append(0x4000)
            child.entry_bucket_splits.append(0x8000)
            child.entry_bucket_splits.append(0xC000)
    first = dag.segment_brokers.add()
    first.segment_id = 1
    first.broker_url = "pulsar://b1:6650"
    first.broker_url_tls = "pulsar+ssl://b1:6651"
    second = dag.segment_brokers.add()
    second.segment_id = 2
    second.broker_url = "pulsar://b2:6650"
    dag.controller_broker_url = "pulsar://ctl:6650"
    dag.controller_broker_url_tls = "pulsar+ssl://ctl:6651"
    return dag


def test_a_split_dag_encodes_to_the_bytes_of_the_message_built_field_by_field() -> None:
    golden = _split_dag_built_field_by_field().SerializeToString()
    assert _split_dag().to_proto().SerializeToString() == golden
    assert ScalableTopicDag.from_proto(pb.ScalableTopicDAG.FromString(golden)) == _split_dag()


# One active segment over the whole ring with bucket splits [0x8000], its broker and the
# controller, written out byte by byte (proto2: set required fields are sent even when 0, and a
# repeated uint32 is not packed).
_ONE_SEGMENT_GOLDEN = bytes.fromhex(
    "0800"  # epoch = 0
    "1212"  # segments, 18 bytes:
    "0800"
    "1000"
    "18ffff03"
    "2000"  #   segment_id 0, hash 0..0xffff, ACTIVE
    "3800"
    "4800"  #   created_at_epoch 0, created_at_ms 0
    "60808002"  #   entry_bucket_splits 0x8000
    "1a13"
    "0800"
    "120f"
    + b"pulsar://b:6650".hex()  # segment_brokers: segment 0
    + "220f"
    + b"pulsar://c:6650".hex()  # controller_broker_url
)


def test_one_segment_with_bucket_splits_matches_the_bytes_written_by_hand() -> None:
    dag = ScalableTopicDag.of_layout(
        SegmentLayout.initial(1),
        segment_brokers={0: "pulsar://b:6650"},
        controller_broker_url="pulsar://c:6650",
        entry_bucket_splits={0: [0x8000]},
    )
    assert dag.to_proto().SerializeToString() == _ONE_SEGMENT_GOLDEN
    back = ScalableTopicDag.from_proto(pb.ScalableTopicDAG.FromString(_ONE_SEGMENT_GOLDEN))
    assert back == dag and back.segments[0].entry_bucket_splits == (0x8000,)


def test_empty_strings_on_the_wire_read_as_absent() -> None:
    wire = _split_dag_built_field_by_field()
    wire.controller_broker_url = ""
    wire.controller_broker_url_tls = ""
    wire.segments[1].legacy_topic_name = ""
    wire.segment_brokers[0].broker_url_tls = ""
    wire.segment_brokers[1].broker_url = ""
    dag = ScalableTopicDag.from_proto(wire)
    assert dag.controller_broker_url is None and dag.controller_broker_url_tls is None
    assert dag.segments[1].legacy_topic_name is None
    assert dag.segment_brokers == (SegmentBroker(1, "pulsar://b1:6650"),)


def test_a_seal_time_sent_for_an_active_segment_is_ignored() -> None:
    wire = _split_dag_built_field_by_field()
    wire.segments[1].sealed_at_epoch = 1
    wire.segments[1].sealed_at_ms = 99
    assert ScalableTopicDag.from_proto(wire) == _split_dag()


def _refused(wire: pb.ScalableTopicDAG, match: str) -> None:
    with pytest.raises(CorruptLayout, match=match):
        ScalableTopicDag.from_proto(wire)


def test_a_segment_listed_twice_is_refused() -> None:
    wire = _split_dag_built_field_by_field()
    wire.segments.add().CopyFrom(wire.segments[2])
    _refused(wire, "segment 2 is listed twice")


def test_a_broker_entry_for_an_unknown_or_already_served_segment_is_refused() -> None:
    wire = _split_dag_built_field_by_field()
    wire.segment_brokers.add(segment_id=7, broker_url="pulsar://b7:6650")
    _refused(wire, "unknown segment 7")
    wire = _split_dag_built_field_by_field()
    wire.segment_brokers.add(segment_id=2, broker_url="pulsar://other:6650")
    _refused(wire, "segment 2 has two broker entries")


@pytest.mark.parametrize("splits", [[0x8000, 0x4000], [0x4000, 0x4000], [0], [0x10000]], ids=str)
def test_bucket_splits_that_do_not_ascend_within_the_ring_are_refused(splits: list[int]) -> None:
    wire = _split_dag_built_field_by_field()
    del wire.segments[1].entry_bucket_splits[:]
    wire.segments[1].entry_bucket_splits.extend(splits)
    _refused(wire, "entry_bucket_splits must ascend strictly")


def test_a_hash_off_the_ring_or_a_gap_in_the_ring_is_refused() -> None:
    wire = _split_dag_built_field_by_field()
    wire.segments[2].hash_end = 0x10000
    _refused(wire, "DAG of epoch 1 is invalid")
    wire = _split_dag_built_field_by_field()
    wire.segments[2].hash_start = 0x8001
    _refused(wire, "no active segment covers 0x8000")


def test_constructing_a_dag_checks_what_decoding_checks() -> None:
    info = SegmentInfo.active(0, HashRange.full(), 0)
    with pytest.raises(CorruptLayout, match="broker_url"):
        SegmentBroker(0, "")
    with pytest.raises(CorruptLayout, match="legacy_topic_name"):
        DagSegment(info, legacy_topic_name="")
    with pytest.raises(CorruptLayout, match="unknown segment 1"):
        ScalableTopicDag(0, (DagSegment(info),), (SegmentBroker(1, "pulsar://b:6650"),))
    with pytest.raises(CorruptLayout, match="unknown segments"):
        ScalableTopicDag.of_layout(SegmentLayout.initial(1), legacy_topic_names={3: "x"})
