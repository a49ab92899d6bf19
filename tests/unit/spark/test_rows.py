"""Column chunks become Arrow record batches with exactly the row values of the message path.

Entries are decoded twice - by the client's ``decode_entry`` (``Message`` objects) and by its
packed columnar decoder (the compiled one, and the pure-Python one) - and every Arrow row is
compared with the ``Message`` attributes, converted the way Spark sees them (timestamps in
microseconds UTC, ``message_id`` = ``MessageId.to_bytes()``).
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("pyarrow", reason="the spark extra (make test installs it)")
pytest.importorskip("pyspark", reason="the spark extra (make test installs it)")

from braid.client import packed_columns
from braid.client.columns import EntryColumnDecoder
from braid.client.message import Message, decode_entry
from braid.client.packed_columns import PackedColumns, decode_packed
from braid.protocol import batch, pb
from braid.spark.rows import ARROW_SCHEMA, to_record_batch

TOPIC = "topic://public/default/rows"
SEGMENT = 3


def entries() -> list[tuple[int, int, bytes]]:
    outer = pb.MessageMetadata(producer_name="p", sequence_id=10, publish_time=1_700_000_000_000)
    late = pb.MessageMetadata(producer_name="q", sequence_id=20, publish_time=1_700_000_005_000)
    plain = pb.MessageMetadata()
    plain.CopyFrom(late)
    plain.partition_key = "solo"
    plain.event_time = 1_600_000_000_001
    plain.properties.add(key="x", value="y")
    return [
        (
            5,
            0,
            batch.build_entry(
                outer,
                [
                    (pb.SingleMessageMetadata(partition_key=f"k{i % 3}"), b"v%d" % i)
                    for i in range(6)
                ],
            ),
        ),
        (
            5,
            1,
            batch.build_entry(
                late,
                [
                    (
                        pb.SingleMessageMetadata(
                            event_time=1_650_000_000_000 + i,
                            properties=[pb.KeyValue(key="n", value=str(i))],
                        ),
                        b"w%d" % i,
                    )
                    for i in range(4)
                ],
                compression=pb.ZSTD,
            ),
        ),
        (6, 0, batch.build_single_entry(plain, b"single")),
    ]


def micros(ms: int | None) -> datetime.datetime | None:
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def expected_row(m: Message) -> dict[str, Any]:
    return {
        "key": m.key,
        "value": m.value,
        "topic": TOPIC,
        "message_id": m.message_id.to_bytes(),
        "publish_time": micros(m.publish_time),
        "event_time": micros(m.event_time),
        "properties": sorted(m.properties.items()),
        "producer_name": m.producer_name,
        "sequence_id": m.sequence_id,
    }


@pytest.fixture(autouse=True, params=["compiled", "python"])
def packer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the compiled packer (when built) and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(packed_columns, "_native_pack", None)
    elif packed_columns._native_pack is None:
        pytest.skip("the compiled _entry_columns module is not built")
    return str(request.param)


def decoded() -> tuple[PackedColumns, list[Message]]:
    decoder = EntryColumnDecoder(TOPIC, SEGMENT)
    cols = PackedColumns(TOPIC, SEGMENT)
    messages: list[Message] = []
    for ledger, entry, body in entries():
        part, _ = decode_packed(decoder, body, ledger, entry)
        cols.extend(part)
        got, _ = decode_entry(
            body,
            topic=TOPIC,
            segment_id=SEGMENT,
            ledger_id=ledger,
            entry_id=entry,
            redelivery=0,
            owner=None,
        )
        messages += got
    return cols, messages


def arrow_rows(record_batch: Any) -> list[dict[str, Any]]:
    rows = record_batch.to_pylist()
    for row in rows:
        row["properties"] = sorted(row["properties"])
    return rows


def test_every_arrow_row_equals_the_message_attributes() -> None:
    cols, messages = decoded()
    record_batch = to_record_batch(cols)
    assert record_batch.schema == ARROW_SCHEMA
    assert arrow_rows(record_batch) == [expected_row(m) for m in messages]


def test_rows_without_properties_take_the_empty_map_path() -> None:
    cols, messages = decoded()
    first = cols.slice(0, 6)  # the first entry: no properties anywhere
    assert arrow_rows(to_record_batch(first)) == [expected_row(m) for m in messages[:6]]


def test_rows_published_before_the_start_time_are_skipped() -> None:
    cols, messages = decoded()
    record_batch = to_record_batch(cols, min_publish_time_ms=1_700_000_001_000)
    assert arrow_rows(record_batch) == [expected_row(m) for m in messages[6:]]
    assert to_record_batch(cols.slice(0, 0)).num_rows == 0


@pytest.mark.parametrize("start", [0, 1, 5, 7])
@pytest.mark.parametrize("stop", [7, 9, 11])
def test_any_slice_across_entries_gives_the_message_rows(start: int, stop: int) -> None:
    # Runs that start or end inside an entry, and one-row runs.
    cols, messages = decoded()
    assert arrow_rows(to_record_batch(cols.slice(start, stop))) == [
        expected_row(m) for m in messages[start:stop]
    ]


def test_rows_with_gaps_in_their_batch_indexes_get_their_own_message_ids() -> None:
    # Compacted-out messages (or a start filter) leave gaps inside an entry's batch indexes.
    cols, messages = decoded()
    keep = [0, 2, 3, 5, 6, 8, 10]
    gappy = PackedColumns(TOPIC, SEGMENT, [w for i in keep for w in cols.slice(i, i + 1).windows])
    assert arrow_rows(to_record_batch(gappy)) == [expected_row(messages[i]) for i in keep]


def test_a_batch_taken_in_pieces_gives_the_rows_of_the_whole() -> None:
    cols, messages = decoded()
    pieces = [cols.take_front(n) for n in (4, 3, 100)]
    assert len(cols) == 0
    got = [row for piece in pieces for row in arrow_rows(to_record_batch(piece))]
    assert got == [expected_row(m) for m in messages]


def test_building_batches_does_not_import_pandas() -> None:
    """``pa.array``/``pa.scalar`` on Python objects import pandas - 0.2 CPU s in each of Spark's
    Python workers on its first batch; every path but properties (plain rows, event times, a
    start time) uses neither. A fresh interpreter, as a Spark worker is."""
    script = """
import sys
from braid.client.columns import EntryColumnDecoder
from braid.client.packed_columns import PackedColumns, decode_packed
from braid.protocol import batch, pb
from braid.spark.rows import to_record_batch
meta = pb.MessageMetadata(producer_name="pr\\u00f6ducer", sequence_id=1, publish_time=17 * 10**11)
body = batch.build_entry(meta, [(pb.SingleMessageMetadata(partition_key="k"), b"v")] * 3)
timed = batch.build_entry(meta, [(pb.SingleMessageMetadata(event_time=5), b"w")] * 2)
cols = PackedColumns("topic://t/n/x", 0)
for entry_id, entry in enumerate([body, timed]):
    cols.extend(decode_packed(EntryColumnDecoder("topic://t/n/x", 0), entry, 1, entry_id)[0])
to_record_batch(cols.slice(3, 5))  # event times
to_record_batch(cols, min_publish_time_ms=17 * 10**11)  # startingTime
record_batch = to_record_batch(cols.slice(0, 3))
assert "pandas" not in sys.modules, "pandas was imported"
rows = record_batch.to_pydict()  # (this imports it: timestamps with a time zone)
assert rows["producer_name"] == ["pr\\u00f6ducer"] * 3, rows
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
