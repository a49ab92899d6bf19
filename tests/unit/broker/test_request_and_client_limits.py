"""The pure bookkeeping of the broker's caps: lookups in flight (``maxConcurrentLookupRequest``)
and producers/consumers per topic, subscription and connection - each refusal naming its key."""

from __future__ import annotations

import pytest

from braid.broker.client_limits import ClientLimits
from braid.broker.errors import ConsumerBusy, ProducerBusy, ServerError, TooManyRequests
from braid.broker.request_limits import LookupLimiter


def test_a_lookup_over_the_cap_is_refused_and_a_finished_one_frees_its_slot() -> None:
    limiter = LookupLimiter(2)
    with limiter.slot(), limiter.slot():
        with (
            pytest.raises(TooManyRequests, match="maxConcurrentLookupRequest=2") as refused,
            limiter.slot(),
        ):
            pass
        assert refused.value.code == ServerError.TooManyRequests and refused.value.retriable
        assert limiter.in_flight == 2
    assert limiter.in_flight == 0 and limiter.refused == 1
    with limiter.slot():
        assert limiter.in_flight == 1


def test_a_failing_lookup_gives_its_slot_back() -> None:
    limiter = LookupLimiter(1)
    with pytest.raises(RuntimeError), limiter.slot():
        raise RuntimeError("metadata store down")
    assert limiter.in_flight == 0


def test_zero_means_no_cap() -> None:
    limiter = LookupLimiter(0)
    with limiter.slot(), limiter.slot(), limiter.slot():
        assert limiter.in_flight == 3
    ClientLimits().check_producer("t", 10**6, 10**6)
    ClientLimits().check_consumer("t", "s", 10**6, 10**6, 10**6)


@pytest.mark.parametrize(
    ("limits", "counts", "key"),
    [
        (ClientLimits(max_producers_per_topic=2), (2, 0), "maxProducersPerTopic"),
        (ClientLimits(max_producers_per_connection=3), (0, 3), "maxProducersPerConnection"),
    ],
)
def test_a_producer_over_a_cap_is_producer_busy_naming_the_key(
    limits: ClientLimits, counts: tuple[int, int], key: str
) -> None:
    with pytest.raises(ProducerBusy, match=key):
        limits.check_producer("persistent://t/n/x", *counts)
    limits.check_producer(
        "persistent://t/n/x", counts[0] and counts[0] - 1, counts[1] and counts[1] - 1
    )


@pytest.mark.parametrize(
    ("limits", "counts", "key"),
    [
        (ClientLimits(max_consumers_per_topic=2), (2, 0, 0), "maxConsumersPerTopic"),
        (ClientLimits(max_consumers_per_subscription=1), (0, 1, 0), "maxConsumersPerSubscription"),
        (ClientLimits(max_consumers_per_connection=4), (0, 0, 4), "maxConsumersPerConnection"),
    ],
)
def test_a_consumer_over_a_cap_is_consumer_busy_naming_the_key(
    limits: ClientLimits, counts: tuple[int, int, int], key: str
) -> None:
    with pytest.raises(ConsumerBusy, match=key):
        limits.check_consumer("persistent://t/n/x", "sub", *counts)


def test_negative_caps_are_refused() -> None:
    with pytest.raises(ValueError, match="max_consumers_per_topic"):
        ClientLimits(max_consumers_per_topic=-1)
    with pytest.raises(ValueError):
        LookupLimiter(-1)
