"""Ledger metadata documents, cluster paths and write sets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.storage.api import (
    InvalidClusterName,
    InvalidLedgerMetadata,
    LedgerMetadata,
    LedgerState,
)
from braid.storage.handles import write_set
from braid.storage.ledger_metadata import (
    decode_ledger_metadata,
    encode_ledger_metadata,
    idgen_path,
    ledger_path,
    validate_custom_metadata,
)


@st.composite
def metadata(draw: st.DrawFn) -> LedgerMetadata:
    ensemble = tuple(draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4)))
    write_quorum = draw(st.integers(1, len(ensemble)))
    return LedgerMetadata(
        ledger_id=draw(st.integers(0, 2**63 - 1)),
        cluster_name=draw(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)),
        state=draw(st.sampled_from(list(LedgerState))),
        ensemble=ensemble,
        write_quorum=write_quorum,
        ack_quorum=draw(st.integers(1, write_quorum)),
        last_entry_id=draw(st.integers(-1, 2**40)),
        length=draw(st.integers(0, 2**40)),
        created_ms=draw(st.integers(0, 2**45)),
        custom_metadata=draw(
            st.dictionaries(st.text(max_size=8), st.binary(max_size=16), max_size=3)
        ),
    )


@given(metadata())
def test_ledger_metadata_round_trips_through_json(md: LedgerMetadata) -> None:
    assert decode_ledger_metadata(encode_ledger_metadata(md)) == md


def test_document_uses_camel_case_keys_and_base64_custom_metadata() -> None:
    md = LedgerMetadata(5, "c1", LedgerState.OPEN, ("b0",), 1, 1, -1, 0, 1000, {"k": b"\x00\xff"})
    doc = json.loads(encode_ledger_metadata(md))
    assert doc["ledgerId"] == 5
    assert doc["clusterName"] == "c1"
    assert doc["state"] == "OPEN"
    assert doc["customMetadata"] == {"k": "AP8="}


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b"{}",
        b'{"ledgerId": "x"}',
        json.dumps(
            {
                "ledgerId": 1,
                "clusterName": "c",
                "state": "OPEN",
                "ensemble": ["b"],
                "writeQuorum": 2,
                "ackQuorum": 1,
                "lastEntryId": -1,
                "length": 0,
                "createdMs": 0,
            }
        ).encode(),
        json.dumps(
            {
                "ledgerId": 1,
                "clusterName": "c",
                "state": "WEIRD",
                "ensemble": ["b"],
                "writeQuorum": 1,
                "ackQuorum": 1,
                "lastEntryId": -1,
                "length": 0,
                "createdMs": 0,
            }
        ).encode(),
        json.dumps(
            {
                "ledgerId": 1,
                "clusterName": "c",
                "state": "OPEN",
                "ensemble": ["b"],
                "writeQuorum": 1,
                "ackQuorum": 1,
                "lastEntryId": -1,
                "length": 0,
                "createdMs": 0,
                "customMetadata": {"k": "!!!"},
            }
        ).encode(),
    ],
)
def test_malformed_documents_raise_invalid_ledger_metadata(raw: bytes) -> None:
    with pytest.raises(InvalidLedgerMetadata):
        decode_ledger_metadata(raw)


def test_paths_live_under_the_cluster_root() -> None:
    assert idgen_path("east") == "/storage/east/idgen"
    assert ledger_path("east", 42) == "/storage/east/ledgers/42"


@pytest.mark.parametrize("name", ["", "a/b", "-x", "x" * 200, "sp ace"])
def test_bad_cluster_names_are_rejected(name: str) -> None:
    with pytest.raises(InvalidClusterName):
        idgen_path(name)


def test_custom_metadata_must_map_str_to_bytes() -> None:
    assert validate_custom_metadata({"a": bytearray(b"x")}) == {"a": b"x"}
    with pytest.raises(InvalidLedgerMetadata):
        validate_custom_metadata({"a": "text"})  # type: ignore[dict-item]


def test_write_sets_stripe_round_the_ensemble() -> None:
    md = LedgerMetadata(1, "c", LedgerState.OPEN, ("a", "b", "c"), 2, 1, -1, 0, 0)
    assert [write_set(md, e) for e in range(4)] == [
        ["a", "b"],
        ["b", "c"],
        ["c", "a"],
        ["a", "b"],
    ]


@given(st.binary(max_size=300))
def test_decoding_arbitrary_bytes_raises_only_the_typed_error(raw: bytes) -> None:
    try:
        decode_ledger_metadata(raw)
    except InvalidLedgerMetadata:
        pass


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "ledgerId",
                "clusterName",
                "state",
                "ensemble",
                "writeQuorum",
                "ackQuorum",
                "lastEntryId",
                "length",
                "createdMs",
                "customMetadata",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.text(max_size=5),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=2), st.text(max_size=4), max_size=2),
        ),
    )
)
def test_wrongly_typed_fields_raise_only_the_typed_error(doc: dict[str, object]) -> None:
    try:
        decode_ledger_metadata(json.dumps(doc).encode())
    except InvalidLedgerMetadata:
        pass
