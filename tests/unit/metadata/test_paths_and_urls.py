"""Path, value and URL validation: bad input gets a clear typed error."""

from __future__ import annotations

import pytest

from braid.core.errors import InvalidInputError
from braid.metadata import (
    MAX_VALUE_SIZE,
    InvalidPath,
    InvalidStoreUrl,
    StoreUrl,
    ValueTooLarge,
    parse_store_url,
)
from braid.metadata.paths import (
    ancestors,
    parent_of,
    validate_expected_version,
    validate_path,
    validate_value,
    validate_writable_path,
)


@pytest.mark.parametrize("path", ["/", "/a", "/a/b-c/d_e.f", "/topics/t/ns/x:y"])
def test_valid_paths_are_accepted(path: str) -> None:
    assert validate_path(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("a/b", "not absolute"),
        ("/a/", "trailing slash"),
        ("/a//b", "empty segment"),
        ("/a/./b", "relative segment"),
        ("/a/..", "relative segment"),
        ("/a\x00b", "control character"),
        ("/a\nb", "control character"),
    ],
)
def test_invalid_paths_are_rejected_with_the_reason(path: str, reason: str) -> None:
    with pytest.raises(InvalidPath, match=reason):
        validate_path(path)


def test_non_string_path_is_rejected() -> None:
    with pytest.raises(InvalidPath):
        validate_path(b"/a")


def test_root_cannot_be_written() -> None:
    with pytest.raises(InvalidPath, match="root"):
        validate_writable_path("/")


def test_invalid_path_is_an_invalid_input_error() -> None:
    assert issubclass(InvalidPath, InvalidInputError)
    assert issubclass(InvalidPath, ValueError)


def test_value_at_the_limit_is_accepted_and_one_more_byte_is_not() -> None:
    assert len(validate_value(b"x" * MAX_VALUE_SIZE)) == MAX_VALUE_SIZE
    with pytest.raises(ValueTooLarge, match=str(MAX_VALUE_SIZE)):
        validate_value(b"x" * (MAX_VALUE_SIZE + 1))


def test_non_bytes_value_is_rejected() -> None:
    with pytest.raises(InvalidInputError):
        validate_value("text")
    assert validate_value(bytearray(b"ab")) == b"ab"


@pytest.mark.parametrize("bad", [-2, True, "1", 1.0])
def test_bad_expected_version_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        validate_expected_version(bad)


def test_parent_and_ancestors() -> None:
    assert parent_of("/a") == "/"
    assert parent_of("/a/b/c") == "/a/b"
    assert ancestors("/a/b/c") == ["/a", "/a/b"]
    assert ancestors("/a") == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory://", StoreUrl("memory", "")),
        ("memory://broker-test", StoreUrl("memory", "broker-test")),
        ("sqlite:///tmp/x/meta.db", StoreUrl("sqlite", "/tmp/x/meta.db")),
        ("sqlite:////tmp/x/../meta.db", StoreUrl("sqlite", "/tmp/meta.db")),
        ("zk://127.0.0.1:2181/braid", StoreUrl("zk", "127.0.0.1:2181", "/braid")),
        ("zk://a:1,b:2", StoreUrl("zk", "a:1,b:2", "/")),
        ("zk://a:1/x/y/", StoreUrl("zk", "a:1", "/x/y")),
    ],
)
def test_store_urls_parse(url: str, expected: StoreUrl) -> None:
    assert parse_store_url(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("etcd://localhost:2379", "unknown metadata store scheme"),
        ("memory:", "not a URL"),
        ("/tmp/file.db", "not a URL"),
        ("sqlite://relative.db", "absolute"),
        ("sqlite:///tmp/dir/", "absolute"),
        ("zk:///chroot", "host:port"),
        ("zk://host/chroot", "not host:port"),
        ("zk://host:99999/", "not host:port"),
        ("zk://h:1/a//b", "bad chroot"),
        ("memory://a/b", "name"),
    ],
)
def test_bad_store_urls_are_rejected(url: str, reason: str) -> None:
    with pytest.raises(InvalidStoreUrl, match=reason):
        parse_store_url(url)
