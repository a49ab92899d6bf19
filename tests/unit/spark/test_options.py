"""Option validation: every mistake fails fast and names the option."""

from __future__ import annotations

import pytest

from braid.core.checkpoint import Checkpoint, SegmentCursor, checkpoint_of
from braid.spark.options import (
    BraidSparkOptionError,
    StartKind,
    sink_options,
    source_options,
)

BASE = {"service.url": "pulsar://127.0.0.1:6650", "topic": "topic://public/default/t"}


def test_defaults_for_stream_and_batch() -> None:
    stream = source_options(BASE, streaming=True)
    assert stream.starting.kind is StartKind.LATEST and stream.fail_on_data_loss
    assert stream.admin_url == "http://127.0.0.1:8080"
    assert source_options(BASE, streaming=False).starting.kind is StartKind.EARLIEST


def test_keys_are_case_insensitive_and_topics_canonical() -> None:
    opts = source_options(
        {"SERVICE.URL": BASE["service.url"], "Topic": "orders, topic://public/default/x"},
        streaming=True,
    )
    assert opts.topics == ("persistent://public/default/orders", "topic://public/default/x")


@pytest.mark.parametrize(
    ("options", "streaming", "names"),
    [
        ({"topic": "t"}, True, "service.url"),
        ({"service.url": "http://x:1", "topic": "t"}, True, "service.url"),
        ({**BASE, "topic": ""}, True, "topic"),
        ({**BASE, "topic": "segment://public/default/t/0000-ffff-0"}, True, "topic"),
        ({**BASE, "topic": "a,a"}, True, "topic"),
        ({**BASE, "startingOffsets": "earliest"}, True, "startingOffsets"),
        ({**BASE, "startingPosition": "soon"}, True, "startingPosition"),
        ({**BASE, "endingPosition": "latest"}, True, "endingPosition"),
        ({**BASE, "endingPosition": "earliest"}, False, "endingPosition"),
        ({**BASE, "maxRecordsPerTrigger": "0"}, True, "maxRecordsPerTrigger"),
        ({**BASE, "maxRecordsPerTrigger": "10"}, False, "maxRecordsPerTrigger"),
        ({**BASE, "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**BASE, "receiverQueueSize": "0"}, True, "receiverQueueSize"),
        ({**BASE, "receiverQueueSize": "ten"}, False, "receiverQueueSize"),
        ({**BASE, "receiverQueueSize": "1000001"}, True, "receiverQueueSize"),
        ({**BASE, "receiverQueueBytes": "0"}, True, "receiverQueueBytes"),
        ({**BASE, "receiverQueueBytes": "16M"}, False, "receiverQueueBytes"),
        ({**BASE, "receiverQueueBytes": str(2**31 + 1)}, True, "receiverQueueBytes"),
        ({**BASE, "admin.url": "ftp://x"}, True, "admin.url"),
        ({**BASE, "startingPosition": '{"version": 9, "topics": {}}'}, True, "startingPosition"),
    ],
)
def test_bad_options_fail_naming_the_option(
    options: dict[str, str], streaming: bool, names: str
) -> None:
    with pytest.raises(BraidSparkOptionError, match=names):
        source_options(options, streaming=streaming)


def test_receiver_queue_size_and_bytes_default_and_parse() -> None:
    default = source_options(BASE, streaming=True)
    assert default.receiver_queue_size == 50_000
    assert default.receiver_queue_bytes == 16 * 1024 * 1024
    chosen = source_options(
        {**BASE, "receiverqueuesize": " 500 ", "receiverQueueBytes": "1048576"}, streaming=False
    )
    assert chosen.receiver_queue_size == 500
    assert chosen.receiver_queue_bytes == 1024 * 1024


def test_positions_parse_timestamps_checkpoints_and_offsets() -> None:
    ts = source_options({**BASE, "startingPosition": "1700000000000"}, streaming=True)
    assert ts.min_publish_time_ms == 1700000000000
    cp = checkpoint_of(4, {1: SegmentCursor.after(1, 2, 3)})
    for text in (cp.to_bytes().hex(), __import__("base64").b64encode(cp.to_bytes()).decode()):
        opts = source_options({**BASE, "startingPosition": text}, streaming=True)
        assert opts.starting.kind is StartKind.CHECKPOINT and opts.starting.checkpoint == cp
    earliest = Checkpoint.earliest().to_bytes().hex()
    assert source_options({**BASE, "startingPosition": earliest}, streaming=True).starting.kind is (
        StartKind.EARLIEST
    )
    doc = '{"version": 1, "topics": {"topic://public/default/t": {"epoch": 0, "segments": {}}}}'
    assert source_options({**BASE, "startingPosition": doc}, streaming=True).starting.offset
    with pytest.raises(BraidSparkOptionError, match="several"):
        source_options(
            {**BASE, "topic": "a,b", "startingPosition": cp.to_bytes().hex()}, streaming=True
        )


def test_sink_options() -> None:
    opts = sink_options({**BASE, "producerName": "etl"})
    assert opts.exactly_once and opts.producer_name == "etl"
    with pytest.raises(BraidSparkOptionError, match="one topic"):
        sink_options({**BASE, "topic": "a,b"})
    with pytest.raises(BraidSparkOptionError, match="maxRecordsPerTrigger"):
        sink_options({**BASE, "maxRecordsPerTrigger": "5"})
    with pytest.raises(BraidSparkOptionError, match="exactlyOnce"):
        sink_options({**BASE, "exactlyOnce": "1"})
    assert sink_options({**BASE, "checkpointLocation": "/tmp/x"}).topic == BASE["topic"]
