"""Every Sphinx-style cross-reference in ``braid``'s docstrings and comments names something real.

A ``:mod:``, ``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:`` or ``:obj:``
target that was renamed or moved sends a reader nowhere. This test imports every module of
``src/braid`` (except the generated protobuf code) and resolves each target found in it:

* ``braid.x.y.Name.attr`` (with or without ``~``): the longest importable module prefix, then
  attribute lookups;
* a name without a module (``Name.attr``, ``attr``): first in the module's namespace, then in the
  class whose body holds the reference, then in any class of the module (a module docstring
  naming its main class's methods), then as a sibling module of the package, then as an importable
  module (``asyncio.Future``) or a builtin;
* ``.name``: relative to the module's package, or in the module itself.

A class attribute counts when the class or a base defines it, annotates it, lists it in
``__slots__`` or assigns ``self.<name>`` in one of its methods (read from the source).
Fully-qualified ``braid.*`` targets in ``tests/``, ``bench/``, ``tools/`` and ``examples/`` are
checked the same way.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
from functools import cache
from pathlib import Path
from types import ModuleType

import braid

SRC = Path(braid.__file__).parent
ROOT = SRC.parents[1]
_ROLE = re.compile(r":(?:py:)?(mod|class|func|meth|attr|data|exc|obj|const):`([^`]+)`")
_MISSING = object()


def _target(text: str) -> str:
    if "<" in text and text.endswith(">"):
        text = text[text.index("<") + 1 : -1]
    return text.lstrip("~!").removesuffix("()")


@cache
def _instance_attributes(cls: type) -> frozenset[str]:
    """Names a class (or a base) assigns as ``self.<name>`` or declares, read from the source."""
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__annotations__", {}))
        slots = getattr(klass, "__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
        try:
            tree = ast.parse(inspect.getsource(klass).strip())
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    names.add(target.attr)
    return frozenset(names)


def _lookup(obj: object, attrs: list[str]) -> bool:
    for attr in attrs:
        found = getattr(obj, attr, _MISSING)
        if found is _MISSING:
            # An instance attribute ends the lookup: there is no object to look into further.
            return isinstance(obj, type) and attr in _instance_attributes(obj)
        obj = found
    return True


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _resolve_dotted(target: str) -> bool:
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        module = _import(".".join(parts[:i]))
        if module is not None:
            return _lookup(module, parts[i:])
    return hasattr(builtins, parts[0]) and _lookup(builtins, parts)


def _classes_of(module: ModuleType) -> list[type]:
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and obj.__module__ == module.__name__
    ]


def _enclosing_class(tree: ast.Module, module: ModuleType, lineno: int) -> type | None:
    best: ast.ClassDef | None = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef)
            and node.lineno <= lineno <= (node.end_lineno or node.lineno)
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    found = getattr(module, best.name, None) if best is not None else None
    return found if isinstance(found, type) else None


def resolves(target: str, module: ModuleType, cls: type | None) -> bool:
    """Whether ``target``, written inside ``module`` (and class ``cls``), names something."""
    if target.startswith("braid."):
        return _resolve_dotted(target)
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    if target.startswith("."):
        rest = target.lstrip(".")
        return _resolve_dotted(f"{package}.{rest}") or _lookup(module, rest.split("."))
    parts = target.split(".")
    if hasattr(module, parts[0]):
        return _lookup(module, parts)
    if cls is not None and _lookup(cls, parts):
        return True
    if any(_lookup(klass, parts) for klass in _classes_of(module)):
        return True
    if _import(f"{package}.{parts[0]}") is not None:
        return _resolve_dotted(f"{package}.{target}")
    return _resolve_dotted(target)


def _source_modules() -> list[tuple[Path, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        if "generated" in rel.parts:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((path, ".".join(parts)))
    return found


def unresolved_in_source() -> tuple[list[str], int]:
    """Every target in ``src/braid`` that does not resolve (as ``file:line: role``), and how many
    targets were checked."""
    bad: list[str] = []
    checked = 0
    for path, name in _source_modules():
        text = path.read_text(encoding="utf-8")
        if ":`" not in text:
            continue
        module = importlib.import_module(name)
        tree = ast.parse(text)
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in _ROLE.finditer(line):
                checked += 1
                cls = _enclosing_class(tree, module, lineno)
                if not resolves(_target(match.group(2)), module, cls):
                    bad.append(f"{path.relative_to(ROOT)}:{lineno}: {match.group(0)}")
    return bad, checked


def test_every_docstring_reference_in_the_package_resolves() -> None:
    bad, checked = unresolved_in_source()
    assert not bad, "references to names that do not exist:\n" + "\n".join(bad)
    assert checked >= 500, checked  # the scan found the package's references


def test_fully_qualified_references_outside_the_package_resolve() -> None:
    bad = []
    checked = 0
    for folder in ("tests", "bench", "tools", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in _ROLE.finditer(line):
                    target = _target(match.group(2))
                    if target.startswith("braid."):
                        checked += 1
                        if not _resolve_dotted(target):
                            bad.append(f"{path.relative_to(ROOT)}:{lineno}: {match.group(0)}")
    assert not bad, "references to names that do not exist:\n" + "\n".join(bad)
    assert checked >= 3, checked


def test_the_resolver_tells_real_names_from_stale_ones() -> None:
    frames = importlib.import_module("braid.protocol.frames")
    dag_watch = importlib.import_module("braid.scalable.dag_watch")
    session = dag_watch.DagWatchSession
    assert resolves("braid.protocol.frames.SendReceiptEncoder", frames, None)
    assert not resolves("braid.protocol.frames.encode_send_receipt", frames, None)
    assert not resolves("braid.client.consumers", frames, None)
    assert resolves("DagWatchSession.push", dag_watch, None)
    assert not resolves("DagWatchSession.on_layout", dag_watch, None)
    assert resolves("last_epoch", dag_watch, session)  # an instance attribute set in __init__
    assert resolves("asyncio.Future", dag_watch, None)
    assert not resolves("no_such_name", dag_watch, session)
