"""The console's page and static files: one HTML shell, a stylesheet and a few ES modules.

No build step: the files under ``static/`` are what the browser runs, shipped in the wheel as
package data and read once when the console is mounted. ``/console`` (the overview) and
``/console/topic/{tenant}/{namespace}/{topic}`` (a scalable topic) both answer the shell; its
script picks the page from the URL. Only the files that exist are served (no path from the
request reaches the file system), with a Content-Security-Policy that allows this origin's
scripts, styles and connections and nothing else.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Response

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.core.errors import NotFoundError

#: The package directory holding the console's files.
STATIC_PACKAGE = "braid.admin.console"
STATIC_DIR = "static"

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
}

_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "same-origin",
}


class ConsoleFileNotFound(NotFoundError):
    """No console file by that name (404)."""


def load_static_files() -> dict[str, tuple[bytes, str]]:
    """Every file of ``static/`` by name, with its content type.

    Raises:
        FileNotFoundError: the package was installed without its console files.
    """
    files: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(STATIC_PACKAGE).joinpath(STATIC_DIR).iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in _CONTENT_TYPES:
            files[entry.name] = (entry.read_bytes(), _CONTENT_TYPES[suffix])
    if "index.html" not in files:
        raise FileNotFoundError(f"{STATIC_PACKAGE}/{STATIC_DIR}/index.html is missing")
    return files


def pages_router(files: dict[str, tuple[bytes, str]]) -> APIRouter:
    """``/console``, ``/console/topic/...`` and ``/console/static/{name}``."""
    router = APIRouter(include_in_schema=False)
    shell, shell_type = files["index.html"]

    def page() -> Response:
        return Response(shell, media_type=shell_type, headers=_HEADERS)

    @router.get("/console")
    async def overview() -> Response:
        return page()

    @router.get("/console/topic/{tenant}/{namespace}/{topic}")
    async def scalable_topic(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Response:
        return page()

    @router.get("/console/static/{name}")
    async def static(name: str) -> Response:
        found = files.get(name)
        if found is None:
            raise ConsoleFileNotFound(f"no console file {name[:100]!r}")
        return Response(found[0], media_type=found[1], headers=_HEADERS)

    return router


__all__ = ["ConsoleFileNotFound", "load_static_files", "pages_router"]
