"""The receive window against a model of the broker's permits and the client's queue.

The model is the protocol's: the broker sends a whole entry while it holds a permit (its permits
may go below zero), the client queues it and grants permits as messages are taken. Checked over
drawn message sizes, batch sizes and take patterns: the accounting identity (window = broker
permits + queued + taken-not-granted), the byte bound (what is queued never passes the bound by
more than one entry), and that without a byte bound it is Pulsar's fixed queue exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from braid.client.receive_window import ReceiveWindow


@dataclass
class Link:
    """One consumer: the broker's permits, the client's queue and taken-not-granted count."""

    window: ReceiveWindow
    permits: int = 0
    queued: int = 0
    consumed: int = 0
    granted: list[int] = field(default_factory=list)

    def attach(self) -> None:
        self.permits = self.window.restart()

    def dispatch(self, messages: int, size: int) -> bool:
        if self.permits <= 0:
            return False
        self.permits -= messages
        self.queued += messages
        grow = self.window.received(messages * size, messages)
        self.permits += grow
        return True

    def take(self, count: int) -> None:
        count = min(count, self.queued)
        self.queued -= count
        self.consumed += count
        if self.consumed >= self.window.threshold:
            granted = self.window.grant(self.consumed)
            self.granted.append(granted)
            self.permits += granted
            self.consumed = 0

    def balanced(self) -> bool:
        return self.window.window == self.permits + self.queued + self.consumed


@given(
    max_messages=st.integers(1, 100_000),
    max_bytes=st.integers(1, 64 * 1024 * 1024),
    size=st.integers(1, 1024 * 1024),
    batch=st.integers(1, 2000),
    takes=st.lists(st.integers(1, 5000), min_size=1, max_size=60),
)
@example(max_messages=50_000, max_bytes=16 * 1024 * 1024, size=100, batch=1000, takes=[5000] * 30)
@example(max_messages=50_000, max_bytes=16 * 1024 * 1024, size=100_000, batch=10, takes=[7] * 40)
@example(max_messages=10, max_bytes=1, size=1024 * 1024, batch=1, takes=[1] * 5)
def test_queued_bytes_stay_within_the_bound_plus_one_entry(
    max_messages: int, max_bytes: int, size: int, batch: int, takes: list[int]
) -> None:
    link = Link(ReceiveWindow(max_messages, max_bytes))
    link.attach()
    assert link.permits == 1  # nothing seen yet: one entry, never a guess at sizes
    for take in takes:
        while link.dispatch(batch, size):
            assert link.balanced()
            assert link.queued * size <= max(max_bytes, size) + batch * size
            assert link.queued <= max_messages + batch
        link.take(take)
        assert link.balanced()
    assert 1 <= link.window.window <= max_messages
    assert link.window.window <= max(1, max_bytes // size)


@given(
    max_messages=st.integers(1, 100_000),
    batch=st.integers(1, 2000),
    takes=st.lists(st.integers(1, 5000), min_size=1, max_size=40),
)
def test_without_a_byte_bound_it_is_pulsars_fixed_queue(
    max_messages: int, batch: int, takes: list[int]
) -> None:
    link = Link(ReceiveWindow(max_messages))
    link.attach()
    assert link.permits == max_messages
    assert link.window.threshold == max(1, max_messages // 2)
    for take in takes:
        while link.dispatch(batch, 100):
            pass
        before = link.consumed + min(take, link.queued)
        link.take(take)
        if link.granted and link.consumed == 0:
            assert link.granted[-1] == before  # exactly what was taken
        assert link.balanced()


@given(
    small=st.integers(16, 1000),
    factor=st.integers(2, 1000),
    batch=st.integers(10, 500),
)
@example(small=100, factor=1000, batch=10)
def test_the_window_follows_the_recent_message_size(small: int, factor: int, batch: int) -> None:
    bound = 1024 * 1024
    link = Link(ReceiveWindow(10_000, bound))
    link.attach()

    def run(size: int, rounds: int) -> None:
        for _ in range(rounds):
            while link.dispatch(batch, size):
                assert link.balanced()
            link.take(link.queued)
            assert link.balanced()

    run(small, 3)
    wide = link.window.window
    assert wide == min(10_000, bound // small) or abs(wide - bound // small) <= 1
    large = small * factor
    run(large, 60)  # recent entries weigh most: the window shrinks within a few rounds
    assert link.window.window <= max(1, int(bound / large * 1.01) + 1)
    run(small, 60)  # and grows back
    assert link.window.window >= int(min(10_000, bound // small) * 0.9)


def test_invalid_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_messages"):
        ReceiveWindow(0)
    with pytest.raises(ValueError, match="max_bytes"):
        ReceiveWindow(10, 0)
