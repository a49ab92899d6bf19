"""The load manager's pure decisions: ThresholdShedder, least-loaded placement, bundle splits,
report updates, bundle splitting of the hash range, and the ``loadBalancer*`` keys."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.bundles import FULL_UPPER_BOUND, InvalidBundles, NamespaceBundle, NamespaceBundles
from braid.broker.config import InvalidConfig, load_config, read_config_file
from braid.broker.load_config import LOAD_BALANCER_KEYS, LoadBalancerSettings
from braid.broker.load_data import BundleStats, LocalBrokerData, ResourceUsage, ResourceWeights
from braid.broker.load_placement import BundleSplitDecider, least_loaded
from braid.broker.load_report import TopicSample, bundle_stats, needs_update
from braid.broker.load_shedding import ThresholdShedder
from braid.broker.ownership import rendezvous_score
from braid.core.names import TopicName

MB = 1024 * 1024
NS = "public/default"


def broker(bandwidth_pct: float, bundles: dict[str, float]) -> LocalBrokerData:
    """A report whose bandwidth-in usage is ``bandwidth_pct`` and whose bundles carry the given
    throughput (bytes/s in)."""
    return LocalBrokerData(
        bandwidth_in=ResourceUsage(bandwidth_pct, 100.0),
        bundle_stats={name: BundleStats(msg_throughput_in=tp) for name, tp in bundles.items()},
    )


SETTINGS = LoadBalancerSettings(bundle_unload_min_throughput_threshold=0.0)


def test_threshold_shedder_unloads_the_busiest_bundles_of_the_broker_above_average() -> None:
    shedder = ThresholdShedder(SETTINGS)
    reports = {
        "a": broker(90, {f"{NS}/b1": 30 * MB, f"{NS}/b2": 10 * MB, f"{NS}/b3": 1 * MB}),
        "b": broker(10, {f"{NS}/b4": 1 * MB}),
        "c": broker(20, {f"{NS}/b5": 1 * MB}),
    }
    decisions = shedder.find_bundles_for_unloading(reports, {}, now=0.0)
    # average 40 %, threshold 10: a is 40 points over; it moves (0.9-0.4-0.1+0.05)=45 % of
    # its 41 MB/s = 18.45 MB/s: the 30 MB/s bundle alone covers it.
    assert [(d.broker, d.bundle) for d in decisions] == [("a", f"{NS}/b1")]


def test_threshold_shedder_keeps_marking_bundles_until_the_excess_is_covered() -> None:
    shedder = ThresholdShedder(SETTINGS)
    reports = {
        "a": broker(100, {f"{NS}/b{i}": 5 * MB for i in range(8)}),
        "b": broker(0, {}),
    }
    decisions = shedder.find_bundles_for_unloading(reports, {}, now=0.0)
    # average 50 %: a moves (1-0.5-0.1+0.05) = 45 % of 40 MB/s = 18 MB/s -> 4 bundles of 5.
    assert len(decisions) == 4
    assert {d.broker for d in decisions} == {"a"}


def test_threshold_shedder_spares_a_broker_within_the_threshold_and_recent_unloads() -> None:
    shedder = ThresholdShedder(SETTINGS)
    reports = {"a": broker(55, {f"{NS}/x": MB, f"{NS}/y": MB}), "b": broker(45, {})}
    assert shedder.find_bundles_for_unloading(reports, {}, now=0.0) == []
    shedder = ThresholdShedder(SETTINGS)
    hot = {"a": broker(100, {f"{NS}/x": 5 * MB, f"{NS}/y": MB}), "b": broker(0, {})}
    recent = {f"{NS}/x": 0.0}
    decisions = shedder.find_bundles_for_unloading(hot, recent, now=10.0)  # grace 30 min
    assert [d.bundle for d in decisions] == [f"{NS}/y"]
    later = ThresholdShedder(SETTINGS).find_bundles_for_unloading(hot, recent, now=1801.0)
    assert [d.bundle for d in later] == [f"{NS}/x"]


def test_threshold_shedder_needs_two_bundles_and_enough_throughput() -> None:
    lone = {"a": broker(100, {f"{NS}/x": 50 * MB}), "b": broker(0, {})}
    assert ThresholdShedder(SETTINGS).find_bundles_for_unloading(lone, {}, 0.0) == []
    strict = LoadBalancerSettings()  # 10 MB/s minimum
    small = {"a": broker(100, {f"{NS}/x": MB, f"{NS}/y": MB}), "b": broker(0, {})}
    assert ThresholdShedder(strict).find_bundles_for_unloading(small, {}, 0.0) == []


def test_threshold_shedder_smooths_usage_with_the_history_percentage() -> None:
    shedder = ThresholdShedder(LoadBalancerSettings(history_resource_percentage=0.9))
    shedder.update_usage({"a": broker(100, {})})
    assert shedder.avg_usage["a"] == pytest.approx(1.0)
    shedder.update_usage({"a": broker(0, {})})
    assert shedder.avg_usage["a"] == pytest.approx(0.9)
    shedder.update_usage({"b": broker(0, {})})
    assert set(shedder.avg_usage) == {"b"}  # a left the cluster


@given(
    usages=st.lists(st.floats(0, 100), min_size=2, max_size=6),
    throughput=st.lists(st.integers(0, 100), min_size=1, max_size=10),
)
def test_shedding_only_ever_moves_bundles_of_brokers_above_average_plus_threshold(
    usages: list[float], throughput: list[int]
) -> None:
    reports = {
        f"b{i}": broker(u, {f"{NS}/r{i}-{j}": tp * MB for j, tp in enumerate(throughput)})
        for i, u in enumerate(usages)
    }
    decisions = ThresholdShedder(SETTINGS).find_bundles_for_unloading(reports, {}, 0.0)
    average = sum(usages) / len(usages) / 100
    for d in decisions:
        assert usages[int(d.broker[1:])] / 100 >= average + 0.1 - 1e-9
        assert d.bundle in reports[d.broker].bundle_stats
    assert len({d.bundle for d in decisions}) == len(decisions)


def test_least_loaded_prefers_the_lowest_message_rate_among_brokers_not_overloaded() -> None:
    weights = ResourceWeights()

    def rated(usage: float, rates: list[float]) -> LocalBrokerData:
        return LocalBrokerData(
            cpu=ResourceUsage(usage, 100),
            bundle_stats={f"{NS}/{i}": BundleStats(msg_rate_in=r) for i, r in enumerate(rates)},
        )

    reports = {"a": rated(50, [100, 100]), "b": rated(5, [300]), "c": rated(90, [0])}
    pick = least_loaded(reports, reports, weights, overloaded_threshold_percentage=85)
    assert pick == "a"  # c is idle but overloaded; a's 200 msg/s < b's 300
    assert least_loaded("bc", reports, weights, overloaded_threshold_percentage=85) == "b"
    assert least_loaded("c", reports, weights, overloaded_threshold_percentage=85) == "c"
    idle = {"a": rated(1, [0, 0]), "b": rated(60, [0]), "c": rated(2, [0])}
    assert least_loaded(idle, idle, weights, overloaded_threshold_percentage=85) == "b"
    pending = {"b": 2}
    pick = least_loaded(idle, idle, weights, overloaded_threshold_percentage=85, pending=pending)
    assert pick == "c"
    assert least_loaded(["x", "y"], {}, weights, overloaded_threshold_percentage=85) == "x"
    assert least_loaded([], reports, weights, overloaded_threshold_percentage=85) is None


@given(st.lists(st.integers(0, 20), min_size=1, max_size=8))
def test_assigning_bundles_one_by_one_to_idle_brokers_spreads_them_evenly(
    counts: list[int],
) -> None:
    brokers = [f"b{i}" for i in range(len(counts))]
    pending: dict[str, int] = {}
    for _ in range(3 * len(brokers)):
        chosen = least_loaded(
            brokers, {}, ResourceWeights(), overloaded_threshold_percentage=85, pending=pending
        )
        assert chosen is not None
        pending[chosen] = pending.get(chosen, 0) + 1
    assert set(pending.values()) == {3}


def test_split_decider_splits_a_hot_bundle_after_the_hit_count_and_under_the_maximum() -> None:
    settings = LoadBalancerSettings(
        namespace_bundle_max_msg_rate=100,
        namespace_bundle_split_condition_hit_count_threshold=2,
        namespace_maximum_bundles=5,
    )
    decider = BundleSplitDecider(settings)
    hot = BundleStats(msg_rate_in=150, topics=3)
    reports = {"a": LocalBrokerData(bundle_stats={f"{NS}/hot": hot, f"{NS}/cold": BundleStats()})}
    assert decider.find_bundles_to_split(reports, {NS: 4}) == []  # first hit
    chosen = decider.find_bundles_to_split(reports, {NS: 4})
    assert [name for name, _ in chosen] == [f"{NS}/hot"]
    assert "msg/s" in chosen[0][1]
    decider.find_bundles_to_split(reports, {NS: 5})
    assert decider.find_bundles_to_split(reports, {NS: 5}) == []  # at the maximum
    one_topic = {"a": LocalBrokerData(bundle_stats={f"{NS}/x": BundleStats(1e9, topics=1)})}
    assert BundleSplitDecider(settings).over_limit(one_topic["a"].bundle_stats[f"{NS}/x"]) is None


def test_split_decider_forgets_a_bundle_that_cooled_down() -> None:
    settings = LoadBalancerSettings(
        namespace_bundle_max_topics=2, namespace_bundle_split_condition_hit_count_threshold=2
    )
    decider = BundleSplitDecider(settings)
    hot = {"a": LocalBrokerData(bundle_stats={f"{NS}/x": BundleStats(topics=3)})}
    cold = {"a": LocalBrokerData(bundle_stats={f"{NS}/x": BundleStats(topics=2)})}
    decider.find_bundles_to_split(hot, {})
    decider.find_bundles_to_split(cold, {})
    assert decider.find_bundles_to_split(hot, {}) == []


def test_a_split_cuts_the_bundle_at_the_middle_of_its_range() -> None:
    bundles = NamespaceBundles.of(NS, 4)
    second = bundles.bundles[1]
    after = bundles.split(second)
    assert [b.range_name for b in after.bundles] == [
        "0x00000000_0x40000000",
        "0x40000000_0x60000000",
        "0x60000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]
    assert after.bundle("0x40000000_0x60000000") in after.bundles
    with pytest.raises(InvalidBundles):
        after.split(second)  # no longer one of the namespace's bundles
    with pytest.raises(InvalidBundles):
        after.bundle("0x40000000_0x80000000")
    tiny = NamespaceBundles(NS, (0, 1, FULL_UPPER_BOUND))
    with pytest.raises(InvalidBundles):
        tiny.split(tiny.bundles[0])


@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.text(min_size=1, max_size=20))
def test_every_topic_stays_in_the_half_of_its_old_bundle_after_splits(
    picks: list[int], local: str
) -> None:
    bundles = NamespaceBundles.of(NS, 4)
    topic = TopicName.parse(f"persistent://{NS}/t-{local.encode().hex()}")
    for pick in picks:
        before = bundles.find(topic)
        target = bundles.bundles[pick % len(bundles.bundles)]
        if target.upper - target.lower < 2:
            continue
        bundles = bundles.split(target)
        now = bundles.find(topic)
        assert before.lower <= now.lower and now.upper <= before.upper
    ranges = bundles.bundles
    assert ranges[0].lower == 0 and ranges[-1].upper == FULL_UPPER_BOUND
    assert all(a.upper == b.lower for a, b in itertools.pairwise(ranges))


def test_a_report_round_trips_through_pulsars_json_keys() -> None:
    report = LocalBrokerData(
        cpu=ResourceUsage(50, 200),
        bandwidth_out=ResourceUsage(10, 1000),
        bundle_stats={f"{NS}/0x00000000_0xffffffff": BundleStats(1, 2, 3, 4, 5, 6, 7)},
        last_update_ms=42,
    )
    doc = report.to_json()
    assert doc["numBundles"] == 1 and doc["numTopics"] == 7 and doc["msgThroughputOut"] == 4
    assert doc["bundles"] == [f"{NS}/0x00000000_0xffffffff"]
    assert LocalBrokerData.from_json(doc) == report
    assert LocalBrokerData.decode(b"not json") == LocalBrokerData()
    weights = ResourceWeights(cpu=0.5)
    assert report.max_resource_usage_with_weight(weights) == pytest.approx(0.125)


def test_reports_are_written_when_something_moved_or_the_max_interval_passed() -> None:
    settings = LoadBalancerSettings(report_update_threshold_percentage=10)
    last = LocalBrokerData(cpu=ResourceUsage(50, 100))
    assert needs_update(None, last, 0.0, settings)
    assert not needs_update(last, LocalBrokerData(cpu=ResourceUsage(52, 100)), 1.0, settings)
    assert needs_update(last, LocalBrokerData(cpu=ResourceUsage(60, 100)), 1.0, settings)
    assert needs_update(last, last, settings.report_max_interval_s, settings)
    with_bundle = LocalBrokerData(cpu=ResourceUsage(50, 100), bundle_stats={"x": BundleStats()})
    assert needs_update(last, with_bundle, 1.0, settings)


def test_bundle_stats_are_rates_of_the_topics_in_each_owned_bundle() -> None:
    whole = NamespaceBundle(NS, 0, FULL_UPPER_BOUND)
    name = f"persistent://{NS}/t"
    before = {name: TopicSample(name, 100, 1000, 50, 500, 1, 2)}
    now = {name: TopicSample(name, 300, 3000, 150, 1500, 1, 2)}
    stats = bundle_stats([whole], before, now, 2.0)[str(whole)]
    assert (stats.msg_rate_in, stats.msg_rate_out) == (100, 50)
    assert (stats.msg_throughput_in, stats.msg_throughput_out) == (1000, 500)
    assert (stats.topics, stats.producer_count, stats.consumer_count) == (1, 1, 2)


def test_load_balancer_keys_parse_with_pulsars_names_and_refuse_bad_values() -> None:
    config = load_config(
        None,
        {
            "loadBalancerSheddingIntervalMinutes": "0.5",
            "loadBalancerBrokerThresholdShedderPercentage": "5",
            "loadBalancerNamespaceMaximumBundles": "64",
            "loadBalancerAutoBundleSplitEnabled": "false",
            "loadBalancerCPUResourceWeight": "0.5",
            "brokerShutdownTimeoutMs": "5000",
        },
        {},
    )
    lb = config.load_balancer
    assert lb.shedding_interval_s == 30.0
    assert lb.broker_threshold_shedder_percentage == 5.0
    assert lb.namespace_maximum_bundles == 64
    assert lb.auto_bundle_split_enabled is False
    assert lb.cpu_resource_weight == 0.5
    assert lb.broker_shutdown_timeout_ms == 5000
    with pytest.raises(InvalidConfig) as bad:
        load_config(None, {"loadBalancerBrokerThresholdShedderPercentage": "150"}, {})
    assert bad.value.key == "loadBalancerBrokerThresholdShedderPercentage"


def test_the_shipped_broker_conf_lists_every_load_balancer_key_with_its_default() -> None:
    conf = Path(__file__).resolve().parents[3] / "conf" / "broker.conf"
    written = read_config_file(conf)
    assert set(LOAD_BALANCER_KEYS) <= set(written)
    assert LoadBalancerSettings.from_raw(written) == LoadBalancerSettings()


@pytest.mark.parametrize("raw", [True, 7, {"a": 1}, ["0x0", None], ["zz"], "0x00000000"])
def test_unreadable_bundle_boundaries_in_policies_are_a_clear_error(raw: object) -> None:
    with pytest.raises(InvalidBundles):
        NamespaceBundles.from_policies(NS, {"bundles": {"boundaries": raw}}, 4)


def test_equally_loaded_brokers_are_told_apart_by_each_bundles_rendezvous_score() -> None:
    """Idle brokers with no bundle tie on everything: the load manager breaks the tie by the
    bundle's rendezvous score, so bundles placed before any report changes spread (the lowest id
    would take them all)."""
    weights = ResourceWeights()
    idle = {name: LocalBrokerData() for name in ("a", "b", "c")}
    bundles = [NamespaceBundle.parse(NS, f"0x{i:08x}_0x{i + 1:08x}") for i in range(24)]
    picks = {
        bundle: least_loaded(
            idle,
            idle,
            weights,
            overloaded_threshold_percentage=85,
            tie_break=lambda broker, bundle=bundle: -rendezvous_score(bundle, broker),
        )
        for bundle in bundles
    }
    assert set(picks.values()) == {"a", "b", "c"}
    for bundle, pick in picks.items():  # the highest score wins, the same on every broker
        assert pick == max(idle, key=lambda broker: rendezvous_score(bundle, broker))
    assert {least_loaded(idle, idle, weights, overloaded_threshold_percentage=85)} == {"a"}
