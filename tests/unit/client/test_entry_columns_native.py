"""The compiled batch decoder (``_entry_columns.c``) against the Python decoder: the same rows,
the same dispatched counts and the same errors for any batch - valid ones of every metadata
shape (the compiled one takes the common shape and hands the rest back), damaged and arbitrary
bytes - and it is built wherever a C compiler is at hand."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.client import columns as columns_module
from braid.client.columns import NATIVE_ENTRY_COLUMNS, EntryColumnDecoder
from braid.core.errors import BraidError
from braid.protocol import batch, pb
from braid.protocol.frames import encode_message_body
from tests.unit.client.test_columns import OUTER, rows_of_columns

pytestmark = pytest.mark.unit

TOPIC, SEGMENT, LEDGER, ENTRY = "topic://public/default/t", 3, 17, 9


def decoded(body: bytes, native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``(rows, dispatched)``, or ``(error type, text)``, with or without the compiled decoder."""
    with monkeypatch.context() as patch:
        if not native:
            patch.setattr(columns_module, "_native_decode", None)
        try:
            cols, count = EntryColumnDecoder(TOPIC, SEGMENT).decode(body, LEDGER, ENTRY)
        except BraidError as exc:
            return type(exc), str(exc)
    return rows_of_columns(cols), count, cols.batch_indexes


def agree(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    assert decoded(body, True, monkeypatch) == decoded(body, False, monkeypatch)


def _can_compile() -> bool:
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    compiler = sysconfig.get_config_var("CC").split()[0] or "cc"
    return shutil.which(compiler) is not None and headers.exists()


@pytest.mark.skipif(not _can_compile(), reason="no C compiler or Python headers here")
def test_an_install_that_can_compile_builds_the_compiled_decoder() -> None:
    # An install without it is correct but ~10 x slower per message on the read path.
    assert NATIVE_ENTRY_COLUMNS


text = st.text(max_size=6)
single = st.builds(
    lambda key, props, event_time, seq, ordering, compacted, flags: pb.SingleMessageMetadata(
        **({"partition_key": key} if key is not None else {}),
        properties=[pb.KeyValue(key=k, value=v) for k, v in props.items()],
        **({"event_time": event_time} if event_time is not None else {}),
        **({"sequence_id": seq} if seq is not None else {}),
        **({"ordering_key": ordering} if ordering is not None else {}),
        compacted_out=compacted,
        partition_key_b64_encoded=flags[0],
        null_value=flags[1],
        null_partition_key=flags[2],
    ),
    st.one_of(st.none(), text, st.text(min_size=100, max_size=200)),  # two-byte lengths too
    st.one_of(st.just({}), st.dictionaries(text, text, max_size=2)),
    st.one_of(st.none(), st.integers(0, 2**63 - 1), st.just(2**64 - 1)),
    st.one_of(st.none(), st.integers(0, 2**63 - 1), st.just(2**64 - 1)),
    st.one_of(st.none(), st.binary(max_size=4)),
    st.booleans(),
    st.tuples(st.booleans(), st.booleans(), st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(single, st.binary(max_size=20)), min_size=1, max_size=12),
    st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
def test_any_valid_batch_decodes_alike_with_and_without_the_compiled_decoder(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], base_sequence: int | None
) -> None:
    outer = pb.MessageMetadata()
    outer.CopyFrom(OUTER)
    if base_sequence is not None:
        outer.sequence_id = base_sequence
    body = batch.build_entry(outer, messages, compression=pb.NONE)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        agree(body, patch)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(single, st.binary(max_size=20)), min_size=1, max_size=6),
    st.data(),
)
def test_a_damaged_batch_fails_or_decodes_alike_with_and_without_the_compiled_decoder(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], data: st.DataObject
) -> None:
    body = bytearray(batch.build_entry(OUTER, messages, compression=pb.NONE))  # type: ignore[arg-type]
    damage = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    at = data.draw(st.integers(0, len(body) - 1))
    if damage == "flip":
        body[at] ^= data.draw(st.integers(1, 255))
    elif damage == "cut":
        del body[at:]
    else:
        body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    with pytest.MonkeyPatch.context() as patch:
        agree(bytes(body), patch)


def test_messages_the_compiled_decoder_hands_back_keep_their_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Properties, a key length in a longer form than needed and a key that is not UTF-8 are
    # decoded in Python, between messages the compiled decoder takes.
    props = pb.SingleMessageMetadata(
        partition_key="p", payload_size=1, properties=[pb.KeyValue(key="a", value="b")]
    ).SerializeToString()
    long_length = b"\x12\x82\x00ab\x18\x01"  # partition_key "ab", its length in two bytes
    plain = pb.SingleMessageMetadata(partition_key="k", payload_size=1).SerializeToString()
    payload = b"".join(
        len(m).to_bytes(4, "big") + m + b"%d" % (i % 10)
        for i, m in enumerate([plain, props, plain, long_length, plain, props])
    )
    meta = pb.MessageMetadata()
    meta.CopyFrom(OUTER)
    meta.num_messages_in_batch = 6
    body = encode_message_body(meta, payload)
    agree(body, monkeypatch)
    rows, count, indexes = decoded(body, True, monkeypatch)
    assert count == 6 and indexes == [0, 1, 2, 3, 4, 5]
    assert [r[1] for r in rows] == ["k", "p", "k", "ab", "k", "p"]
