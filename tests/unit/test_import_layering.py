"""Structure checks: no import cycle between any two modules of ``braid``, and imports only point
down the layers of ADR 0003 (``docs/architecture.md#the-import-rule``).

The import graph is read from the source with ``ast`` (nothing is imported): every ``import x``
and ``from x import y`` anywhere in a module - at the top or inside a function - is an edge, with
``from pkg import name`` resolved to the module ``pkg.name`` when that is a module and to ``pkg``
otherwise, and relative imports resolved against the importing package. Imports under
``if TYPE_CHECKING:`` count like any other: a type-only import still couples the two modules (a
reader of one must know the other), so it too must point down the layers and close no cycle; a
child that needs its parent is given a narrow ``Protocol`` of what it may ask instead. A
package's ``__init__`` is the module ``pkg``; that importing ``pkg.sub`` first runs
``pkg/__init__.py`` is not counted as an edge (it would make every re-exporting ``__init__`` a
cycle).

Layers, bottom to top (a module may import its own layer and the ones below it)::

    core <- protocol <- metadata <- storage <- ledger <- broker <- scalable|clusters <- admin
        <- localcluster <- cli

``client`` and ``spark`` may import only ``core``, ``protocol`` and each other, and only ``cli``
may import them (ADR 0003 puts them below ``cli``, beside no server layer). The top-level
support modules (``braid.clock``, ``braid.event_loop``, ``braid.filelock``: ADR 0003) and the
``braid.security`` package (TLS contexts, credentials and their checks: ADR 0049) import only
``core`` and are
usable by every I/O layer, ``client`` and ``spark`` included, but not by the pure ``core`` and
``protocol``. The package root ``braid`` is the client's public facade: it may import the client
side (``braid.Client``), and no module imports it. The admin REST client
(``braid.admin.client`` and its errors: httpx, ``core`` and the support
modules only) is client-side too: ``spark`` plans partitions from the segment DAG it
reads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import braid

SRC = Path(braid.__file__).parent

_RANKS = {
    "core": 0,
    "protocol": 1,
    "metadata": 2,
    "storage": 3,
    "ledger": 4,
    "broker": 5,
    "scalable": 6,
    "clusters": 6,
    "admin": 7,
    "localcluster": 8,
    "cli": 9,
}
#: Top-level modules every I/O layer may use (ADR 0003).
_SUPPORT = {"braid.clock", "braid.event_loop", "braid.filelock"}
#: Support packages: every module under them is a support module (ADR 0049).
_SUPPORT_PACKAGES = ("braid.security",)
#: The package root is the client's public facade (``import braid; braid.Client``): it may
#: import the client side and what the client may; no module of Braid imports it.
_FACADE = "braid"
_CLIENT_SIDE = {"client", "spark"}
#: The admin REST client modules: client-side code that lives beside the admin server.
_ADMIN_CLIENT = {
    "braid.admin.client",
    "braid.admin.client_backlog",
    "braid.admin.client_bookie_clusters",
    "braid.admin.client_bookies",
    "braid.admin.client_errors",
    "braid.admin.client_namespaces",
    "braid.admin.client_scalable",
    "braid.admin.client_schemas",
    "braid.admin.client_tenants",
    "braid.admin.client_topic_admin",
    "braid.admin.client_topics",
    "braid.admin.client_transactions",
    "braid.admin.client_transport",
}
_PURE = {"core", "protocol"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    # A compiled module (``protocol/_batch_walk.c``) has no .py; its type stub names it.
    stubs = [p for p in SRC.rglob("*.pyi") if not p.with_suffix(".py").exists()]
    for path in [*SRC.rglob("*.py"), *stubs]:
        parts = ["braid", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it is (``if TYPE_CHECKING:`` bodies included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _owning_module(name: str) -> str | None:
    """The longest prefix of a dotted name that is a ``braid`` module."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _imports_of(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name == "braid" or name.startswith("braid."):
                target = _owning_module(name)
                if target is not None and target != module:
                    targets.add(target)
    return targets


GRAPH = {module: _imports_of(module) for module in MODULES}


def _layer(module: str) -> str:
    if module == _FACADE:
        return "facade"
    if module in _SUPPORT or module.startswith(_SUPPORT_PACKAGES):
        return "support"
    if module in _ADMIN_CLIENT:
        return "admin_client"
    return module.split(".")[1]


def _may_import(importer: str, imported: str) -> bool:
    if importer == imported:
        return True
    if imported == "facade":
        return False
    if importer == "facade":
        return imported in _PURE | _CLIENT_SIDE | {"support"}
    if imported == "support":
        return importer not in _PURE
    if importer == "support":
        return imported == "core"
    if importer == "admin_client":
        return imported in ("core", "admin_client")
    if imported == "admin_client":
        return importer not in _PURE
    if importer in _CLIENT_SIDE:
        return imported in _PURE | _CLIENT_SIDE
    if imported in _CLIENT_SIDE:
        return importer == "cli"  # the command may drive the client; no server layer may
    return _RANKS[imported] <= _RANKS[importer]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One concrete cycle per strongly connected component (Tarjan), as a module path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_through(sorted(c), graph) for c in components]


def _path_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A cycle inside ``component``, from its first module back to it (breadth-first)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if succ not in parents:
                    parents[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle found in component {component}")


def test_the_graph_is_read_from_the_source() -> None:
    # Guards the checks below against passing on an empty or misread graph.
    assert "braid.broker.service" in MODULES
    assert "braid.broker.connection" in GRAPH["braid.broker.service"]
    assert "braid.protocol.commands" in GRAPH["braid.broker.handlers"]  # from x import module
    assert "braid.core.errors" in GRAPH["braid.filelock"]


def test_type_only_imports_are_edges() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from braid.client.producer import AsyncProducer\n"
        "else:\n"
        "    import braid.core.errors\n"
        "def f() -> None:\n"
        "    from braid.clock import Clock\n"
    )
    found = {
        alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
        for node in _import_nodes(ast.parse(source))
        for alias in node.names
    }
    assert found == {
        "typing.TYPE_CHECKING",
        "braid.client.producer.AsyncProducer",
        "braid.core.errors",
        "braid.clock.Clock",
    }


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_cycle_finder_reports_the_modules_of_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles({k: v - {k} for k, v in graph.items()}) == [["a", "b", "c", "a"]]


def test_imports_only_point_down_the_layers() -> None:
    unknown = sorted(
        {_layer(m) for m in MODULES}
        - set(_RANKS)
        - _CLIENT_SIDE
        - {"support", "facade", "admin_client"}
    )
    assert not unknown, f"packages missing from the layering of ADR 0003: {unknown}"
    wrong = sorted(
        f"{importer} imports {imported}"
        for importer, targets in GRAPH.items()
        for imported in targets
        if not _may_import(_layer(importer), _layer(imported))
    )
    assert not wrong, "imports against the layering of ADR 0003:\n" + "\n".join(wrong)


def test_layer_rules() -> None:
    assert _may_import("broker", "ledger") and not _may_import("ledger", "broker")
    assert _may_import("scalable", "clusters") and _may_import("clusters", "scalable")
    assert _may_import("client", "protocol") and not _may_import("client", "broker")
    assert not _may_import("broker", "client") and _may_import("cli", "spark")
    assert _may_import("metadata", "support") and not _may_import("protocol", "support")
    assert not _may_import("support", "metadata")
    assert _may_import("facade", "client") and not _may_import("facade", "broker")
    assert not _may_import("broker", "facade") and not _may_import("client", "facade")
