"""The errors of :class:`braid.admin.client.AdminClient`: one class per HTTP answer category.

Every failure is an :class:`AdminError`, which is also the :mod:`braid.core.errors` category of
the answer (404 not found, 409 already exists / conflict / illegal state / terminated, 400-422
invalid input, 401/403 authorization, 503 unavailable, timeouts). A Braid broker names the
category in its error body (``braid.admin.errors``); another server's bare status maps by status.
"""

from __future__ import annotations

import httpx

from braid.core.errors import (
    AlreadyExistsError,
    AuthorizationError,
    BraidError,
    ConflictError,
    DeadlineExceededError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    TopicTerminatedError,
)

_MAX_REASON = 2000


# --- errors -----------------------------------------------------------------------------------


class AdminError(BraidError):
    """The admin API refused a request, failed, or could not be reached.

    Attributes:
        reason: the server's ``reason`` (or what went wrong on the way).
        status: the HTTP status, ``None`` when no answer came.
        method, url: the request.
    """

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.reason = reason
        self.status = status
        self.method = method
        self.url = url
        super().__init__(reason if status is None else f"{reason} (HTTP {status})")


class AdminNotFoundError(AdminError, NotFoundError):
    """404: the tenant, namespace, topic, segment or subscription does not exist."""


class AdminAlreadyExistsError(AdminError, AlreadyExistsError):
    """409: creating something that exists."""


class AdminConflictError(AdminError, ConflictError):
    """409: a concurrent change won (an operation in flight, a lost compare-and-swap). Retriable."""


class AdminIllegalStateError(AdminError, IllegalStateError):
    """409: not valid in the current state (a sealed segment, segments not adjacent, in use)."""


class AdminTopicTerminatedError(AdminError, TopicTerminatedError):
    """409: the topic or segment is terminated."""


class AdminInvalidInputError(AdminError, InvalidInputError):
    """400/412/422: an invalid name, body or parameter."""


class AdminAuthorizationError(AdminError, AuthorizationError):
    """401/403: not permitted."""


class AdminAuthenticationError(AdminAuthorizationError):
    """401: no credentials, or credentials the broker does not accept."""


class AdminUnavailableError(AdminError, ServiceUnavailableError):
    """503 (no controller leader right now, shutting down) or no broker answers. Retriable."""


class AdminTimeoutError(AdminError, DeadlineExceededError):
    """No answer before the client's timeout. Retriable."""


# The category a Braid broker names in its error body (``braid.admin.errors``), most useful
# when one status covers several categories (409).
_BY_CATEGORY: dict[str, type[AdminError]] = {
    "NotFound": AdminNotFoundError,
    "AlreadyExists": AdminAlreadyExistsError,
    "Conflict": AdminConflictError,
    "IllegalState": AdminIllegalStateError,
    "TopicTerminated": AdminTopicTerminatedError,
    "InvalidInput": AdminInvalidInputError,
    "PreconditionFailed": AdminInvalidInputError,
    "Authorization": AdminAuthorizationError,
    "ServiceUnavailable": AdminUnavailableError,
    "Timeout": AdminTimeoutError,
}

_BY_STATUS: dict[int, type[AdminError]] = {
    400: AdminInvalidInputError,
    401: AdminAuthenticationError,
    403: AdminAuthorizationError,
    404: AdminNotFoundError,
    405: AdminInvalidInputError,
    409: AdminConflictError,
    412: AdminInvalidInputError,
    422: AdminInvalidInputError,
    503: AdminUnavailableError,
    504: AdminTimeoutError,
}


def error_from_response(response: httpx.Response) -> AdminError:
    status = response.status_code
    reason: str | None = None
    category: object = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("reason"), str):
            reason = body["reason"]
        category = body.get("category")
    if not reason:
        reason = response.text.strip()[:_MAX_REASON] or response.reason_phrase or "error"
    cls: type[AdminError] = AdminError
    if status < 500 or status in (503, 504):
        cls = _BY_STATUS.get(status, AdminError)
        if isinstance(category, str) and category in _BY_CATEGORY and status < 500:
            cls = _BY_CATEGORY[category]
    request = response.request
    return cls(reason, status=status, method=request.method, url=str(request.url))


__all__ = [
    "AdminAlreadyExistsError",
    "AdminAuthenticationError",
    "AdminAuthorizationError",
    "AdminConflictError",
    "AdminError",
    "AdminIllegalStateError",
    "AdminInvalidInputError",
    "AdminNotFoundError",
    "AdminTimeoutError",
    "AdminTopicTerminatedError",
    "AdminUnavailableError",
    "error_from_response",
]
