"""Managed-ledger metadata documents and name mapping: round trips and typed errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.names import (
    MAX_LOCAL_NAME_LENGTH,
    MAX_NAMESPACE_LENGTH,
    MAX_SEGMENT_ID,
    MAX_TENANT_LENGTH,
    SegmentTopicName,
    TopicDomain,
    TopicName,
)
from braid.core.ranges import HashRange
from braid.ledger.api import (
    InvalidCursorName,
    InvalidManagedLedgerName,
    LedgerInfo,
    ManagedLedgerMetadataError,
    Position,
)
from braid.ledger.codec import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    decode_cursor_info,
    decode_ledger_info,
    encode_cursor_info,
    encode_ledger_info,
)
from braid.ledger.names import (
    MAX_NAME_LENGTH,
    cursor_path,
    decode_segment,
    encode_segment,
    ledger_path,
    validate_ledger_name,
)
from braid.metadata.paths import validate_path

segment = st.text(min_size=1, max_size=12).filter(
    lambda s: (
        s not in (".", "..")
        and "/" not in s
        and s == s.strip()
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)
    )
)


@settings(deadline=None)  # a shared CI machine must not make timing flaky
@given(st.lists(segment, min_size=1, max_size=5))
def test_every_valid_name_maps_to_one_valid_path_and_back(parts: list[str]) -> None:
    name = "/".join(parts)
    path = ledger_path("/managed-ledgers", name)
    validate_path(path)
    assert path.count("/") == 2  # flat: the name is a single segment
    assert decode_segment(path.rsplit("/", 1)[1]) == name
    validate_path(cursor_path("/managed-ledgers", name, parts[0]))


def test_distinct_names_get_distinct_segments() -> None:
    names = ["a/b", "a%2Fb", "a%252Fb", "a b", "a+b"]
    assert len({encode_segment(n) for n in names}) == len(names)


@pytest.mark.parametrize("bad", ["", "a//b", "/a", "a/", "a/./b", "..", "a\x00b", " a", 7])
def test_bad_ledger_names_raise_typed_errors(bad: object) -> None:
    with pytest.raises(InvalidManagedLedgerName):
        validate_ledger_name(bad)


@pytest.mark.parametrize("bad", ["", ".", "..", "x\n", "y" * 600])
def test_bad_cursor_names_raise_typed_errors(bad: str) -> None:
    with pytest.raises(InvalidCursorName):
        cursor_path("/managed-ledgers", "ok", bad)


def test_ledger_info_round_trips() -> None:
    info = ManagedLedgerInfo(
        ledgers=(
            LedgerInfo(3, 10, 1000, 1_700_000_000_000, "standalone"),
            LedgerInfo(9, 0, 0, 1_700_000_000_500, "cluster-b"),
        ),
        terminated=True,
        terminated_position=Position(9, -1),
        properties={"k": "v"},
    )
    assert decode_ledger_info(encode_ledger_info(info)) == info


def test_cursor_info_round_trips() -> None:
    info = ManagedCursorInfo(
        mark_delete=Position(3, 4),
        individually_deleted=((Position(3, 6), Position(3, 9)), (Position(5, 0), Position(5, 0))),
        properties={"sequence": 17},
        last_active_ms=5,
    )
    assert decode_cursor_info(encode_cursor_info(info)) == info


def test_batch_deletion_indexes_are_stored_under_pulsars_names() -> None:
    info = ManagedCursorInfo(
        mark_delete=Position(3, 4),
        batch_deleted_indexes=((Position(3, 7), (0b101, -(2**63))),),
    )
    doc = json.loads(encode_cursor_info(info))
    assert doc["batchedEntryDeletionIndexInfo"] == [
        {"position": {"ledgerId": 3, "entryId": 7}, "deleteSet": [5, -(2**63)]}
    ]
    assert decode_cursor_info(encode_cursor_info(info)) == info


@pytest.mark.parametrize(
    "doc",
    [
        b"not json",
        b"[]",
        b'{"formatVersion": 99}',
        b'{"ledgers": [{"ledgerId": 1}]}',
        b'{"ledgers": [{"ledgerId": "x", "bookieClusterName": "c"}]}',
        b'{"ledgers": [{"ledgerId": 2, "bookieClusterName": "c"},'
        b' {"ledgerId": 1, "bookieClusterName": "c"}]}',
        b'{"terminated": "yes"}',
    ],
)
def test_corrupt_ledger_documents_raise_a_typed_error(doc: bytes) -> None:
    with pytest.raises(ManagedLedgerMetadataError):
        decode_ledger_info(doc)


@pytest.mark.parametrize(
    "doc",
    [
        b"{}",
        b'{"markDeleteLedgerId": 1, "markDeleteEntryId": 0, "individualDeletedMessages": [[1, 5]]}',
        b'{"markDeleteLedgerId": 1, "markDeleteEntryId": 0, "properties": {"a": "b"}}',
        b'{"markDeleteLedgerId": 1, "markDeleteEntryId": 0, "batchedEntryDeletionIndexInfo": {}}',
        b'{"markDeleteLedgerId": 1, "markDeleteEntryId": 0, "batchedEntryDeletionIndexInfo":'
        b' [{"position": {"ledgerId": 1, "entryId": 2}, "deleteSet": [18446744073709551615]}]}',
        b"\xff",
    ],
)
def test_corrupt_cursor_documents_raise_a_typed_error(doc: bytes) -> None:
    with pytest.raises(ManagedLedgerMetadataError):
        decode_cursor_info(doc)


def test_every_valid_topic_name_fits_a_managed_ledger_name() -> None:
    # The longest storage name any valid topic needs: a segment of a scalable topic with maximal
    # tenant, namespace and local name, the full hash range and the largest segment id.
    parent = TopicName(
        TopicDomain.TOPIC,
        "t" * MAX_TENANT_LENGTH,
        "n" * MAX_NAMESPACE_LENGTH,
        "x" * MAX_LOCAL_NAME_LENGTH,
    )
    segment = SegmentTopicName.of(parent, HashRange.full(), MAX_SEGMENT_ID).topic_name
    storage = f"{segment.tenant}/{segment.namespace}/{segment.domain.value}/{segment.local_name}"
    assert len(storage) <= MAX_NAME_LENGTH
    assert validate_ledger_name(storage) == storage
