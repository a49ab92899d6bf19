"""The package's public surface, and the sans-I/O rule: no sockets, clocks or event loops."""

from __future__ import annotations

import ast
from pathlib import Path

import braid.protocol

FORBIDDEN = {"asyncio", "socket", "selectors", "time", "threading", "ssl"}
PACKAGE = Path(braid.protocol.__file__).parent
RUNTIME_MODULES = sorted(PACKAGE.glob("*.py"))


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_runtime_modules_do_no_io_and_read_no_clock() -> None:
    assert RUNTIME_MODULES
    for path in RUNTIME_MODULES:
        assert not (_imported_roots(path) & FORBIDDEN), path.name


def test_every_module_starts_with_a_docstring() -> None:
    for path in RUNTIME_MODULES:
        assert ast.get_docstring(ast.parse(path.read_text())), path.name


def test_all_names_exist_and_cover_the_documented_api() -> None:
    for name in braid.protocol.__all__:
        assert hasattr(braid.protocol, name), name
    for name in ("pb", "FrameDecoder", "Frame", "ServerConnection", "ClientConnection", "commands"):
        assert name in braid.protocol.__all__
    assert braid.protocol.pb.BaseCommand is not None
