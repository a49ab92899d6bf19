"""broker.conf value parsing: durations, byte quantities, fractions, rates, integers, booleans."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.units import (
    InvalidConfigValueError,
    parse_bool,
    parse_bytes,
    parse_duration_ms,
    parse_fraction,
    parse_int,
    parse_rate,
)


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("60s", 60_000),
        ("1m", 60_000),
        ("5m", 300_000),
        ("10s", 10_000),
        ("250ms", 250),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("1.5s", 1_500),
        ("0.5m", 30_000),
        (" 60 s ", 60_000),
        ("60S", 60_000),
        ("0s", 0),
        ("60", 60_000),  # a bare number is seconds
    ],
)
def test_duration_with_each_unit_parses_to_milliseconds(text: str, expected_ms: int) -> None:
    assert parse_duration_ms(text) == expected_ms
    assert isinstance(parse_duration_ms(text), int)


@pytest.mark.parametrize(
    "text", ["", "s", "-1s", "1x", "1 minute", "1mo", "0.0001s", "1e3s", "inf", "1s2", "nan"]
)
def test_malformed_duration_is_rejected_with_a_typed_error(text: str) -> None:
    with pytest.raises(InvalidConfigValueError):
        parse_duration_ms(text)


def test_unknown_duration_unit_error_names_the_accepted_units() -> None:
    with pytest.raises(InvalidConfigValueError, match=r"unknown unit 'w'.*ms, s, m, h, d"):
        parse_duration_ms("2w")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50MB", 50_000_000.0),
        ("250MB", 250_000_000.0),
        ("5MB", 5_000_000.0),
        ("25MB", 25_000_000.0),
        ("1KB", 1_000.0),
        ("2GB", 2_000_000_000.0),
        ("1TB", 1e12),
        ("1KiB", 1024.0),
        ("64MiB", 64 * 2**20),
        ("1GiB", 2.0**30),
        ("1TiB", 2.0**40),
        ("100B", 100.0),
        ("1024", 1024.0),  # a bare number is bytes
        ("1.5MB", 1_500_000.0),
        (" 50 MB ", 50_000_000.0),
    ],
)
def test_byte_quantity_uses_decimal_si_and_binary_iec_units(text: str, expected: float) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["50mb", "50Mb", "50M", "-5MB", "MB", "5 XB", "1e6"])
def test_ambiguous_or_malformed_byte_quantity_is_rejected(text: str) -> None:
    with pytest.raises(InvalidConfigValueError):
        parse_bytes(text)


def test_byte_quantity_too_large_for_a_float_is_rejected() -> None:
    with pytest.raises(InvalidConfigValueError, match="too large"):
        parse_bytes("9" * 400 + "TB")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("25%", 0.25), ("100%", 1.0), ("0%", 0.0), ("12.5%", 0.125), ("0.25", 0.25), ("2", 2.0)],
)
def test_fraction_parses_percent_or_bare_fraction(text: str, expected: float) -> None:
    assert parse_fraction(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["25 percent", "-5%", "%", "25%%", "abc"])
def test_malformed_fraction_is_rejected(text: str) -> None:
    with pytest.raises(InvalidConfigValueError):
        parse_fraction(text)


def test_plain_rate_accepts_numbers_and_rejects_units() -> None:
    assert parse_rate("10000") == 10_000.0
    assert parse_rate("12.5") == 12.5
    with pytest.raises(InvalidConfigValueError, match="without a unit"):
        parse_rate("10k")
    with pytest.raises(InvalidConfigValueError):
        parse_rate("-1")


def test_integer_is_plain_digits_only() -> None:
    assert parse_int("64") == 64
    assert parse_int(" 1 ") == 1
    for bad in ["", "-1", "1.0", "64s", "٣", "0x10"]:
        with pytest.raises(InvalidConfigValueError):
            parse_int(bad)


def test_boolean_is_true_or_false_only() -> None:
    assert parse_bool("true") is True
    assert parse_bool("FALSE") is False
    assert parse_bool(" True ") is True
    for bad in ["yes", "1", "", "on"]:
        with pytest.raises(InvalidConfigValueError, match="'true' or 'false'"):
            parse_bool(bad)


def test_non_string_input_is_a_typed_error_not_a_crash() -> None:
    with pytest.raises(InvalidConfigValueError):
        parse_duration_ms(60)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigValueError):
        parse_bool(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigValueError):
        parse_int(5)  # type: ignore[arg-type]


def test_config_value_error_is_an_invalid_input_error() -> None:
    assert issubclass(InvalidConfigValueError, InvalidInputError)
    assert not InvalidConfigValueError.retriable


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=12) | st.from_regex(r"\s*[0-9.]{1,6}\s*[A-Za-z%]{0,3}\s*", fullmatch=True)
)
def test_parsers_return_a_value_or_a_typed_error_for_any_text(text: str) -> None:
    for parse in (
        parse_duration_ms,
        parse_bytes,
        parse_fraction,
        parse_rate,
        parse_int,
        parse_bool,
    ):
        try:
            value = parse(text)
        except InvalidConfigValueError:
            continue
        assert not isinstance(value, bool) or parse is parse_bool
        if not isinstance(value, bool):
            assert value >= 0


HUGE = "9" * 400  # parses as a Decimal, overflows a float


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_duration_ms, None, "duration must be a string, got NoneType"),
        (parse_bytes, 5, "byte quantity must be a string, got int"),
        (parse_fraction, None, "fraction must be a string, got NoneType"),
        (parse_rate, 1.5, "rate must be a string, got float"),
        (
            parse_duration_ms,
            "soon",
            "duration 'soon' is not a non-negative number optionally followed by a unit",
        ),
        (
            parse_bytes,
            "-5MB",
            "byte quantity '-5MB' is not a non-negative number optionally followed by a unit",
        ),
        (
            parse_fraction,
            "a quarter",
            "fraction 'a quarter' is not a non-negative number optionally followed by a unit",
        ),
        (
            parse_rate,
            "5/s",
            "rate '5/s' is not a non-negative number optionally followed by a unit",
        ),
        (
            parse_duration_ms,
            "5w",
            "duration '5w' has unknown unit 'w'; use one of ms, s, m, h, d "
            "(a bare number means seconds)",
        ),
        (
            parse_duration_ms,
            "0.0001s",
            "duration '0.0001s' is not a whole number of milliseconds",
        ),
        (
            parse_bytes,
            "5XB",
            "byte quantity '5XB' has unknown unit 'XB'; use one of B, KB, MB, GB, TB, KiB, MiB, "
            "GiB, TiB (units are case-sensitive; a bare number means bytes)",
        ),
        (parse_bytes, HUGE + "TB", f"byte quantity '{HUGE}TB' is too large"),
        (
            parse_fraction,
            "25x",
            "fraction '25x' has unknown unit 'x'; write a percentage like '25%' or a bare "
            "fraction like '0.25'",
        ),
        (parse_fraction, HUGE + "%", f"fraction '{HUGE}%' is too large"),
        (parse_fraction, HUGE, f"fraction '{HUGE}' is too large"),
        (parse_rate, "5k", "rate '5k' must be a plain number without a unit"),
        (parse_rate, HUGE, f"rate '{HUGE}' is too large"),
        (parse_int, "1.5", "integer '1.5' must be a plain non-negative integer"),
        (parse_int, None, "integer None must be a plain non-negative integer"),
        (parse_bool, "yes", "boolean 'yes' must be 'true' or 'false'"),
    ],
)
def test_each_bad_value_gets_a_message_naming_the_kind_the_text_and_the_fix(
    parse: Callable[[object], object], text: object, message: str
) -> None:
    # These messages reach the operator verbatim (prefixed with the key) when start-up fails.
    with pytest.raises(InvalidConfigValueError) as info:
        parse(text)
    assert str(info.value) == message
