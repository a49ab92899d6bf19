"""Parsing of unit-suffixed ``broker.conf`` values (durations, byte rates, percentages).

PIP-483's configuration table writes its defaults with units (``60s``, ``1m``, ``50MB``, ``25%``).
These helpers turn such strings into the plain numbers the pure core works with: durations in
integer milliseconds, byte quantities as float bytes, fractions as floats (``25%`` -> ``0.25``).

Accepted forms (surrounding whitespace is ignored, a space between number and unit is allowed):

* **Durations** -> integer milliseconds. Units ``ms``, ``s``, ``m`` (minutes), ``h``, ``d``,
  case-insensitive (there is no month unit, so ``M`` cannot be misread). A bare number means
  **seconds**, the unit Pulsar's duration settings mostly use. Decimals are allowed when the
  result is a whole number of milliseconds (``1.5s`` = 1500 ms, ``0.0001s`` is rejected).
* **Byte quantities** -> float bytes. ``B``; decimal SI ``KB`` = 10^3, ``MB`` = 10^6,
  ``GB`` = 10^9, ``TB`` = 10^12 (so ``50MB`` = 50,000,000 bytes, matching PIP-483's example
  record where 64 MB/s is written ``64000000.0``); binary IEC ``KiB`` = 2^10, ``MiB`` = 2^20,
  ``GiB`` = 2^30, ``TiB`` = 2^40. Units are case-sensitive because ``Mb`` (megabits) would be a
  different quantity; a bare number means bytes.
* **Fractions**: ``25%`` -> 0.25, or a bare number taken as the fraction itself (``0.25``).
* **Plain rates** (msg/s): a bare non-negative number.
* **Booleans**: ``true`` / ``false``, case-insensitive; nothing else.

Every value must be finite and non-negative; anything else raises :class:`InvalidConfigValueError`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from braid.core.errors import InvalidInputError


class InvalidConfigValueError(InvalidInputError):
    """A configuration value could not be parsed as the expected kind of quantity."""


_NUMBER_WITH_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z%]*)\s*$")

_DURATION_UNITS_MS: dict[str, int] = {
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}

_BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}


def _split(text: str, what: str) -> tuple[Decimal, str]:
    """Split ``text`` into its non-negative decimal number and its (possibly empty) unit."""
    if not isinstance(text, str):
        raise InvalidConfigValueError(f"{what} must be a string, got {type(text).__name__}")
    match = _NUMBER_WITH_UNIT.match(text)
    if match is None:
        raise InvalidConfigValueError(
            f"{what} {text!r} is not a non-negative number optionally followed by a unit"
        )
    # The pattern admits only digits with at most one point, which Decimal always accepts.
    return Decimal(match.group(1)), match.group(2)


def parse_duration_ms(text: str) -> int:
    """Parse a duration such as ``"60s"``, ``"1m"``, ``"250ms"`` or ``"60"`` into milliseconds.

    Raises:
        InvalidConfigValueError: malformed text, an unknown unit, or a value that is not a whole
            number of milliseconds.
    """
    number, unit = _split(text, "duration")
    key = unit.lower() if unit else "s"
    factor = _DURATION_UNITS_MS.get(key)
    if factor is None:
        raise InvalidConfigValueError(
            f"duration {text!r} has unknown unit {unit!r}; use one of "
            f"{', '.join(_DURATION_UNITS_MS)} (a bare number means seconds)"
        )
    millis = number * factor
    if millis != millis.to_integral_value():
        raise InvalidConfigValueError(f"duration {text!r} is not a whole number of milliseconds")
    return int(millis)


def parse_bytes(text: str) -> float:
    """Parse a byte quantity such as ``"50MB"``, ``"64MiB"`` or ``"1024"`` into bytes.

    ``MB`` is 10^6 bytes and ``MiB`` is 2^20 bytes; see the module docstring.

    Raises:
        InvalidConfigValueError: malformed text or an unknown unit.
    """
    number, unit = _split(text, "byte quantity")
    factor = _BYTE_UNITS.get(unit or "B")
    if factor is None:
        raise InvalidConfigValueError(
            f"byte quantity {text!r} has unknown unit {unit!r}; use one of "
            f"{', '.join(_BYTE_UNITS)} (units are case-sensitive; a bare number means bytes)"
        )
    return _finite(float(number * factor), text, "byte quantity")


def parse_fraction(text: str) -> float:
    """Parse ``"25%"`` (-> 0.25) or a bare fraction ``"0.25"``.

    Raises:
        InvalidConfigValueError: malformed text or a unit other than ``%``.
    """
    number, unit = _split(text, "fraction")
    if unit == "%":
        return _finite(float(number / 100), text, "fraction")
    if unit:
        raise InvalidConfigValueError(
            f"fraction {text!r} has unknown unit {unit!r}; write a percentage like '25%' "
            "or a bare fraction like '0.25'"
        )
    return _finite(float(number), text, "fraction")


def parse_rate(text: str) -> float:
    """Parse a plain non-negative rate such as ``"10000"`` (messages per second).

    Raises:
        InvalidConfigValueError: malformed text or any unit suffix.
    """
    number, unit = _split(text, "rate")
    if unit:
        raise InvalidConfigValueError(f"rate {text!r} must be a plain number without a unit")
    return _finite(float(number), text, "rate")


def parse_int(text: str) -> int:
    """Parse a plain non-negative integer such as ``"64"``.

    Raises:
        InvalidConfigValueError: malformed text, a decimal point, or a unit suffix.
    """
    stripped = text.strip() if isinstance(text, str) else text
    if not isinstance(stripped, str) or not stripped.isascii() or not stripped.isdigit():
        raise InvalidConfigValueError(f"integer {text!r} must be a plain non-negative integer")
    return int(stripped)


def parse_bool(text: str) -> bool:
    """Parse ``"true"`` or ``"false"`` (case-insensitive); anything else is an error.

    Raises:
        InvalidConfigValueError: any other text (``"yes"``, ``"1"``, ``""``, ...).
    """
    lowered = text.strip().lower() if isinstance(text, str) else None
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise InvalidConfigValueError(f"boolean {text!r} must be 'true' or 'false'")


def _finite(value: float, text: str, what: str) -> float:
    # Decimal accepts arbitrarily large numbers; a float overflow would silently become inf.
    if not math.isfinite(value):
        raise InvalidConfigValueError(f"{what} {text!r} is too large")
    return value


__all__ = [
    "InvalidConfigValueError",
    "parse_bool",
    "parse_bytes",
    "parse_duration_ms",
    "parse_fraction",
    "parse_int",
    "parse_rate",
]
