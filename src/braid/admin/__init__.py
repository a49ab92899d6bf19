"""Braid's admin REST API and its client.

* Server side (FastAPI, in the broker's event loop): :func:`create_app`, :class:`TopicAdmin`
  (:mod:`braid.admin.app`), :class:`AdminServer` (:mod:`braid.admin.server`), the scalable-topic
  routes (:mod:`braid.admin.scalable`) and error translation (:mod:`braid.admin.errors`).
* Client side: :class:`AdminClient` (:mod:`braid.admin.client`, httpx only).

Names are loaded on first use (PEP 562), so ``from braid.admin import AdminClient`` imports
neither FastAPI nor uvicorn nor the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from braid.admin.app import TopicAdmin, create_app
    from braid.admin.client import AdminClient, AdminError
    from braid.admin.server import AdminServer, AdminServerError

_EXPORTS = {
    "AdminClient": "braid.admin.client",
    "AdminError": "braid.admin.client",
    "AdminServer": "braid.admin.server",
    "AdminServerError": "braid.admin.server",
    "TopicAdmin": "braid.admin.app",
    "create_app": "braid.admin.app",
}

__all__ = [
    "AdminClient",
    "AdminError",
    "AdminServer",
    "AdminServerError",
    "TopicAdmin",
    "create_app",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'braid.admin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
