"""The connection caps' bookkeeping: totals and per-IP counts in and out, refusals counted."""

from __future__ import annotations

import pytest

from braid.broker.connection_limits import ConnectionLimiter


def test_no_caps_admit_everything() -> None:
    limiter = ConnectionLimiter()
    assert all(limiter.admit("10.0.0.1") is None for _ in range(1000))
    assert limiter.open_connections == 1000
    assert limiter.refused == 0


def test_the_total_cap_holds_and_frees_a_slot_on_release() -> None:
    limiter = ConnectionLimiter(max_connections=2)
    assert limiter.admit("a") is None
    assert limiter.admit("b") is None
    assert limiter.admit("c") == "reached the maximum number of connections (2)"
    limiter.release("a")
    assert limiter.admit("c") is None
    assert (limiter.open_connections, limiter.refused) == (2, 1)


def test_the_per_ip_cap_counts_each_address_alone() -> None:
    limiter = ConnectionLimiter(max_connections_per_ip=1)
    assert limiter.admit("a") is None
    assert limiter.admit("a") == "reached the maximum number of connections from a (1)"
    assert limiter.admit("b") is None
    limiter.release("a")
    assert limiter.open_from("a") == 0
    assert limiter.admit("a") is None
    assert limiter.open_connections == 2


def test_a_refused_connection_is_not_counted_in() -> None:
    limiter = ConnectionLimiter(max_connections=1, max_connections_per_ip=1)
    assert limiter.admit("a") is None
    for _ in range(5):
        assert limiter.admit("a") is not None
    assert (limiter.open_connections, limiter.open_from("a"), limiter.refused) == (1, 1, 5)


def test_negative_caps_are_refused() -> None:
    with pytest.raises(ValueError):
        ConnectionLimiter(max_connections=-1)


def test_refusals_are_logged_at_most_once_per_interval() -> None:
    limiter = ConnectionLimiter(1)
    assert limiter.log_due(100.0, 10.0)
    assert not limiter.log_due(105.0, 10.0)
    assert limiter.log_due(110.0, 10.0)
