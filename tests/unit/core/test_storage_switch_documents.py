"""The PIP-470 registry's stored documents byte for byte, and the exact words of their
refusals: what an operator reads in ``braid admin bookie-clusters`` and in the broker's log."""

from __future__ import annotations

import dataclasses

import pytest

from braid.core.errors import InvalidInputError
from braid.core.storage_switch import (
    BookieClusterInfo,
    ClusterStatus,
    InvalidClusterDocument,
    ItemKind,
    ItemStatus,
    MigrationItem,
    RegistryPaths,
    SwitchTarget,
    discard_deadline_ms,
    new_switch_state,
    validate_registry_name,
)

_RESERVED = (
    "brokers, cleanup, internal, orchestrator-leader, rollback, status, switch, switch-state, "
    "switch-target"
)


def test_a_cluster_document_is_compact_json() -> None:
    info = BookieClusterInfo("new", "zk://h:2181/ledgers-v2", ClusterStatus.STANDBY)
    assert info.encode() == (
        b'{"name":"new","metadataServiceUri":"zk://h:2181/ledgers-v2","status":"STANDBY"}'
    )


def test_a_cluster_document_whose_uri_is_not_a_string_names_the_field() -> None:
    with pytest.raises(InvalidClusterDocument) as caught:
        BookieClusterInfo.decode(b'{"name":"x","metadataServiceUri":1,"status":"ACTIVE"}')
    assert str(caught.value) == (
        "corrupt storage cluster document: metadataServiceUri is not a string"
    )


def test_a_cluster_document_with_a_bad_status_says_which_statuses_exist() -> None:
    with pytest.raises(InvalidClusterDocument) as caught:
        BookieClusterInfo.decode(b'{"name":"x","metadataServiceUri":"m","status":"LIVE"}')
    assert str(caught.value) == (
        "corrupt storage cluster document: "
        "invalid cluster status 'LIVE': expected ACTIVE, STANDBY or DEPRECATED"
    )


def test_a_bad_status_name_is_refused_with_the_three_it_may_be() -> None:
    with pytest.raises(InvalidInputError) as caught:
        ClusterStatus.parse(7)
    assert str(caught.value) == "invalid cluster status 7: expected ACTIVE, STANDBY or DEPRECATED"


def test_a_refused_cluster_name_lists_the_allowed_characters_and_reserved_names() -> None:
    with pytest.raises(InvalidInputError) as caught:
        validate_registry_name("switch")
    assert str(caught.value) == (
        f"invalid storage cluster name 'switch' (letters, digits, '.', '_', '-'; not {_RESERVED})"
    )


def test_a_target_without_origin_is_one_line() -> None:
    assert SwitchTarget("new-cluster").encode() == b"new-cluster"
    assert SwitchTarget("new-cluster", "").encode() == b"new-cluster"


def test_an_origin_url_may_hold_an_equals_sign() -> None:
    raw = b"new\norigin=https://broker-1:8080/?x=1"
    assert SwitchTarget.decode(raw) == SwitchTarget("new", "https://broker-1:8080/?x=1")


@pytest.mark.parametrize("line", [b"other=https://b:8080", b"origin=", b"origin https://b:8080"])
def test_only_a_non_empty_origin_line_names_the_origin(line: bytes) -> None:
    assert SwitchTarget.decode(b"new\n" + line) == SwitchTarget("new", None)


def test_an_unreadable_target_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidClusterDocument) as empty:
        SwitchTarget.decode(b"")
    assert str(empty.value) == "switch target is empty"
    with pytest.raises(InvalidClusterDocument) as binary:
        SwitchTarget.decode(b"\xfe")
    assert str(binary.value).startswith("switch target is not UTF-8: 'utf-8' codec can't decode")
    with pytest.raises(InvalidClusterDocument) as named:
        SwitchTarget.decode(b"status")
    assert str(named.value) == (
        "switch target: invalid storage cluster name 'status' "
        f"(letters, digits, '.', '_', '-'; not {_RESERVED})"
    )


@pytest.mark.parametrize("root", ["/with space", "/a/b.c-d_e"])
def test_a_registry_root_may_hold_any_printable_character(root: str) -> None:
    assert RegistryPaths(root).root == root


@pytest.mark.parametrize("root", ["/a\x00b", "/a\nb", "/\x1f"])
def test_a_registry_root_with_a_control_character_is_refused_naming_it(root: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        RegistryPaths(root)
    assert str(caught.value) == (
        f"invalid bookieClusterConfigPath {root!r}: expected an absolute metadata path "
        "such as /admin/bookie-clusters"
    )


def test_a_rollbacks_kept_copies_are_due_a_delay_after_it_reverted() -> None:
    state = new_switch_state("old", "new", None, 1000, 5000, "old")
    assert discard_deadline_ms(state, 3600) is None  # not rolled back
    assert discard_deadline_ms(dataclasses.replace(state, reverted_ms=0), 3600) == 3600
    assert discard_deadline_ms(dataclasses.replace(state, reverted_ms=1), 3600) == 3601


def test_progress_counts_every_status_and_the_conflicts() -> None:
    items = (
        MigrationItem(ItemKind.SCHEMA, "t/ns/a", "", 1, "old", ItemStatus.BUILT),
        MigrationItem(ItemKind.SCHEMA, "t/ns/b", "", 2, "old", ItemStatus.BUILT),
        MigrationItem(ItemKind.SCHEMA, "t/ns/c", "", 3, "old", ItemStatus.FAILED),
    )
    base = new_switch_state("old", "new", None, 1000, 5000, "old")
    state = dataclasses.replace(base, items=items, id_conflicts=4)
    assert state.progress() == {
        "PENDING": 0,
        "BUILT": 2,
        "FAILED": 1,
        "PROMOTED": 0,
        "ROLLED_OVER": 0,
        "DEFERRED": 0,
        "CLEANED": 0,
        "REVERTED": 0,
        "DISCARDED": 0,
        "total": 3,
        "idConflicts": 4,
    }
