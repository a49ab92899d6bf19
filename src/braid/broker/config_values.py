"""Parsers of ``broker.conf`` values: each takes the text of one key and returns its value or
raises ``ValueError`` with what was expected (``braid.broker.config`` names the key).

Pure functions, no I/O; one per kind of value (booleans, bounded integers, fractions, host names,
URLs, listener lists, ...), shared by every key of that kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from braid.broker.backlog_quota import InvalidBacklogQuota, RetentionPolicy
from braid.broker.schemas.model import InvalidSchemaSetting, SchemaCompatibilityStrategy

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


def parse_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number between 0 and 1, such as 0.95") from None
    if not 0.0 < value <= 1.0:
        raise ValueError("expected a number above 0 and at most 1, such as 0.95")
    return value


def parse_ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a number between 0 and 1")
    return value


def parse_int(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise ValueError("expected an integer") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f" and at most {maximum}"
            raise ValueError(f"expected an integer at least {minimum}{upper}")
        return value

    return parse


_HOST = re.compile(r"^[A-Za-z0-9._:\-\[\]]+$")


def parse_number(minimum: float, maximum: float | None = None) -> Callable[[str], float]:
    """A parser of decimal numbers in ``minimum..maximum`` (``maximum`` ``None``: no bound)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f" and at most {maximum:g}"
            raise ValueError(f"expected a number at least {minimum:g}{upper}")
        return value

    return parse


def parse_host(text: str) -> str:
    if not _HOST.match(text):
        raise ValueError("expected a host name or IP address")
    return text


def parse_name(text: str) -> str:
    if not re.match(r"^[A-Za-z0-9_.\-]+$", text):
        raise ValueError("expected letters, digits, '_', '-' or '.'")
    return text


def parse_url(text: str) -> str:
    if "://" not in text:
        raise ValueError("expected a URL such as sqlite:///path/metadata.db or zk://host:2181")
    return text


def parse_metadata_path(text: str) -> str:
    """An absolute metadata-store path (``/admin/bookie-clusters``)."""
    from braid.metadata.api import InvalidPath
    from braid.metadata.paths import validate_path

    try:
        path = validate_path(text)
    except InvalidPath as exc:
        raise ValueError(f"expected an absolute metadata path: {exc}") from None
    if path == "/":
        raise ValueError("expected a metadata path below the root, e.g. /admin/bookie-clusters")
    return path


def parse_path(text: str) -> Path:
    return Path(text).expanduser()


def parse_gc_thresholds(text: str) -> tuple[int, int, int]:
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [int(p, 10) for p in parts]
    except ValueError:
        raise ValueError("expected three integers gen0,gen1,gen2 (e.g. 200000,20,100)") from None
    if len(values) != 3 or values[0] < 1 or values[1] < 1 or values[2] < 1:
        raise ValueError("expected three positive integers gen0,gen1,gen2 (e.g. 200000,20,100)")
    return values[0], values[1], values[2]


def parse_strategy(text: str) -> SchemaCompatibilityStrategy:
    try:
        strategy = SchemaCompatibilityStrategy.parse(text)
    except InvalidSchemaSetting as exc:
        raise ValueError(str(exc)) from None
    if strategy is SchemaCompatibilityStrategy.UNDEFINED:
        raise ValueError("the broker's strategy cannot be UNDEFINED")
    return strategy


def parse_backlog_policy(text: str) -> RetentionPolicy:
    try:
        return RetentionPolicy.parse(text)
    except InvalidBacklogQuota as exc:
        raise ValueError(str(exc)) from None


def parse_topic_type(text: str) -> str:
    if text not in ("non-partitioned", "partitioned"):
        raise ValueError("expected non-partitioned or partitioned")
    return text


_LISTENER = re.compile(r"^[A-Za-z0-9_.\-]+:pulsar(\+ssl)?://[A-Za-z0-9._\-\[\]:]+:\d+$")


def parse_bookie_clusters(text: str) -> tuple[tuple[str, str], ...]:
    """``name=uri;name2=uri2`` (empty: none)."""
    out: list[tuple[str, str]] = []
    for part in text.split(";"):
        if not part.strip():
            continue
        name, sep, uri = part.partition("=")
        if not sep or not name.strip() or not uri.strip():
            raise ValueError(f"expected name=metadataServiceUri, got {part.strip()!r}")
        out.append((parse_name(name.strip()), parse_url(uri.strip())))
    return tuple(out)


def parse_host_list(text: str) -> tuple[str, ...]:
    """Host names or addresses separated by commas (``*`` stands for any host)."""
    entries = tuple(p.strip() for p in text.split(",") if p.strip())
    for entry in entries:
        if entry != "*" and not _HOST.match(entry):
            raise ValueError(f"expected host names separated by commas, got {entry!r}")
    return entries


def parse_listeners(text: str) -> tuple[str, ...]:
    entries = tuple(p.strip() for p in text.split(",") if p.strip())
    for entry in entries:
        if not _LISTENER.match(entry):
            raise ValueError(
                f"expected name:pulsar://host:port entries separated by commas, got {entry!r}"
            )
    return entries


def parse_text(text: str) -> str:
    """Any text, as written (key material, roles, claims)."""
    return text


def parse_roles(text: str) -> tuple[str, ...]:
    """Role names separated by commas (``superUserRoles``); no control characters."""
    roles = tuple(part.strip() for part in text.split(",") if part.strip())
    for role in roles:
        if any(ord(c) < 32 for c in role):
            raise ValueError(f"{role!r} is not a role name")
    return roles


def parse_class_names(text: str) -> tuple[str, ...]:
    """``a.b.C,d.e.F``: Java class names separated by commas (``authenticationProviders``)."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if not re.match(r"^[A-Za-z_$][A-Za-z0-9_$.]*$", name):
            raise ValueError(f"{name!r} is not a class name")
    return names


__all__ = [
    "parse_backlog_policy",
    "parse_bookie_clusters",
    "parse_bool",
    "parse_class_names",
    "parse_fraction",
    "parse_gc_thresholds",
    "parse_host",
    "parse_host_list",
    "parse_int",
    "parse_listeners",
    "parse_name",
    "parse_number",
    "parse_path",
    "parse_ratio",
    "parse_roles",
    "parse_strategy",
    "parse_text",
    "parse_topic_type",
    "parse_url",
]
