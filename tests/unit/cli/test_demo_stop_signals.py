"""``braid demo --keep``'s wait for Ctrl+C: a signal that arrives before the wait starts (just after
the prompt is printed) ends the wait instead of being lost or raised as a KeyboardInterrupt, and
the previous handlers are put back."""

from __future__ import annotations

import os
import signal

import pytest

from braid.cli.demo import stop_signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sent_before_the_wait_ends_it_without_an_exception(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with stop_signals() as wait_for_stop:
        os.kill(os.getpid(), sig)  # the handler runs here, before the wait
        wait_for_stop()  # returns at once: the signal was kept (it would block forever if lost)
    assert signal.getsignal(sig) is before


def test_outside_the_block_ctrl_c_is_a_keyboard_interrupt_again() -> None:
    with stop_signals():
        pass
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
