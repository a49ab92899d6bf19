"""The planning process's admin REST reads, over the standard library's ``http.client``.

Spark starts a fresh Python process to plan every streaming query (``python_streaming_source_
runner``), and everything it imports is paid per query, on the query's critical path. With
``httpx`` and Braid's :class:`~braid.admin.client.AdminClient` that was ~0.1 CPU s of imports;
``http.client`` is ~0.02 s (docs/benchmarks.md, ADR 0072). The planner only needs ``GET`` of a
JSON document, so this module does exactly that: one connection per call (planning makes one
call per topic and trigger), ``https://`` verified against the default CA store (created only for
an ``https://`` URL), redirects followed (at most :data:`MAX_REDIRECTS`), and the admin API's
errors as Braid's typed errors: 404 :class:`~braid.core.errors.NotFoundError`, 5xx and
unreachable :class:`~braid.core.errors.ServiceUnavailableError` (retriable), anything else
:class:`AdminReadError` - each with the status and the server's ``reason``.

Executors and the sink keep the full :class:`~braid.admin.client.AdminClient` (:mod:`braid.
spark.clients`): their processes are long-lived, so imports do not count there.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from braid.core.errors import BraidError, NotFoundError, ServiceUnavailableError
from braid.core.names import TopicName

#: Redirects followed before giving up (the admin API redirects some reads to the owner).
MAX_REDIRECTS = 3
#: Seconds to connect and to wait for an answer.
TIMEOUT_S = 30.0


class AdminReadError(BraidError):
    """The admin API refused a planner's read (a status that no retry fixes, e.g. 401/403)."""


def scalable_path(topic: str) -> str:
    """The admin path of a ``topic://`` topic (``/admin/v2/scalable/{tenant}/{ns}/{name}``)."""
    name = TopicName.parse(topic)
    parts = (name.tenant, name.namespace, name.local_name)
    return "/admin/v2/scalable/" + "/".join(quote(p, safe="") for p in parts)


def get_json(admin_url: str, path: str) -> Any:
    """``GET admin_url + path`` and its JSON answer (see the module docstring for errors)."""
    url = admin_url.rstrip("/") + path
    for _ in range(MAX_REDIRECTS + 1):
        status, location, body = _get(url)
        if status in (301, 302, 303, 307, 308) and location:
            url = urljoin(url, location)
            continue
        if 200 <= status < 300:
            try:
                return json.loads(body)
            except ValueError as exc:
                raise AdminReadError(f"GET {url}: the answer is not JSON ({exc})") from exc
        reason = _reason(body)
        if status == 404:
            raise NotFoundError(f"GET {url}: {reason}")
        if status >= 500:
            raise ServiceUnavailableError(f"GET {url}: {status} {reason}")
        raise AdminReadError(f"GET {url}: {status} {reason}")
    raise AdminReadError(f"GET {admin_url + path}: more than {MAX_REDIRECTS} redirects")


def _get(url: str) -> tuple[int, str | None, bytes]:
    import http.client

    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        import ssl

        context = ssl.create_default_context()
        conn = http.client.HTTPSConnection(
            parts.hostname or "", parts.port, timeout=TIMEOUT_S, context=context
        )
    elif parts.scheme == "http":
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT_S)
    else:
        raise AdminReadError(f"admin.url must be http:// or https://, got {url!r}")
    try:
        conn.request("GET", target, headers={"Accept": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Location"), response.read()
    except OSError as exc:  # refused, reset, timed out, TLS failures (ssl.SSLError)
        raise ServiceUnavailableError(f"GET {url}: {exc}") from exc
    finally:
        conn.close()


def _reason(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(doc, dict) and "reason" in doc:
        return str(doc["reason"])
    return str(doc)[:200]


__all__ = ["MAX_REDIRECTS", "TIMEOUT_S", "AdminReadError", "get_json", "scalable_path"]
