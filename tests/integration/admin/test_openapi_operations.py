"""The admin API's surface is pinned: every operation of ``/openapi.json`` (method, path and the
status codes it documents) against a committed list, ``openapi_operations.txt``.

A route added, removed, moved to another path or given another status shows up here as a diff;
refactoring how the routers are built must leave the list untouched. Change the list only with
the API change that needs it (and say so in ``CHANGELOG.md``).
"""

from __future__ import annotations

from pathlib import Path

import httpx

GOLDEN = Path(__file__).with_name("openapi_operations.txt")


def _operations(document: dict[str, object]) -> list[str]:
    paths = document["paths"]
    assert isinstance(paths, dict)
    return sorted(
        f"{method.upper()} {path} {' '.join(sorted(operation['responses']))}"
        for path, operations in paths.items()
        for method, operation in operations.items()
    )


async def test_openapi_operations_match_the_committed_list(admin: httpx.AsyncClient) -> None:
    document = (await admin.get("/openapi.json")).json()
    expected = [line for line in GOLDEN.read_text().splitlines() if line and line[0] != "#"]
    assert _operations(document) == expected
