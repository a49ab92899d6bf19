"""SEND_RECEIPT frames come from one reused command per connection (``SendReceiptEncoder``): each
must encode exactly as a freshly built command, with nothing left over from the receipt before
it, for any field values."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from braid.broker.handlers import TopicCommands, TopicService
from braid.broker.send_validation import SendValidator
from braid.ledger.api import Position
from braid.protocol import commands
from braid.protocol.frames import FrameDecoder, SendReceiptEncoder, encode_command
from braid.protocol.generated import PulsarApi_pb2 as pb

_UINT64S = st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1))


class _RecordingChannel:
    """A command channel that keeps the encoded bytes of every command (as the connection
    does: encoded at send time)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        self.sent.append(encode_command(cmd))

    def send_frame(self, frame: bytes) -> None:
        self.sent.append(frame)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, request_id: int | None = None) -> None:
        coro.close()

    client_version = "test"
    remote_address = "127.0.0.1:1"
    closed = False


def test_receipts_encode_like_protobuf_in_any_order() -> None:
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


_ENCODER = SendReceiptEncoder()  # shared by the examples: each starts from the one before


@settings(max_examples=300, deadline=None)
@given(
    producer_id=_UINT64S,
    sequence_id=_UINT64S,
    ledger_id=st.integers(-1, 2**63 - 1),
    entry_id=st.integers(-1, 2**63 - 1),
    highest_sequence_id=st.integers(-1, 2**64 - 1),
)
def test_reused_encoder_gives_a_fresh_commands_bytes(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int
) -> None:
    expected = encode_command(
        commands.send_receipt(
            producer_id,
            sequence_id,
            ledger_id,
            entry_id,
            highest_sequence_id if highest_sequence_id > 0 else None,
        )
    )
    got = _ENCODER.encode(producer_id, sequence_id, ledger_id, entry_id, highest_sequence_id)
    assert got == expected
    [frame] = FrameDecoder().feed(got)
    assert frame.command.send_receipt.producer_id == producer_id
