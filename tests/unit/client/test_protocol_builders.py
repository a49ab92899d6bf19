"""Golden bytes of the client-side command builders added to ``braid.protocol.commands``.

Each frame is pinned byte for byte; the first is annotated field by field against the protobuf
wire format (so the expectation is not just "what the code produced once").
"""

from __future__ import annotations

import pytest

from braid.protocol import FrameDecoder, commands, encode_command, pb

MID = commands.message_id(7, 3, batch_index=2)

GOLDEN = [
    (
        "ack individual",
        commands.ack(5, [commands.message_id(7, 3), commands.message_id(7, 4)]),
        # [total 24][cmd 20] type=ACK(10) | field 10 len 16: consumer_id=5, ack_type=Individual,
        # message_id{ledger 7, entry 3}, message_id{ledger 7, entry 4}
        "0000001800000014080a5210080510001a04080710031a0408071004",
    ),
    (
        "ack cumulative with receipt",
        commands.ack(5, [MID], cumulative=True, request_id=9),
        "0000001600000012080a520e080510011a060807100320024009",
    ),
    (
        "redeliver ids",
        commands.redeliver_unacknowledged_messages(5, [commands.message_id(7, 3)]),
        "000000110000000d0814a201080805120408071003",
    ),
    (
        "redeliver all",
        commands.redeliver_unacknowledged_messages(5),
        "0000000b000000070814a201020805",
    ),
    ("last message id", commands.get_last_message_id(5, 10), "0000000d00000009081dea01040805100a"),
    ("unsubscribe", commands.unsubscribe(5, 11), "0000000c00000008080c62040805100b"),
    (
        "seek to id",
        commands.seek(5, 12, message_id=commands.message_id(7, 3)),
        "000000130000000f081ce2010a0805100c1a0408071003",
    ),
    (
        "seek to time",
        commands.seek(5, 12, publish_time=1_700_000_000_000),
        "0000001400000010081ce2010b0805100c2080d095ffbc31",
    ),
    (
        "reader subscribe",
        commands.subscribe(
            "persistent://t/n/x",
            "r",
            pb.CommandSubscribe.Exclusive,
            5,
            13,
            durable=False,
            start_message_id=MID,
        ),
        "000000310000002d080422290a1270657273697374656e743a2f2f742f6e2f7812017218002005280d4000"
        "4a060807100320026800",
    ),
    (
        "producer with epoch",
        commands.producer("persistent://t/n/x", 1, 14, producer_name="p", epoch=2),
        "000000290000002508052a210a1270657273697374656e743a2f2f742f6e2f781001180e2201704002480150"
        "00",
    ),
    (
        "namespace watch",
        commands.watch_scalable_topics(3, "t/n", {"team": "a"}, "abc"),
        "000000200000001c084ce2041708031203742f6e1a090a047465616d1201612203616263",
    ),
    (
        "namespace watch close",
        commands.watch_scalable_topics_close(3),
        "0000000b00000007084ef204020803",
    ),
]


@pytest.mark.parametrize(("name", "cmd", "hex_frame"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_frame(name: str, cmd: pb.BaseCommand, hex_frame: str) -> None:
    frame = encode_command(cmd)
    assert frame.hex() == hex_frame, name
    [decoded] = FrameDecoder().feed(frame)
    assert decoded.command == cmd
    assert commands.inner(cmd) is not None


def test_existing_builders_keep_their_defaults() -> None:
    sub = commands.subscribe("persistent://t/n/x", "s", pb.CommandSubscribe.Shared, 1, 2).subscribe
    assert sub.durable and not sub.HasField("durable") and not sub.HasField("start_message_id")
    prod = commands.producer("persistent://t/n/x", 1, 2).producer
    assert not prod.HasField("epoch") and not prod.user_provided_producer_name
