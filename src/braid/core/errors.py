"""The root of Braid's error hierarchy and its typed categories.

Every error Braid raises on purpose derives from :class:`BraidError`. Each category carries a
``retriable`` flag (``docs/protocol.md#errors-on-the-wire``): callers retry retriable errors with
backoff and surface the others. Lower layers (metadata, storage, ledger, broker) subclass these
categories with their own precise types, and translate foreign exceptions (sqlite3, kazoo,
OSError, ...) once, at their boundary, so a user never sees an exception from a library Braid
happens to use.
"""

from __future__ import annotations

from typing import ClassVar


class BraidError(Exception):
    """Base class of every error Braid raises deliberately."""

    retriable: ClassVar[bool] = False


class InvalidInputError(BraidError, ValueError):
    """The caller passed something malformed (a name, a range, a document, a path, a frame)."""


class NotFoundError(BraidError, LookupError):
    """The named thing (topic, segment, node, ledger, cursor, ...) does not exist."""


class AlreadyExistsError(BraidError):
    """Creating something that already exists."""


class ConflictError(BraidError):
    """A concurrent change won: a compare-and-swap lost, or the state moved underneath the caller.

    Retriable: re-read and try again.
    """

    retriable = True


class IllegalStateError(BraidError):
    """The operation is not valid in the current state (sealed segment, not leader, ...)."""


class AlreadyClosedError(IllegalStateError):
    """The object was closed; create a new one."""


class DeadlineExceededError(BraidError, TimeoutError):
    """An operation did not complete before its deadline (also a builtin ``TimeoutError``)."""

    retriable = True


class ServiceUnavailableError(BraidError):
    """A dependency (metadata store, bookie, broker) is temporarily unavailable. Retriable."""

    retriable = True


class FencedError(BraidError):
    """This writer was fenced: another owner took over. Never retriable by the same writer."""


class TopicTerminatedError(BraidError):
    """The topic (or segment) was terminated: it accepts no more writes."""


class AuthorizationError(BraidError):
    """The caller is authenticated but not permitted."""


#: Each category's name as error bodies carry it (``{"category": "NotFound"}`` over REST), most
#: specific first: a class may belong to two categories through its bases.
CATEGORIES: tuple[tuple[type[BraidError], str], ...] = (
    (NotFoundError, "NotFound"),
    (AlreadyExistsError, "AlreadyExists"),
    (TopicTerminatedError, "TopicTerminated"),
    (ConflictError, "Conflict"),
    (IllegalStateError, "IllegalState"),
    (InvalidInputError, "InvalidInput"),
    (AuthorizationError, "Authorization"),
    (ServiceUnavailableError, "ServiceUnavailable"),
    (DeadlineExceededError, "Timeout"),
    (FencedError, "Fenced"),
)


def category_of(exc: BaseException) -> str | None:
    """The category name of ``exc`` (``None`` for an exception outside Braid's categories)."""
    for cls, name in CATEGORIES:
        if isinstance(exc, cls):
            return name
    return None


def category_class(name: str) -> type[BraidError] | None:
    """The error class of a category name (``None`` if unknown), to rebuild a peer's error."""
    for cls, known in CATEGORIES:
        if known == name:
            return cls
    return None


__all__ = [
    "CATEGORIES",
    "AlreadyClosedError",
    "AlreadyExistsError",
    "AuthorizationError",
    "BraidError",
    "ConflictError",
    "DeadlineExceededError",
    "FencedError",
    "IllegalStateError",
    "InvalidInputError",
    "NotFoundError",
    "ServiceUnavailableError",
    "TopicTerminatedError",
    "category_class",
    "category_of",
]
