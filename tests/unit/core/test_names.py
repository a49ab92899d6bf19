"""Topic names: topic://, segment:// and persistent:// parsing, formatting and validation."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.names import (
    LOCAL_NAME_PATTERN,
    MAX_LOCAL_NAME_LENGTH,
    MAX_NAMESPACE_LENGTH,
    MAX_TENANT_LENGTH,
    NAMESPACE_PART_PATTERN,
    InvalidTopicName,
    NamespaceName,
    SegmentTopicName,
    TopicDomain,
    TopicName,
    check_namespace,
    check_tenant,
    format_descriptor,
    parse_descriptor,
)
from braid.core.ranges import HashRange

PARENT = TopicName(TopicDomain.TOPIC, "tenant", "ns", "my-topic")


def test_topic_name_formats_and_parses_back() -> None:
    assert str(PARENT) == "topic://tenant/ns/my-topic"
    assert TopicName.parse("topic://tenant/ns/my-topic") == PARENT
    assert PARENT.namespace_name == "tenant/ns"


def test_persistent_name_parses() -> None:
    name = TopicName.parse("persistent://public/default/orders")
    assert name.domain is TopicDomain.PERSISTENT
    assert (name.tenant, name.namespace, name.local_name) == ("public", "default", "orders")
    assert str(name) == "persistent://public/default/orders"


def test_short_name_means_public_default_in_the_default_domain() -> None:
    assert str(TopicName.parse("my-topic")) == "persistent://public/default/my-topic"
    assert (
        str(TopicName.parse("my-topic", default_domain=TopicDomain.TOPIC))
        == "topic://public/default/my-topic"
    )
    assert str(TopicName.parse("t/n/x")) == "persistent://t/n/x"


def test_short_name_with_two_parts_is_rejected() -> None:
    with pytest.raises(InvalidTopicName, match="short name"):
        TopicName.parse("ns/my-topic")


def test_segment_names_have_no_short_form() -> None:
    with pytest.raises(InvalidTopicName, match="no short form"):
        TopicName.parse("my-topic", default_domain=TopicDomain.SEGMENT)


def test_non_persistent_names_parse_in_their_own_domain() -> None:
    name = TopicName.parse("non-persistent://t/n/x")
    assert name.domain is TopicDomain.NON_PERSISTENT
    assert str(name) == "non-persistent://t/n/x"


def test_with_domain_switches_between_topic_and_persistent() -> None:
    assert str(PARENT.with_domain(TopicDomain.PERSISTENT)) == "persistent://tenant/ns/my-topic"
    with pytest.raises(InvalidTopicName):
        PARENT.with_domain(TopicDomain.SEGMENT)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kafka://t/n/x", "unknown domain 'kafka'"),
        ("topic://t/n", "found 2 '/'-separated parts"),
        ("topic://t/c/n/x", "must not contain '/'"),
        ("topic:///n/x", "tenant is empty"),
        ("topic://t//x", "namespace is empty"),
        ("topic://t/n/", "local name is empty"),
        ("topic://te nant/n/x", "tenant 'te nant' contains ' '"),
        ("topic://t/n$s/x", "namespace 'n\\$s' contains '\\$'"),
        ("topic://t/ns/a b", "U\\+0020"),
        ("topic://t/ns/a\tb", "U\\+0009"),
        ("topic://t/ns/a\u200bb", "U\\+200B"),
        ("topic://t/ns/..", "must not be '..'"),
        ("topic://../ns/x", "tenant must not be '..'"),
        ("topic://tenänt/ns/x", "tenant 'tenänt' contains 'ä'"),
    ],
)
def test_malformed_names_are_rejected_saying_which_part_and_why(text: str, message: str) -> None:
    with pytest.raises(InvalidTopicName, match=message):
        TopicName.parse(text)


def test_invalid_topic_name_is_an_invalid_input_error() -> None:
    with pytest.raises(InvalidInputError):
        TopicName.parse("topic://t/n")


def test_non_string_name_is_rejected() -> None:
    with pytest.raises(InvalidTopicName, match="must be a string"):
        TopicName.parse(42)  # type: ignore[arg-type]


def test_allowed_punctuation_in_tenant_namespace_and_local_name() -> None:
    name = TopicName.parse("persistent://my_t-1=a:b.c/ns.2/orders:v1-ü@%")
    assert name.tenant == "my_t-1=a:b.c"
    assert name.local_name == "orders:v1-ü@%"


def test_segment_name_from_parent_range_and_id() -> None:
    seg = SegmentTopicName.of(PARENT, HashRange(0x0000, 0x7FFF), 1)
    assert str(seg) == "segment://tenant/ns/my-topic/0000-7fff-1"
    assert seg.descriptor == "0000-7fff-1"


def test_segment_name_of_the_full_range() -> None:
    seg = SegmentTopicName.of(PARENT, HashRange.full(), 0)
    assert str(seg) == "segment://tenant/ns/my-topic/0000-ffff-0"


def test_segment_name_parses_back_into_parent_range_and_id() -> None:
    seg = SegmentTopicName.parse("segment://tenant/ns/my-topic/0000-7fff-1")
    assert seg.parent == PARENT
    assert seg.hash_range == HashRange(0, 0x7FFF)
    assert seg.segment_id == 1


def test_descriptor_with_a_larger_id() -> None:
    assert format_descriptor(HashRange(0, 0x7FFF), 3) == "0000-7fff-3"
    assert parse_descriptor("0000-7fff-3") == (HashRange(0, 0x7FFF), 3)
    assert parse_descriptor("8000-ffff-1234567") == (HashRange(0x8000, 0xFFFF), 1234567)


def test_persistent_name_is_rejected_as_a_segment_parent() -> None:
    legacy = TopicName.parse("persistent://tenant/ns/my-topic")
    with pytest.raises(InvalidTopicName, match="must be a topic:// name"):
        SegmentTopicName.of(legacy, HashRange.full(), 0)


def test_persistent_name_is_rejected_as_a_segment_name() -> None:
    with pytest.raises(InvalidTopicName, match="expected segment://"):
        SegmentTopicName.parse("persistent://tenant/ns/my-topic")
    with pytest.raises(InvalidTopicName, match="expected segment://"):
        SegmentTopicName.parse("persistent://tenant/ns/my-topic/0000-ffff-0")


def test_topic_name_is_rejected_as_a_segment_name() -> None:
    with pytest.raises(InvalidTopicName, match="expected segment://"):
        SegmentTopicName.parse("topic://tenant/ns/my-topic")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("segment://tenant/ns/my-topic", "found 3 '/'-separated parts"),
        ("segment://tenant/ns/my-topic/0000-7FFF-1", "invalid segment descriptor"),
        ("segment://tenant/ns/my-topic/0000-7fff", "invalid segment descriptor"),
        ("segment://tenant/ns/my-topic/0000-7fff-01", "invalid segment descriptor"),
        ("segment://tenant/ns/my-topic/0000-7fff--1", "invalid segment descriptor"),
        ("segment://tenant/ns/my-topic/000-7fff-1", "invalid segment descriptor"),
        ("segment://tenant/ns/my-topic/8000-0000-1", "below its start"),
        ("segment://tenant/ns/my-topic/0000-7fff-9223372036854775808", "outside 0.."),
        ("segment://tenant/ns/a/b/0000-7fff-1", "found 5 '/'-separated parts"),
        ("segment://ten ant/ns/t/0000-7fff-1", "tenant 'ten ant'"),
    ],
)
def test_malformed_segment_names_are_rejected(text: str, message: str) -> None:
    with pytest.raises(InvalidTopicName, match=message):
        SegmentTopicName.parse(text)


def test_segment_name_as_a_generic_topic_name_and_back() -> None:
    generic = TopicName.parse("segment://tenant/ns/my-topic/0000-7fff-1")
    assert generic.domain is TopicDomain.SEGMENT
    assert generic.local_name == "my-topic/0000-7fff-1"
    seg = generic.as_segment()
    assert seg.topic_name == generic
    assert str(seg) == str(generic)


def test_as_segment_on_a_plain_topic_fails() -> None:
    with pytest.raises(InvalidTopicName, match="not a segment"):
        PARENT.as_segment()


def test_negative_or_non_integer_segment_id_is_rejected() -> None:
    with pytest.raises(InvalidTopicName, match="segment id"):
        SegmentTopicName.of(PARENT, HashRange.full(), -1)
    with pytest.raises(InvalidTopicName, match="segment id"):
        SegmentTopicName.of(PARENT, HashRange.full(), True)


# --------------------------------------------------------------------------- namespaces


def test_namespace_name_parses_and_formats() -> None:
    name = NamespaceName.parse("my_t-1=a:b.c/ns.2")
    assert (name.tenant, name.namespace) == ("my_t-1=a:b.c", "ns.2")
    assert str(name) == "my_t-1=a:b.c/ns.2"
    assert name == NamespaceName("my_t-1=a:b.c", "ns.2")
    assert TopicName.parse("persistent://my_t-1=a:b.c/ns.2/x").namespace_name == str(name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("public", "expected tenant/namespace"),
        ("public/default/x", "expected tenant/namespace"),
        ("/default", "tenant is empty"),
        ("public/", "namespace is empty"),
        ("pub lic/default", "tenant 'pub lic' contains ' '"),
        ("public/def$ault", "namespace 'def\\$ault' contains '\\$'"),
        ("../default", "tenant must not be '..'"),
        ("public/.", "namespace must not be '.'"),
        ("tenänt/ns", "tenant 'tenänt' contains 'ä'"),
    ],
)
def test_malformed_namespace_names_are_rejected_saying_which_part(text: str, message: str) -> None:
    with pytest.raises(InvalidTopicName, match=message):
        NamespaceName.parse(text)


def test_namespace_name_of_a_non_string_is_rejected() -> None:
    with pytest.raises(InvalidTopicName, match="must be a string"):
        NamespaceName.parse(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTopicName, match="tenant must be a string"):
        NamespaceName(7, "ns")  # type: ignore[arg-type]


def test_tenant_and_namespace_checks_return_the_name() -> None:
    assert check_tenant("acme") == "acme"
    assert check_namespace("orders.v2") == "orders.v2"
    with pytest.raises(InvalidTopicName, match="tenant 'a/b' contains '/'"):
        check_tenant("a/b")
    with pytest.raises(InvalidTopicName, match="namespace is empty"):
        check_namespace("")


def _is_valid_part(text: str) -> bool:
    """The documented rule, written independently of the module: ASCII letters, digits and
    ``_ - = : .``, at least one character, and neither ``.`` nor ``..``."""
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=:.")
    return bool(text) and text not in (".", "..") and all(ch in allowed for ch in text)


@settings(max_examples=300)
@given(st.text(st.sampled_from("aZ09_-=:./ $ä\t\u200b"), max_size=6))
def test_tenant_and_namespace_checks_follow_the_documented_rule(text: str) -> None:
    for check in (check_tenant, check_namespace):
        if _is_valid_part(text):
            assert check(text) == text
        else:
            with pytest.raises(InvalidTopicName):
                check(text)
    # A part accepted here is accepted inside a topic name too (one rule for both).
    if _is_valid_part(text):
        assert TopicName(TopicDomain.PERSISTENT, text, text, "t").namespace_name == f"{text}/{text}"


_NAME_PART = st.text("abcXYZ019_-=:.", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)
_LOCAL = st.text(
    st.characters(
        exclude_categories=("Cc", "Cf", "Cs", "Cn", "Zs", "Zl", "Zp"), exclude_characters="/"
    ),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", "..") and not any(c.isspace() for c in s))


@settings(max_examples=200)
@given(
    _NAME_PART,
    _NAME_PART,
    _LOCAL,
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF),
    st.integers(0, 2**63 - 1),
)
def test_any_valid_segment_name_round_trips(
    tenant: str, ns: str, local: str, a: int, b: int, sid: int
) -> None:
    parent = TopicName(TopicDomain.TOPIC, tenant, ns, local)
    assert TopicName.parse(str(parent)) == parent
    seg = SegmentTopicName.of(parent, HashRange(min(a, b), max(a, b)), sid)
    assert SegmentTopicName.parse(str(seg)) == seg
    assert parse_descriptor(seg.descriptor) == (seg.hash_range, sid)


# --------------------------------------------------------------------------- exact messages


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: TopicName.parse(42), "a topic name must be a string, got int"),
        (lambda: NamespaceName.parse(None), "a namespace name must be a string, got NoneType"),
        (
            lambda: TopicName("topic", "t", "ns", "x"),
            "domain must be a TopicDomain, got 'topic'",
        ),
        (
            lambda: TopicName(TopicDomain.PERSISTENT, 7, "ns", "x"),
            "tenant must be a string, got int",
        ),
        (
            lambda: TopicName(TopicDomain.PERSISTENT, "t", "ns", b"x"),
            "local name must be a string, got bytes",
        ),
        (
            lambda: TopicName(TopicDomain.PERSISTENT, "t", "ns", "a/b"),
            "local name 'a/b' must not contain '/'",
        ),
        (
            lambda: TopicName.parse("topic://t/ns/."),
            "invalid topic name 'topic://t/ns/.': local name must not be '.'",
        ),
        (
            lambda: TopicName(TopicDomain.SEGMENT, "t", "ns", "x"),
            "segment local name 'x' must be '<name>/<descriptor>'",
        ),
        (
            lambda: TopicName(TopicDomain.SEGMENT, "t", "ns", None),
            "segment local name None must be '<name>/<descriptor>'",
        ),
        (
            lambda: TopicName(TopicDomain.PERSISTENT, "t", "ns", ""),
            "local name is empty",
        ),
        (lambda: NamespaceName.parse(5), "a namespace name must be a string, got int"),
        (
            lambda: TopicName.parse("kafka://t/n/x"),
            "invalid topic name 'kafka://t/n/x': unknown domain 'kafka' (expected topic, segment, "
            "persistent or non-persistent)",
        ),
        (
            lambda: TopicName.parse("topic://t/n"),
            "invalid topic name 'topic://t/n': expected topic://tenant/ns/name, found 2 "
            "'/'-separated parts",
        ),
        (
            lambda: SegmentTopicName.parse("segment://t/ns/x"),
            "invalid topic name 'segment://t/ns/x': expected segment://tenant/ns/name/descriptor, "
            "found 3 '/'-separated parts",
        ),
        (
            lambda: PARENT.with_domain(TopicDomain.SEGMENT),
            "cannot change topic://tenant/ns/my-topic to or from the segment domain",
        ),
        (
            lambda: SegmentTopicName("x", HashRange.full(), 0),
            "segment parent must be a TopicName, got 'x'",
        ),
        (
            lambda: SegmentTopicName(PARENT, (0, 1), 0),
            "segment hash range must be a HashRange: (0, 1)",
        ),
        (lambda: parse_descriptor(5), "a segment descriptor must be a string, got 5"),
        (
            lambda: parse_descriptor("0000-7FFF-1"),
            "invalid segment descriptor '0000-7FFF-1': expected '<start>-<end>-<id>' with four "
            "lowercase hex digits per bound and a decimal id without leading zeros, "
            "e.g. '0000-7fff-1'",
        ),
        (
            lambda: SegmentTopicName.of(PARENT, HashRange.full(), 2**63),
            "segment id 9223372036854775808 is outside 0..9223372036854775807",
        ),
        (
            lambda: TopicName.parse("persistent://t/ns/a://b"),
            "invalid topic name 'persistent://t/ns/a://b': expected persistent://tenant/ns/name, "
            "found 5 '/'-separated parts (the local name must not contain '/'; four-part cluster "
            "names are unsupported)",
        ),
    ],
)
def test_each_bad_name_gets_its_own_message(build: Callable[[], object], message: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        build()
    assert str(info.value) == message


def test_the_largest_segment_id_is_accepted() -> None:
    seg = SegmentTopicName.of(PARENT, HashRange.full(), 2**63 - 1)
    assert SegmentTopicName.parse(str(seg)).segment_id == 2**63 - 1


@settings(max_examples=500)
@given(st.characters())
def test_a_local_name_character_is_refused_exactly_when_the_rule_says(ch: str) -> None:
    # The documented rule, written with str.isspace and the Unicode categories directly.
    category = unicodedata.category(ch)
    refused = (
        ch == "/"
        or ch.isspace()
        or category.startswith("Z")
        or (category.startswith("C") and category != "Co")
    )
    if refused:
        with pytest.raises(InvalidTopicName):
            TopicName(TopicDomain.PERSISTENT, "t", "ns", f"a{ch}b")
    else:
        assert TopicName(TopicDomain.PERSISTENT, "t", "ns", f"a{ch}b").local_name == f"a{ch}b"


@pytest.mark.parametrize(
    ("build", "limit"),
    [
        (lambda n: check_tenant("t" * n), MAX_TENANT_LENGTH),
        (lambda n: check_namespace("n" * n), MAX_NAMESPACE_LENGTH),
        (lambda n: TopicName(TopicDomain.PERSISTENT, "t", "ns", "x" * n), MAX_LOCAL_NAME_LENGTH),
        (lambda n: TopicName.parse("persistent://t/ns/" + "é" * n), MAX_LOCAL_NAME_LENGTH),
    ],
)
def test_names_are_accepted_up_to_their_length_limit(
    build: Callable[[int], object], limit: int
) -> None:
    build(limit)
    with pytest.raises(
        InvalidTopicName, match=f"is too long: {limit + 1} characters, at most {limit}"
    ):
        build(limit + 1)


def test_a_ten_thousand_character_tenant_is_refused_without_echoing_it() -> None:
    with pytest.raises(InvalidTopicName) as info:
        check_tenant("a" * 10_000)
    assert len(str(info.value)) < 200


@settings(max_examples=300)
@given(st.text(max_size=80))
def test_the_schema_pattern_never_refuses_a_name_the_rule_accepts(text: str) -> None:
    # The REST schema states NAMESPACE_PART_PATTERN / LOCAL_NAME_PATTERN; the code's rule may be
    # stricter (".", "..", control characters) but never more lenient than what it documents.
    try:
        check_tenant(text)
    except InvalidTopicName:
        pass
    else:
        assert re.fullmatch(NAMESPACE_PART_PATTERN.strip("^$"), text)
    try:
        TopicName(TopicDomain.PERSISTENT, "t", "ns", text)
    except InvalidTopicName:
        pass
    else:
        assert re.fullmatch(LOCAL_NAME_PATTERN.strip("^$"), text)


@settings(max_examples=200)
@given(text=st.text(max_size=40), domain=st.sampled_from(list(TopicDomain)))
def test_a_remembered_parse_answers_as_a_fresh_one_every_time(
    text: str, domain: TopicDomain
) -> None:
    """The parse cache is invisible: the same name or the same error, on the first call and on
    every later one (an error is never remembered as a name)."""

    def outcome(parse: Callable[[str, TopicDomain], TopicName]) -> object:
        try:
            return parse(text, domain)
        except InvalidTopicName as exc:
            return str(exc)

    fresh = outcome(TopicName._parse)  # the parse itself, never remembered
    assert outcome(TopicName.parse) == fresh
    assert outcome(TopicName.parse) == fresh
