"""The ``SegmentLoadStats`` record's exact bytes and messages; the reporter's threshold edges."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from braid.core.autoscale_policy import InvalidAutoScalePolicy
from braid.core.segment_load import SegmentLoad, is_material_change


def test_the_stored_record_is_compact_json_in_the_pips_key_order() -> None:
    record = SegmentLoad(12000, 64e6, 48000.5, 0, modified_ms=7)
    assert record.encode() == (
        b'{"msgRateIn":12000.0,"bytesRateIn":64000000.0,"msgRateOut":48000.5,"bytesRateOut":0.0}'
    )
    assert SegmentLoad.decode(record.encode(), modified_ms=7) == record


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: SegmentLoad("fast", 0, 0, 0, modified_ms=0),
            "load msgRateIn must be a number, got 'fast'",
        ),
        (
            lambda: SegmentLoad(0, 0, 0, -1, modified_ms=0),
            "load bytesRateOut must be a finite number >= 0, got -1",
        ),
        (
            lambda: SegmentLoad.from_json([1, 2], modified_ms=0),
            "a SegmentLoadStats record must be a JSON object, got list",
        ),
        (
            lambda: SegmentLoad.from_json({"msgRateIn": 1, "msgRateOut": 1}, modified_ms=0),
            "SegmentLoadStats record lacks bytesRateIn, bytesRateOut",
        ),
        (
            lambda: is_material_change(None, SegmentLoad(0, 0, 0, 0, modified_ms=0), "0.25"),
            "rate change threshold must be a number, got '0.25'",
        ),
        (
            lambda: is_material_change(None, SegmentLoad(0, 0, 0, 0, modified_ms=0), -0.1),
            "rate change threshold must be >= 0, got -0.1",
        ),
    ],
)
def test_bad_load_input_is_refused_word_for_word(build: Callable[[], object], message: str) -> None:
    with pytest.raises(InvalidAutoScalePolicy) as info:
        build()
    assert str(info.value) == message


def test_a_zero_threshold_makes_any_change_material() -> None:
    last = SegmentLoad(100.0, 100.0, 100.0, 100.0, modified_ms=0)
    assert is_material_change(last, SegmentLoad(100.5, 100, 100, 100, modified_ms=1), 0)
    assert not is_material_change(last, SegmentLoad(100, 100, 100, 100, modified_ms=1), 0.0)


def test_the_histogram_is_kept_as_a_tuple_of_floats_and_none_or_empty_as_no_histogram() -> None:
    load = SegmentLoad(1.0, 2.0, 3.0, 4.0, modified_ms=5, key_hash_buckets=[1, 2])  # type: ignore[arg-type]
    assert load.key_hash_buckets == (1.0, 2.0)
    nothings: list[object] = [[], None]
    for nothing in nothings:
        empty = SegmentLoad(1.0, 2.0, 3.0, 4.0, modified_ms=5, key_hash_buckets=nothing)  # type: ignore[arg-type]
        assert empty.key_hash_buckets == ()
        assert "keyHashBuckets" not in empty.to_json()


def test_a_bad_histogram_in_a_load_record_is_named_with_the_field_and_value() -> None:
    with pytest.raises(
        InvalidAutoScalePolicy,
        match=r"^load keyHashBuckets: a key-hash bucket weight must be >= 0, got -1$",
    ):
        SegmentLoad(1.0, 2.0, 3.0, 4.0, modified_ms=5, key_hash_buckets=(3, -1))
    doc = {"msgRateIn": 1, "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}
    with pytest.raises(
        InvalidAutoScalePolicy, match=r"^SegmentLoadStats keyHashBuckets must be a list, got 'x'$"
    ):
        SegmentLoad.from_json({**doc, "keyHashBuckets": "x"}, 0)
