"""Path and value rules shared by every metadata backend (validated in one place).

A path is absolute and ``/``-separated: ``/`` is the root; every other path has non-empty
segments, no trailing slash, no ``.``/``..`` segment and no NUL or control characters. Values are at
most :data:`~braid.metadata.api.MAX_VALUE_SIZE` bytes so the same document fits every backend.
"""

from __future__ import annotations

from braid.core.errors import InvalidInputError
from braid.metadata.api import MAX_VALUE_SIZE, InvalidPath, ValueTooLarge

ROOT = "/"


def validate_path(path: object) -> str:
    """Return ``path`` if it is a valid metadata path, else raise :class:`InvalidPath` with why."""
    if not isinstance(path, str):
        raise InvalidPath(f"a path must be a str, got {type(path).__name__}")
    if path == ROOT:
        return path
    if not path:
        raise InvalidPath("the path is empty")
    if not path.startswith("/"):
        raise InvalidPath(f"path {path!r} is not absolute (must start with '/')")
    if path.endswith("/"):
        raise InvalidPath(f"path {path!r} has a trailing slash")
    for ch in path:
        if ch < " " or ch == "\x7f":
            raise InvalidPath(f"path {path!r} contains a control character {ch!r}")
    for segment in path[1:].split("/"):
        if not segment:
            raise InvalidPath(f"path {path!r} has an empty segment")
        if segment in (".", ".."):
            raise InvalidPath(f"path {path!r} has a relative segment {segment!r}")
    return path


def validate_writable_path(path: object) -> str:
    """Like :func:`validate_path`, but the root itself cannot be written or deleted."""
    checked = validate_path(path)
    if checked == ROOT:
        raise InvalidPath("the root '/' cannot be written or deleted")
    return checked


def validate_value(value: object) -> bytes:
    """Return ``value`` as bytes if it fits, else raise :class:`ValueTooLarge`.

    A value that is not bytes-like raises :class:`~braid.core.errors.InvalidInputError`.
    """
    if isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise InvalidInputError(f"a value must be bytes, got {type(value).__name__}")
    if len(value) > MAX_VALUE_SIZE:
        raise ValueTooLarge(
            f"value of {len(value)} bytes exceeds the limit of {MAX_VALUE_SIZE} bytes"
        )
    return value


def validate_expected_version(expected_version: object) -> int | None:
    """Check ``expected_version`` is ``None``, ``-1`` or a non-negative int."""
    if expected_version is None:
        return None
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise InvalidInputError(f"expected_version must be an int or None: {expected_version!r}")
    if expected_version < -1:
        raise InvalidInputError(f"expected_version must be -1, None or >= 0: {expected_version}")
    return expected_version


def parent_of(path: str) -> str:
    """The parent of a validated non-root path (``/a/b`` -> ``/a``, ``/a`` -> ``/``)."""
    index = path.rfind("/")
    return ROOT if index == 0 else path[:index]


def name_of(path: str) -> str:
    """The last segment of a validated non-root path."""
    return path[path.rfind("/") + 1 :]


def join(parent: str, name: str) -> str:
    """The child ``name`` of ``parent``."""
    return f"/{name}" if parent == ROOT else f"{parent}/{name}"


def ancestors(path: str) -> list[str]:
    """Proper ancestors of a validated non-root path, root excluded, outermost first."""
    parts = path[1:].split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
