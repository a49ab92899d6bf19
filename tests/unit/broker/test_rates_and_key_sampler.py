"""Topic traffic counters, rolling rates and the key-hash sampler of segment topics."""

from __future__ import annotations

import math
import struct

import pytest

from braid.broker.key_sampler import MAX_BATCH_KEYS, KeyHashSampler
from braid.broker.rates import RollingRates
from braid.core.hashing import hash16
from braid.core.ranges import HashRange
from braid.core.split_point import bucket_index
from braid.protocol.batch import build_entry, build_single_entry
from braid.protocol.generated import PulsarApi_pb2 as pb


def test_rates_are_the_counter_delta_over_the_time_observed() -> None:
    rates = RollingRates(60.0)
    assert rates.rates() == (0.0, 0.0, 0.0, 0.0)
    rates.sample(0.0, (0, 0, 0, 0))
    assert rates.rates() == (0.0, 0.0, 0.0, 0.0)  # one sample: no interval yet
    rates.sample(10.0, (1_000, 50_000, 3_000, 150_000))
    assert rates.rates() == (100.0, 5_000.0, 300.0, 15_000.0)


def test_the_window_slides_so_a_stopped_topic_decays_to_zero_within_it() -> None:
    rates = RollingRates(60.0)
    total = 0
    for t in range(0, 130, 10):
        if t <= 60:
            total = 100 * t  # 100 msg/s for the first minute, then nothing
        rates.sample(float(t), (total, 0, 0, 0))
    assert rates.observed_s == 60.0
    assert rates.rates()[0] == 0.0
    seen = RollingRates(60.0)
    for t in range(0, 100, 10):
        seen.sample(float(t), (100 * min(t, 60), 0, 0, 0))
    assert seen.rates()[0] == pytest.approx(100 * 30 / 60)  # half of the last minute was busy


def test_counters_going_backwards_start_the_window_over() -> None:
    rates = RollingRates(60.0)
    rates.sample(0.0, (500, 0, 0, 0))
    rates.sample(10.0, (1_000, 0, 0, 0))
    rates.sample(20.0, (10, 0, 0, 0))  # the topic was reloaded with fresh counters
    assert rates.rates() == (0.0, 0.0, 0.0, 0.0)
    rates.sample(30.0, (110, 0, 0, 0))
    assert rates.rates()[0] == 10.0


def entry(key: str | None, *, sequence_id: int = 0) -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1)
    if key is not None:
        meta.partition_key = key
    return build_single_entry(meta, b"payload")


def batch(keys: list[str | None], compression: int = pb.NONE) -> bytes:
    singles = []
    for key in keys:
        single = pb.SingleMessageMetadata()
        if key is not None:
            single.partition_key = key
        singles.append((single, b"x" * 10))
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    return build_entry(meta, singles, compression=compression)


def expected(hash_range: HashRange, weighted: dict[str, float]) -> list[float]:
    weights = [0.0] * 64
    for key, weight in weighted.items():
        h = hash16(key)
        if hash_range.contains(h):
            weights[bucket_index(hash_range, 64, h)] += weight
    return weights


def test_one_entry_in_every_few_is_sampled_on_the_send_path() -> None:
    sampler = KeyHashSampler(HashRange.full(), every=4)
    keys = [f"k{i}" for i in range(40)]
    for key in keys:  # PersistentTopic.publish offers every entry
        sampler.offer(entry(key))
    assert sampler.weights == expected(HashRange.full(), {k: 1.0 for k in keys[3::4]})


@pytest.mark.parametrize("compression", [pb.NONE, pb.LZ4, pb.ZSTD, pb.ZLIB])
def test_a_batch_counts_as_all_its_messages_from_the_keys_read(compression: int) -> None:
    sampler = KeyHashSampler(HashRange.full())
    sampler.sample(batch(["a", "b", None, "a"], compression))
    assert sampler.weights == expected(HashRange.full(), {"a": 2.0, "b": 1.0})
    big = KeyHashSampler(HashRange.full())
    big.sample(batch([f"key-{i}" for i in range(4 * MAX_BATCH_KEYS)], compression))
    assert math.isclose(sum(big.weights), 4.0 * MAX_BATCH_KEYS)  # 64 read, each weighs 4


def test_keys_outside_the_segment_and_keyless_or_broken_entries_add_nothing() -> None:
    upper = HashRange(0x8000, 0xFFFF)
    sampler = KeyHashSampler(upper)
    low = next(k for k in (f"x{i}" for i in range(1000)) if hash16(k) < 0x8000)
    high = next(k for k in (f"x{i}" for i in range(1000)) if hash16(k) >= 0x8000)
    for data in (entry(low), entry(None), b"\x00\x00", b"\x00\x00\x00\x09garbage!!", entry(high)):
        sampler.sample(data)
    assert sampler.weights == expected(upper, {high: 1.0})
    assert sampler.snapshot()[bucket_index(upper, 64, hash16(high))] == 1.0


def test_decay_and_snapshot() -> None:
    sampler = KeyHashSampler(HashRange.full())
    assert sampler.snapshot() == ()
    sampler.sample(entry("k"))
    sampler.decay(0.5)
    assert sum(sampler.snapshot()) == 0.5
    assert KeyHashSampler.for_segment("segment://public/default/t/0000-7fff-1") is not None
    sampler_of_segment = KeyHashSampler.for_segment("segment://public/default/t/8000-ffff-2")
    assert sampler_of_segment is not None and sampler_of_segment.hash_range == upper_half()
    assert KeyHashSampler.for_segment("segment://public/default/t/bogus") is None


def upper_half() -> HashRange:
    return HashRange(0x8000, 0xFFFF)


def parsed_metadata(data: bytes) -> pb.MessageMetadata:
    (size,) = struct.unpack_from(">I", data, 0)
    return pb.MessageMetadata.FromString(data[4 : 4 + size])


@pytest.mark.parametrize("compression", [pb.NONE, pb.LZ4])
def test_the_metadata_the_send_validation_parsed_is_used_as_it_is(compression: int) -> None:
    # PersistentTopic.publish hands the sampler the metadata SendValidator parsed: the same
    # histogram as parsing the entry again, single or batched...
    for data in (entry("solo"), batch(["a", "b", None, "a"], compression)):
        reparsed, reused = KeyHashSampler(HashRange.full()), KeyHashSampler(HashRange.full())
        reparsed.sample(data)
        reused.sample(data, parsed_metadata(data))
        assert reused.weights == reparsed.weights and sum(reused.weights) > 0
    # ...and it is what is read (the entry is not parsed a second time).
    sampler = KeyHashSampler(HashRange.full())
    other = parsed_metadata(entry("from-the-validation"))
    sampler.sample(entry("in-the-bytes"), other)
    assert sampler.weights == expected(HashRange.full(), {"from-the-validation": 1.0})
