"""The three levels of a topic's policies (topic over namespace over broker), as a pure function:
each setting taken from the first level that sets it, the caps checked, and the retention turned
into the managed ledger's seconds and bytes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.applied_policies import (
    namespace_limit,
    resolve,
    with_namespace_limit,
)
from braid.broker.config import BrokerConfig
from braid.broker.resources import InvalidPolicies, NamespacePolicies, RetentionPolicies
from braid.ledger.api import ManagedLedgerConfig

BROKER = dataclasses.replace(
    BrokerConfig(),
    broker_deduplication_enabled=False,
    max_producers_per_topic=7,
    max_consumers_per_topic=0,
    max_consumers_per_subscription=3,
)
_caps = st.one_of(st.none(), st.integers(min_value=0, max_value=1000))


@given(topic=_caps, namespace=_caps)
def test_a_cap_comes_from_the_first_level_that_sets_it(
    topic: int | None, namespace: int | None
) -> None:
    own = {} if topic is None else {"maxProducerPerTopic": topic}
    ns = with_namespace_limit(NamespacePolicies(), "maxProducerPerTopic", namespace)
    applied = resolve(own, ns, BROKER)
    expected = topic if topic is not None else namespace if namespace is not None else 7
    assert applied.client_limits.max_producers_per_topic == expected
    assert applied.sources["maxProducerPerTopic"] == (
        "topic" if topic is not None else "namespace" if namespace is not None else "broker"
    )
    assert namespace_limit(ns, "maxProducerPerTopic") == namespace
    # Untouched caps stay the broker's; per-connection caps always are.
    assert applied.client_limits.max_consumers_per_subscription == 3
    assert applied.client_limits.max_producers_per_connection == BROKER.max_producers_per_connection


@pytest.mark.parametrize(
    ("own", "namespace", "expected"),
    [({}, None, False), ({}, True, True), ({"deduplicationEnabled": False}, True, False)],
)
def test_deduplication_topic_over_namespace_over_broker(
    own: dict[str, object], namespace: bool | None, expected: bool
) -> None:
    ns = NamespacePolicies(deduplication_enabled=namespace)
    assert resolve(own, ns, BROKER).deduplication_enabled is expected


def test_retention_topic_over_namespace_and_as_ledger_seconds_and_bytes() -> None:
    ns = NamespacePolicies(retention=RetentionPolicies(10, 5))
    base = ManagedLedgerConfig(retention_time_s=1.0, retention_size_bytes=2)
    applied = resolve({}, ns, BROKER)
    assert applied.sources["retentionPolicies"] == "namespace"
    config = applied.ledger_config(base)
    assert (config.retention_time_s, config.retention_size_bytes) == (600.0, 5 * 1024 * 1024)
    own = {"retentionPolicies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    config = resolve(own, ns, BROKER).ledger_config(base)
    assert (config.retention_time_s, config.retention_size_bytes) == (-1, -1)
    assert resolve({}, NamespacePolicies(), BROKER).ledger_config(base) == base


@pytest.mark.parametrize(
    "own",
    [
        {"maxProducerPerTopic": -1},
        {"maxConsumerPerTopic": True},
        {"deduplicationEnabled": "yes"},
        {"retentionPolicies": {"retentionTimeInMinutes": -2}},
    ],
)
def test_invalid_stored_values_are_refused(own: dict[str, object]) -> None:
    with pytest.raises(InvalidPolicies):
        resolve(own, NamespacePolicies(), BROKER)
