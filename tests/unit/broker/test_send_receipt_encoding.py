"""SEND_RECEIPT is encoded from one reused command per connection: it must encode exactly as a
freshly built one, with nothing left over from the receipt before it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, cast

from braid.broker.handlers import TopicCommands, TopicService
from braid.broker.send_validation import SendValidator
from braid.ledger.api import Position
from braid.protocol import commands
from braid.protocol.frames import encode_command
from braid.protocol.generated import PulsarApi_pb2 as pb


class _RecordingChannel:
    """A command channel that keeps the encoded bytes of every command (as the connection
    does: encoded at send time)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        self.sent.append(encode_command(cmd))

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        coro.close()

    client_version = "test"
    remote_address = "127.0.0.1:1"
    closed = False


def test_reused_receipt_encodes_like_a_fresh_one_in_any_order() -> None:
    channel = _RecordingChannel()
    topics = TopicCommands(channel, cast(TopicService, None), SendValidator(5 * 1024 * 1024))
    cases = [
        (1, 0, 0, Position(5, 0)),
        (2, 41, 49, Position(7, 3)),  # a batch: highest sequence id present
        (2, 50, 0, Position(7, 4)),  # ... and absent again right after
        (3, 9, 0, Position(-1, -1)),  # a duplicate's receipt: -1:-1
        (2**40, 2**62, 2**62 + 5, Position(2**62, 2**31)),
    ]
    for producer_id, seq, highest, pos in cases:
        topics.send_receipt(producer_id, seq, highest, pos)
    expected = [
        encode_command(
            commands.send_receipt(
                producer_id, seq, pos.ledger_id, pos.entry_id, highest if highest > 0 else None
            )
        )
        for producer_id, seq, highest, pos in cases
    ]
    assert channel.sent == expected
