"""Which event loop a Braid process runs (``braid.event_loop``, ADR 0078): uvloop by default,
the standard loop by ``BRAID_EVENT_LOOP=asyncio`` or where uvloop is missing, a typed error for a
value Braid does not know or a required uvloop that is not there."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

import braid
from braid.core.errors import InvalidInputError
from braid.event_loop import EVENT_LOOP_ENV, EventLoopConfigError, choose_event_loop


def _runs(choice_loop: asyncio.AbstractEventLoop) -> int:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    try:
        return choice_loop.run_until_complete(answer())
    finally:
        choice_loop.close()


@pytest.mark.parametrize("value", [None, "auto", "uvloop", " UVLoop ", ""])
def test_uvloop_is_the_default_and_can_be_required(value: str | None) -> None:
    env = {} if value is None else {EVENT_LOOP_ENV: value}
    choice = choose_event_loop(env)
    assert choice.name == "uvloop"
    loop = choice.new_loop()
    assert isinstance(loop, uvloop.Loop)
    assert _runs(loop) == 42


def test_asyncio_picks_the_standard_loop() -> None:
    choice = choose_event_loop({EVENT_LOOP_ENV: "asyncio"})
    assert choice.name == "asyncio"
    loop = choice.new_loop()
    assert not isinstance(loop, uvloop.Loop)
    assert isinstance(loop, asyncio.BaseEventLoop)
    assert _runs(loop) == 42


def test_an_unknown_value_names_the_accepted_ones() -> None:
    with pytest.raises(EventLoopConfigError) as caught:
        choose_event_loop({EVENT_LOOP_ENV: "tokio"})
    message = str(caught.value)
    assert "BRAID_EVENT_LOOP='tokio'" in message
    assert "auto, uvloop, asyncio" in message
    assert isinstance(caught.value, InvalidInputError)


def test_without_uvloop_auto_falls_back_and_uvloop_required_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules makes `import uvloop` raise ImportError, as on a machine
    # where it is not installed.
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert choose_event_loop({}).name == "asyncio"
    with pytest.raises(EventLoopConfigError, match="uvloop cannot be imported"):
        choose_event_loop({EVENT_LOOP_ENV: "uvloop"})


def test_the_blocking_client_runs_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # No broker is needed: the client's loop thread starts in the constructor, connections are
    # made on first use.
    client = braid.Client("pulsar://127.0.0.1:1")
    try:
        assert isinstance(client._runner.loop, uvloop.Loop)
    finally:
        client.close()
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    client = braid.Client("pulsar://127.0.0.1:1")
    try:
        assert not isinstance(client._runner.loop, uvloop.Loop)
    finally:
        client.close()
    monkeypatch.setenv(EVENT_LOOP_ENV, "bogus")
    with pytest.raises(EventLoopConfigError):
        braid.Client("pulsar://127.0.0.1:1")
