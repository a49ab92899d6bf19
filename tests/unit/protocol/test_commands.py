"""Command builders and the wrap table: every builder sets the type that matches its payload."""

from __future__ import annotations

import pytest

from braid.protocol import FrameDecoder, InvalidCommand, commands, encode_command, pb


def _round_trip(cmd: pb.BaseCommand) -> pb.BaseCommand:
    [frame] = FrameDecoder().feed(encode_command(cmd))
    return frame.command


def _dag() -> pb.ScalableTopicDAG:
    dag = pb.ScalableTopicDAG(epoch=3, controller_broker_url="pulsar://c:6650")
    dag.segments.add(
        segment_id=0,
        hash_start=0,
        hash_end=0xFFFF,
        state=pb.ACTIVE,
        created_at_epoch=0,
        created_at_ms=1,
        entry_bucket_splits=[0x8000],
    )
    dag.segment_brokers.add(segment_id=0, broker_url="pulsar://b:6650")
    return dag


def _assignment() -> pb.ScalableConsumerAssignment:
    a = pb.ScalableConsumerAssignment(layout_epoch=3)
    seg = a.segments.add(segment_id=0, hash_start=0, hash_end=0xFFFF, segment_topic="segment://t")
    seg.bucket_ranges.add(start=0, end=0x7FFF)
    return a


def _sample_commands() -> list[tuple[str, pb.BaseCommand]]:
    ff = pb.FeatureFlags(supports_scalable_topics=True)
    last = commands.message_id(5, 9)
    tc = pb.TcAssignmentsSnapshot(parallelism=2)
    tc.assignments.add(tc_id=0, broker_service_url="pulsar://b0:6650")
    return [
        ("connect", commands.connect("braid-test", 21, feature_flags=ff)),
        ("connected", commands.connected("braid 0.1", 20, 5 * 1024 * 1024, ff)),
        ("ping", commands.ping()),
        ("pong", commands.pong()),
        ("success", commands.success(1)),
        ("error", commands.error(2, pb.ServiceNotReady, "later")),
        ("partitioned ok", commands.partitioned_metadata_response(3, 0)),
        ("partitioned failed", commands.partitioned_metadata_response(3, error=pb.TopicNotFound)),
        ("lookup connect", commands.lookup_response(4, broker_service_url="pulsar://h:6650")),
        ("lookup redirect", commands.lookup_response(4, broker_service_url="x", redirect=True)),
        ("lookup failed", commands.lookup_response(4, error=pb.TooManyRequests, message="m")),
        ("topics", commands.topics_of_namespace_response(5, ["persistent://a/b/c"])),
        ("producer success", commands.producer_success(6, "p-1", -1, b"v1", 3, False)),
        ("send receipt", commands.send_receipt(7, 8, 9, 10, highest_sequence_id=12)),
        ("send error", commands.send_error(7, 8, pb.ChecksumError, "bad crc")),
        ("close producer", commands.close_producer(7, 11)),
        ("message", commands.message(1, 2, 3, 4, [1, -1])),
        ("close consumer", commands.close_consumer(1, 12)),
        ("active change", commands.active_consumer_change(1, True)),
        ("end of topic", commands.reached_end_of_topic(1)),
        ("last id", commands.get_last_message_id_response(13, last, commands.message_id(5, 1))),
        ("ack response", commands.ack_response(1, 14)),
        ("ack response err", commands.ack_response(1, 14, error=pb.UnknownError, message="e")),
        ("stats", commands.consumer_stats_response(15, msg_backlog=3, consumer_name="c")),
        ("send", commands.send(1, 2, num_messages=10)),
        ("flow", commands.flow(1, 1000)),
        ("producer", commands.producer("persistent://t/n/x", 1, 16)),
        (
            "subscribe",
            commands.subscribe("persistent://t/n/x", "s", pb.CommandSubscribe.Shared, 1, 17),
        ),
        ("lookup", commands.lookup("persistent://t/n/x", 18)),
        ("partitioned", commands.partitioned_metadata("persistent://t/n/x", 19)),
        ("dag lookup", commands.scalable_topic_lookup(1, "topic://t/n/x")),
        ("dag update", commands.scalable_topic_update(1, _dag(), resolved_topic_name="topic://a")),
        ("dag error", commands.scalable_topic_update(1, error=pb.TopicNotFound, message="no")),
        ("dag close", commands.scalable_topic_close(1)),
        ("scalable sub", commands.scalable_topic_subscribe(2, "topic://t/n/x", "s", "c", 3)),
        ("scalable sub resp", commands.scalable_topic_subscribe_response(2, _assignment())),
        ("assignment", commands.scalable_topic_assignment_update(3, _assignment())),
        ("scalable unsub", commands.scalable_topic_unsubscribe(4, 3)),
        ("ns snapshot", commands.watch_scalable_topics_update(5, snapshot=["topic://a/b/c"])),
        ("ns diff", commands.watch_scalable_topics_update(5, added=["x"], removed=["y"])),
        ("tc", commands.watch_tc_assignments_update(6, tc)),
        ("tc error", commands.watch_tc_assignments_update(6, error=pb.NotAllowedError)),
    ]


@pytest.mark.parametrize(
    ("name", "cmd"), _sample_commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_builder_round_trips_with_a_matching_type(name: str, cmd: pb.BaseCommand) -> None:
    inner = commands.inner(cmd)
    assert inner is not None, f"{name}: type {cmd.type} does not match the field that is set"
    # Exactly one payload field is set: the one for the type.
    set_fields = [f.name for f, _ in cmd.ListFields() if f.name != "type"]
    assert set_fields == [commands.field_name(cmd.type)]
    assert _round_trip(cmd) == cmd


def test_every_command_type_has_a_field_with_the_same_number() -> None:
    type_enum = pb.BaseCommand.DESCRIPTOR.enum_types_by_name["Type"]
    fields = {f.number: f for f in pb.BaseCommand.DESCRIPTOR.fields if f.name != "type"}
    assert {v.number for v in type_enum.values} == set(fields)
    for value in type_enum.values:
        assert commands.field_name(value.number) == fields[value.number].name


def test_scalable_topic_commands_occupy_70_to_82() -> None:
    names = dict(pb.BaseCommand.Type.items())
    assert names["SCALABLE_TOPIC_LOOKUP"] == 70
    assert names["WATCH_TC_ASSIGNMENTS_CLOSE"] == 81
    assert names["SCALABLE_TOPIC_UNSUBSCRIBE"] == 82
    assert pb.FeatureFlags.DESCRIPTOR.fields_by_name["supports_scalable_topics"].number == 8


def test_wrap_puts_a_scalable_update_in_the_right_field() -> None:
    dag = pb.ScalableTopicDAG(epoch=3)
    dag.segments.add(
        segment_id=0,
        hash_start=0,
        hash_end=0xFFFF,
        state=pb.ACTIVE,
        created_at_epoch=0,
        created_at_ms=1,
    )
    cmd = commands.wrap(pb.CommandScalableTopicUpdate(session_id=9, dag=dag))
    assert cmd.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE
    assert _round_trip(cmd).scalableTopicUpdate.dag.segments[0].hash_end == 0xFFFF


def test_wrap_refuses_a_message_that_is_not_a_command() -> None:
    with pytest.raises(InvalidCommand, match="not a BaseCommand payload"):
        commands.wrap(pb.KeyValue(key="k", value="v"))


def test_inner_is_none_when_the_type_does_not_match_the_set_field() -> None:
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND, ping=pb.CommandPing())
    assert commands.inner(cmd) is None


def test_type_name_covers_unknown_numbers() -> None:
    assert commands.type_name(pb.BaseCommand.SEND) == "SEND"
    assert commands.type_name(99) == "UNKNOWN(99)"


def test_message_ids_store_minus_one_as_unsigned() -> None:
    earliest = commands.message_id(-1, -1)
    assert earliest.ledgerId == (1 << 64) - 1
    assert earliest.entryId == (1 << 64) - 1


def test_connected_advertises_max_message_size_and_version() -> None:
    cmd = _round_trip(commands.connected("braid", 19, 1234))
    assert cmd.connected.server_version == "braid"
    assert cmd.connected.protocol_version == 19
    assert cmd.connected.max_message_size == 1234


def test_producer_success_defaults_match_pulsar() -> None:
    cmd = _round_trip(commands.producer_success(1, "gen-1", -1))
    assert cmd.producer_success.last_sequence_id == -1
    assert cmd.producer_success.producer_ready is True
    assert not cmd.producer_success.HasField("schema_version")


def test_server_error_codes_match_the_pulsar_numbers() -> None:
    expected = {
        "UnknownError": 0,
        "ServiceNotReady": 6,
        "ChecksumError": 9,
        "TopicNotFound": 11,
        "TopicTerminatedError": 15,
        "ProducerBusy": 16,
        "ProducerFenced": 25,
    }
    assert {n: pb.ServerError.Value(n) for n in expected} == expected
