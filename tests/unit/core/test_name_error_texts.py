"""The text of topic-name errors: a bad name is quoted whole up to 80 characters, cut in the
middle beyond (40 characters, ``...``, the last 20), so an error never echoes a huge input but
always shows both ends of it."""

from __future__ import annotations

import re

import pytest

from braid.core.names import InvalidTopicName, TopicName


def _short_form(length: int) -> str:
    """A four-part short name (refused: a short name has 1 or 3 parts) of ``length`` characters
    whose characters differ from their neighbours, so a cut one character off shows."""
    body = "".join(chr(ord("a") + i % 26) for i in range(length - 5))
    return f"a/b/{body}/"


@pytest.mark.parametrize("length", [79, 80])
def test_a_refused_name_of_up_to_80_characters_is_quoted_whole(length: int) -> None:
    text = _short_form(length)
    assert len(text) == length
    with pytest.raises(InvalidTopicName) as err:
        TopicName.parse(text)
    assert str(err.value) == (
        f"invalid topic name {text!r}: a short name is 'name' or 'tenant/ns/name'"
    )


@pytest.mark.parametrize("length", [81, 500])
def test_a_longer_refused_name_shows_its_first_40_and_last_20_characters(length: int) -> None:
    text = _short_form(length)
    assert len(text) == length
    with pytest.raises(InvalidTopicName) as err:
        TopicName.parse(text)
    shown = f"{text[:40]!r}...{text[-20:]!r}"
    assert str(err.value) == (
        f"invalid topic name {shown}: a short name is 'name' or 'tenant/ns/name'"
    )


def test_a_too_long_local_name_is_cut_in_the_error() -> None:
    local = "".join(chr(ord("a") + i % 26) for i in range(300))
    expected = f"local name {local[:40]!r}...{local[-20:]!r} is too long: 300 characters"
    with pytest.raises(InvalidTopicName, match=re.escape(expected)):
        TopicName.parse(f"persistent://t/ns/{local}")
