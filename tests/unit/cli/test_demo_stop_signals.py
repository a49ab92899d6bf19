"""``braid demo --keep``'s wait for Ctrl+C: a signal that arrives before the wait starts (just after
the prompt is printed) ends the wait instead of being lost or raised as a KeyboardInterrupt, and
the previous handlers are put back."""

from __future__ import annotations

import os
import signal
import threading

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
    # From the interpreter's own handler, whatever an earlier test in this process left behind: a
    # make test worker once had one here that swallowed SIGINT (which test left it was not found;
    # a uvloop loop closed with a signal handler still added leaves its own, for one).
    earlier = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with stop_signals():
            pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, earlier)


def test_a_signal_delivered_to_another_thread_ends_the_wait() -> None:
    """The kernel may deliver Ctrl+C to any thread; the main thread, blocked in the wait, must
    still wake (it hung there when the wait relied on the Python-level handler)."""
    with stop_signals() as wait_for_stop:
        sender = threading.Timer(
            0.2, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        )
        sender.start()
        wait_for_stop()
        sender.join()
