"""Ledger metadata documents, cluster paths and write sets."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.storage.api import (
    Fragment,
    InvalidClusterName,
    InvalidLedgerMetadata,
    LedgerMetadata,
    LedgerState,
)
from braid.storage.distribution import covers, write_set
from braid.storage.ledger_metadata import (
    decode_ledger_metadata,
    encode_ledger_metadata,
    idgen_path,
    ledger_path,
    validate_custom_metadata,
    with_ensemble_change,
    with_replaced_bookie,
)


@st.composite
def metadata(draw: st.DrawFn) -> LedgerMetadata:
    size = draw(st.integers(1, 4))
    ids = st.lists(st.text(min_size=1, max_size=8), min_size=size, max_size=size, unique=True)
    starts = [0, *sorted(draw(st.sets(st.integers(1, 2**40), max_size=3)))]
    ensembles = {start: tuple(draw(ids)) for start in starts}
    write_quorum = draw(st.integers(1, size))
    return LedgerMetadata(
        ledger_id=draw(st.integers(0, 2**63 - 1)),
        cluster_name=draw(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)),
        state=draw(st.sampled_from(list(LedgerState))),
        ensembles=ensembles,
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
    md = LedgerMetadata(
        5, "c1", LedgerState.OPEN, {0: ("b0",)}, 1, 1, -1, 0, 1000, {"k": b"\x00\xff"}
    )
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
    md = LedgerMetadata(1, "c", LedgerState.OPEN, {0: ("a", "b", "c")}, 2, 1, -1, 0, 0)
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
                "ensembles",
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
            st.lists(st.dictionaries(st.sampled_from(["firstEntryId", "bookies"]), st.integers())),
            st.dictionaries(st.text(max_size=2), st.text(max_size=4), max_size=2),
        ),
    )
)
def test_wrongly_typed_fields_raise_only_the_typed_error(doc: dict[str, object]) -> None:
    try:
        decode_ledger_metadata(json.dumps(doc).encode())
    except InvalidLedgerMetadata:
        pass


#: A document as Braid wrote it before ensemble changes existed (one ``ensemble``, no fragments):
#: data directories from then must still open.
GOLDEN_SINGLE_ENSEMBLE = (
    b'{"ledgerId":7,"clusterName":"standalone","state":"CLOSED","ensemble":["bookie-0"],'
    b'"writeQuorum":1,"ackQuorum":1,"lastEntryId":41,"length":4096,"createdMs":1700000000000,'
    b'"customMetadata":{"component":"bWFuYWdlZC1sZWRnZXI="}}'
)


def test_a_document_from_before_fragments_decodes_as_one_fragment_from_entry_zero() -> None:
    md = decode_ledger_metadata(GOLDEN_SINGLE_ENSEMBLE)
    assert md.ensembles == {0: ("bookie-0",)}
    assert md.ensemble == ("bookie-0",)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 41 and md.length == 4096
    assert md.custom_metadata == {"component": b"managed-ledger"}
    assert md.fragments() == [Fragment(0, 41, ("bookie-0",))]


def test_new_documents_list_fragments_in_entry_order() -> None:
    md = LedgerMetadata(
        3, "c", LedgerState.OPEN, {0: ("a", "b", "c"), 10: ("a", "d", "c")}, 2, 2, -1, 0, 0
    )
    doc = json.loads(encode_ledger_metadata(md))
    assert "ensemble" not in doc
    assert doc["ensembles"] == [
        {"firstEntryId": 0, "bookies": ["a", "b", "c"]},
        {"firstEntryId": 10, "bookies": ["a", "d", "c"]},
    ]


@pytest.mark.parametrize(
    "ensembles",
    [
        [],
        [{"firstEntryId": 1, "bookies": ["a"]}],
        [{"firstEntryId": 0, "bookies": ["a"]}, {"firstEntryId": 0, "bookies": ["b"]}],
        [{"firstEntryId": 0, "bookies": ["a", "b"]}, {"firstEntryId": 5, "bookies": ["c"]}],
        [{"firstEntryId": 0, "bookies": ["a", "a"]}],
        [{"firstEntryId": 0, "bookies": "a"}],
    ],
)
def test_malformed_fragments_raise_invalid_ledger_metadata(ensembles: list[object]) -> None:
    doc = {
        "ledgerId": 1,
        "clusterName": "c",
        "state": "OPEN",
        "ensembles": ensembles,
        "writeQuorum": 1,
        "ackQuorum": 1,
        "lastEntryId": -1,
        "length": 0,
        "createdMs": 0,
    }
    with pytest.raises(InvalidLedgerMetadata):
        decode_ledger_metadata(json.dumps(doc).encode())


def test_write_sets_follow_the_fragment_holding_the_entry() -> None:
    md = LedgerMetadata(
        1, "c", LedgerState.OPEN, {0: ("a", "b", "c"), 4: ("a", "d", "c")}, 2, 1, -1, 0, 0
    )
    assert write_set(md, 3) == ["a", "b"]
    assert write_set(md, 4) == ["d", "c"]
    assert write_set(md, 5) == ["c", "a"]
    assert md.ensemble_at(3) == ("a", "b", "c")
    assert md.ensemble_at(100) == ("a", "d", "c")


def test_an_ensemble_change_adds_a_fragment_or_replaces_an_empty_last_one() -> None:
    md = LedgerMetadata(1, "c", LedgerState.OPEN, {0: ("a", "b")}, 2, 2, -1, 0, 0)
    changed = with_ensemble_change(md, 5, ("a", "c"))
    assert changed.ensembles == {0: ("a", "b"), 5: ("a", "c")}
    again = with_ensemble_change(changed, 5, ("a", "d"))
    assert again.ensembles == {0: ("a", "b"), 5: ("a", "d")}
    with pytest.raises(InvalidLedgerMetadata):
        with_ensemble_change(again, 4, ("a", "e"))
    closed = dataclasses.replace(again, state=LedgerState.CLOSED, last_entry_id=9)
    assert closed.fragments() == [Fragment(0, 4, ("a", "b")), Fragment(5, 9, ("a", "d"))]
    assert closed.bookies() == {"a", "b", "d"}


def test_replacing_a_bookie_touches_only_its_fragment() -> None:
    md = LedgerMetadata(1, "c", LedgerState.CLOSED, {0: ("a", "b"), 5: ("a", "c")}, 2, 2, 9, 0, 0)
    moved = with_replaced_bookie(md, 0, "a", "z")
    assert moved.ensembles == {0: ("z", "b"), 5: ("a", "c")}
    with pytest.raises(InvalidLedgerMetadata):
        with_replaced_bookie(md, 5, "b", "z")


def _covers_by_brute_force(size: int, wq: int, aq: int, answered: set[int]) -> bool:
    # An ack quorum of some write set lies entirely among the silent bookies.
    for start in range(size):
        members = {(start + i) % size for i in range(wq)}
        for quorum in itertools.combinations(sorted(members), aq):
            if not set(quorum) & answered:
                return False
    return True


@given(st.data())
def test_coverage_means_no_ack_quorum_of_any_write_set_is_silent(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 7))
    wq = data.draw(st.integers(1, size))
    aq = data.draw(st.integers(1, wq))
    answered = data.draw(st.sets(st.integers(0, size - 1)))
    assert covers(size, wq, aq, answered) == _covers_by_brute_force(size, wq, aq, answered)
