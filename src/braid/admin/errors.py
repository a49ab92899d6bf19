"""How the admin REST API reports errors: JSON ``{"reason": ...}`` with Pulsar's HTTP statuses.

Handlers raise Braid's typed errors; this module translates them once, at the HTTP edge:
not found -> 404, already exists / lost race / not empty -> 409, invalid names and a topic still
in use (a delete without ``force``) -> 412 (Pulsar's
``PRECONDITION_FAILED`` for names and preconditions; also when the path parameter's schema refuses
the name), other bad input -> 400, unavailable or
timed out -> 503, unauthorised -> 403, a forced delete the broker does not allow -> 405.
Anything else is a 500 whose reason names the exception (a
bug to see).

Besides Pulsar's ``reason`` the body names the error's :mod:`braid.core.errors` category and
whether retrying can help — ``{"reason": ..., "category": "IllegalState", "retriable": false}`` —
because one status covers several categories (409 is an existing name, a lost race *or* a sealed
segment) and a client (``braid.admin.client``) should raise the same type the server raised.
"""

from __future__ import annotations

import functools
import logging
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from braid.admin.path_params import name_refusal
from braid.broker.errors import InvalidTopicName as BrokerInvalidTopicName
from braid.broker.errors import NotAllowedOnNonPersistent, TopicBusy
from braid.broker.resources import InvalidResourceName
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
from braid.core.errors import category_of as core_category_of
from braid.core.names import InvalidTopicName

log = logging.getLogger(__name__)


class PreconditionFailed(BraidError):
    """A request that is well-formed but not allowed in the current state (HTTP 412)."""


class ForceDeleteNotAllowed(IllegalStateError):
    """A ``force=true`` namespace or tenant delete on a broker whose ``forceDeleteNamespaceAllowed``
    / ``forceDeleteTenantAllowed`` is off (HTTP 405, as Pulsar)."""


class TopicAlreadyExists(AlreadyExistsError):
    """Creating a topic that exists (HTTP 409)."""


def status_for(exc: BaseException) -> int:
    """The HTTP status Pulsar's admin API uses for this kind of failure."""
    if isinstance(exc, ForceDeleteNotAllowed | NotAllowedOnNonPersistent):
        return 405
    if isinstance(
        exc,
        InvalidResourceName
        | InvalidTopicName
        | BrokerInvalidTopicName
        | PreconditionFailed
        | TopicBusy,
    ):
        return 412
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, AlreadyExistsError | ConflictError | IllegalStateError):
        return 409
    if isinstance(exc, TopicTerminatedError):
        return 409
    if isinstance(exc, InvalidInputError):
        return 400
    if isinstance(exc, AuthorizationError):
        return 403
    if isinstance(exc, ServiceUnavailableError | DeadlineExceededError):
        return 503
    return 500


_STATUS_CATEGORIES = {
    400: "InvalidInput",
    403: "Authorization",
    404: "NotFound",
    405: "InvalidInput",
    409: "Conflict",
    412: "PreconditionFailed",
    422: "InvalidInput",
    503: "ServiceUnavailable",
}


def category_of(exc: BaseException) -> str:
    """The :mod:`braid.core.errors` category of ``exc`` (``"Internal"`` for anything else)."""
    if isinstance(exc, PreconditionFailed):
        return "PreconditionFailed"
    return core_category_of(exc) or "Internal"


def reason(
    status: int, text: str, *, category: str | None = None, retriable: bool = False
) -> JSONResponse:
    """The error body every admin endpoint returns."""
    content = {
        "reason": text,
        "category": category or _STATUS_CATEGORIES.get(status, "Internal"),
        "retriable": retriable,
    }
    return JSONResponse(status_code=status, content=content)


def allowed_methods(request: Request) -> list[str]:
    """Every method the API serves at the request's path (what a 405's ``Allow`` lists), read
    from the OpenAPI document: routers here are composed, and Starlette names only the methods of
    the first route whose path matches (FastAPI makes one route per method)."""
    paths: dict[str, dict[str, object]] = request.app.openapi().get("paths", {})
    methods: set[str] = set()
    for template, operations in paths.items():
        if _template_regex(template).fullmatch(request.url.path):
            methods.update(method.upper() for method in operations)
    return sorted(methods)


@functools.lru_cache(maxsize=512)
def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}/]+\}", template)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


def install_error_handlers(app: FastAPI) -> None:
    """Make every error leave the app as ``{"reason": ...}`` with the right status."""

    async def on_braid_error(_: Request, exc: Exception) -> JSONResponse:
        status = status_for(exc)
        if status == 500:  # a bug; a 503 (storage read-only, store unreachable) is a state
            log.error("admin request failed: %s", exc, exc_info=exc)
        retriable = bool(getattr(exc, "retriable", False))
        return reason(
            status, str(exc) or type(exc).__name__, category=category_of(exc), retriable=retriable
        )

    async def on_validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        refusal = name_refusal(exc.errors())
        if refusal is not None:
            # A tenant/namespace/topic name breaking the naming rule: the same 412 (and message)
            # as a name a handler refuses itself.
            return reason(412, refusal, category="InvalidInput")
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', '')}"
            for err in exc.errors()
        )
        return reason(400, f"invalid request: {problems}")

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        response = reason(exc.status_code, str(exc.detail))
        if exc.headers:
            response.headers.update(exc.headers)
        if exc.status_code == 405:
            # Starlette names the methods of the first route matching the path only; FastAPI
            # makes one route per method, so gather them all.
            response.headers["Allow"] = ", ".join(allowed_methods(request))
        return response

    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("admin request failed unexpectedly", exc_info=exc)
        return reason(500, f"internal error: {type(exc).__name__}: {exc}")

    app.add_exception_handler(BraidError, on_braid_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
