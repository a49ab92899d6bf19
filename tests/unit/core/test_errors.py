"""Error categories: the names error bodies carry between brokers and clients, and the classes
rebuilt from them on the other side."""

from __future__ import annotations

import pytest

from braid.core.errors import (
    CATEGORIES,
    BraidError,
    FencedError,
    NotFoundError,
    category_class,
    category_of,
)
from braid.core.storage_switch import InvalidClusterDocument


@pytest.mark.parametrize(("cls", "name"), CATEGORIES, ids=[name for _, name in CATEGORIES])
def test_each_category_name_rebuilds_the_class_it_was_sent_for(
    cls: type[BraidError], name: str
) -> None:
    assert category_class(name) is cls
    assert category_of(cls("x")) == name


def test_the_category_names_are_the_wire_words() -> None:
    assert [name for _, name in CATEGORIES] == [
        "NotFound",
        "AlreadyExists",
        "TopicTerminated",
        "Conflict",
        "IllegalState",
        "InvalidInput",
        "Authorization",
        "ServiceUnavailable",
        "Timeout",
        "Fenced",
    ]


def test_an_unknown_category_name_rebuilds_nothing() -> None:
    assert category_class("notfound") is None
    assert category_class("") is None


def test_a_subclass_takes_its_bases_category_and_foreign_errors_have_none() -> None:
    assert category_of(InvalidClusterDocument("x")) == "InvalidInput"
    assert category_of(ValueError("x")) is None
    assert category_of(BraidError("x")) is None
    assert category_class("Fenced") is FencedError
    assert category_class("NotFound") is NotFoundError
