"""Every document the repository cites is in the repository.

Users get this repository and nothing else, so a comment, docstring, test message or page that
points at a document outside it points nowhere. This test reads every text file of ``src/``,
``tests/``, ``docs/``, ``bench/``, ``tools/``, ``examples/``, ``conf/`` and the top-level
``README.md``, ``CHANGELOG.md``, ``Makefile`` and ``pyproject.toml``, and fails, naming
``file:line``, on:

* a ``*.md`` name that resolves to no file - relative to the citing file's folder or to the
  repository root (a link inside ``docs/`` is relative to its page; ``docs/x.md`` in a docstring
  is relative to the root) - or whose ``#anchor`` names no heading of that file;
* a relative Markdown link (``[text](path)``) to a file that does not exist;
* a path under one of the scanned top-level folders (``src/...``, ``docs/...``, ...) that does
  not exist (``NNNN`` in a name marks a template, and globs are not paths);
* ``ADR NNNN`` with no ``docs/decisions/NNNN-*.md``;
* the marks of citations of documents users do not get: a section sign (name the in-repo page
  and link its heading instead), the upper-case name of the design notes that lived outside the
  repository, a path into a ``shared`` folder next to the repository or into the seeds, and
  "the spec" / "the seeds" and their possessives, which name no document.

The scan must also find a healthy number of valid references of each kind, so it cannot pass by
reading nothing; and :func:`problems_in` is tested on made-up lines with each kind of bad
reference. This file is not scanned: its examples are made up.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("src", "tests", "docs", "bench", "tools", "examples", "conf")
SCANNED_FILES = ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml")
_BINARY_SUFFIXES = {".so", ".pyc", ".png", ".jpg", ".gz", ".zip", ".jar", ".db", ".parquet", ".pem"}
_SKIPPED_PARTS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis"}
#: Files vendored unchanged from another project (tools/pulsar_client_ci/README.md): their
#: references are to that project's tree, and we do not edit them.
_VENDORED = ROOT / "tools" / "pulsar_client_ci" / "upstream"

_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_MD_REF = re.compile(r"(?<![\w./-])((?:\.\.?/)*[\w][\w./-]*\.md)(#[\w-]+)?(?![\w-])")
_MD_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")
_REPO_PATH = re.compile(
    r"(?<![\w./-])((?:" + "|".join(SCANNED_DIRS) + r")/[\w./-]*)(?=[^\w./*{<-]|$)"
)
_ADR = re.compile(r"\bADRs? (\d{4})\b")
_FORBIDDEN = {
    re.compile("\u00a7"): "a section sign cites a section of some document: cite the in-repo page "
    "and link its heading (docs/x.md#heading)",
    re.compile(r"\b" + "DES" + r"IGN\b"): "the design notes are not in the repository: cite "
    "docs/architecture.md",
    re.compile(r"(?:\.\./|/work/|\b)shared/"): "a folder next to the repository is not shipped",
    re.compile(r"\bseeds/"): "the seed documents are not shipped: name the PIP (PIP-468, ...)",
    re.compile(r"(?i)\bthe seeds?\b|\bseeds?'|\bthe spec\b|\bspec's\b"): "names no document: "
    "name the PIP, or cite the in-repo page",
}


def _text_files() -> Iterator[Path]:
    """The scanned files, except this one (its made-up examples are not references)."""
    this = Path(__file__).resolve()
    for name in SCANNED_FILES:
        path = ROOT / name
        if path.is_file():
            yield path
    for folder in SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if (
                path.is_file()
                and path.suffix not in _BINARY_SUFFIXES
                and not _SKIPPED_PARTS.intersection(path.parts)
                # build output of `pip install -e .` (git-ignored): a copy of README, not a source
                and not any(part.endswith(".egg-info") for part in path.parts)
                and path.resolve() != this
                and _VENDORED not in path.parents
            ):
                yield path


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors_of(path: Path) -> frozenset[str]:
    """The anchors of ``path``'s headings (duplicates numbered as GitHub does)."""
    seen: Counter[str] = Counter()
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return frozenset(found)


def _resolve(source: Path, target: str) -> Path | None:
    for base in (source.parent, ROOT):
        candidate = (base / target).resolve()
        if candidate.exists():
            return candidate
    return None


def problems_in(source: Path, text: str, counts: Counter[str] | None = None) -> list[str]:
    """Every bad reference in ``text`` (the content of ``source``), as ``file:line: why``.

    ``counts`` (if given) counts the valid references by kind.
    """
    counts = Counter() if counts is None else counts
    rel = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
    found: list[str] = []

    def bad(lineno: int, why: str) -> None:
        found.append(f"{rel}:{lineno}: {why}")

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _URL.sub("", raw)
        for pattern, why in _FORBIDDEN.items():
            match = pattern.search(line)
            if match:
                bad(lineno, f"{match.group(0)!r}: {why}")
        for match in _MD_REF.finditer(line):
            target, anchor = match.group(1), match.group(2)
            if "NNNN" in target:
                continue  # a template (docs/decisions/NNNN-title.md)
            resolved = _resolve(source, target)
            if resolved is None:
                bad(lineno, f"{target} is not a file of the repository")
            elif anchor and anchor[1:] not in anchors_of(resolved):
                bad(lineno, f"{target} has no heading for {anchor}")
            else:
                counts["markdown file"] += 1
                counts["anchor"] += bool(anchor)
        if source.suffix == ".md":
            for match in _MD_LINK.finditer(line):
                target = match.group(1)
                if target.endswith(".md"):
                    continue  # checked above
                if (source.parent / target).exists():
                    counts["link"] += 1
                else:
                    bad(lineno, f"link to {target}: no such file")
        for match in _REPO_PATH.finditer(line):
            path = match.group(1).rstrip(".")
            if "NNNN" in path or path.endswith(".md"):
                continue
            if (ROOT / path).exists():
                counts["path"] += 1
            else:
                bad(lineno, f"{path}: no such file or folder")
        for match in _ADR.finditer(line):
            if any((ROOT / "docs" / "decisions").glob(f"{match.group(1)}-*.md")):
                counts["ADR"] += 1
            else:
                bad(lineno, f"ADR {match.group(1)}: no docs/decisions/{match.group(1)}-*.md")
    return found


def test_every_cited_document_is_in_the_repository() -> None:
    counts: Counter[str] = Counter()
    files = list(_text_files())
    problems = [
        problem
        for path in files
        for problem in problems_in(path, path.read_text(encoding="utf-8", errors="replace"), counts)
    ]
    assert not problems, "references to documents that are not in the repository:\n" + "\n".join(
        problems
    )
    # Not vacuous: the scan read the tree and recognised references of every kind.
    assert len(files) > 400
    assert counts["markdown file"] >= 150, counts
    assert counts["anchor"] >= 30, counts
    assert counts["link"] >= 3, counts
    assert counts["path"] >= 150, counts
    assert counts["ADR"] >= 60, counts


def test_the_checker_reports_each_kind_of_bad_reference() -> None:
    source = ROOT / "src" / "braid" / "core" / "example.py"
    outside = "wire-protocol" + ".md"
    lines = [
        f"as ``{outside}`` requires",  # a document that is not here
        "see " + "DES" + "IGN.md and the notes",  # the old design notes, by name
        "the layers of " + "DES" + "IGN \u00a72",  # ... without .md, with a section sign
        "see ../" + "shared/reference/notes",  # a folder next to the repository
        "the seed" + "'s JSON",  # a possessive that names no document
        "docs/architecture.md#no-such-heading",  # a heading that does not exist
        "tests/unit/no_such_test.py pins it",  # a path that does not exist
        "ADR 0999 says so",  # an ADR that does not exist
    ]
    found = problems_in(source, "\n".join(lines))
    for lineno in range(1, len(lines) + 1):
        assert any(p.startswith(f"src/braid/core/example.py:{lineno}:") for p in found), (
            lineno,
            found,
        )


def test_the_checker_accepts_what_is_in_the_repository() -> None:
    source = ROOT / "docs" / "client.md"
    counts: Counter[str] = Counter()
    text = "\n".join(
        [
            "[the map](architecture.md#the-import-rule),",
            "[ADR 0003](decisions/0003-package-layering.md)",
            "`docs/protocol.md#routing-a-key`, tests/unit/test_import_layering.py, ADR 0002",
            "[the proto](../src/braid/protocol/proto/PulsarApi.proto)",
            "https://example.org/spec/data-model.md is a URL,",
            "docs/decisions/NNNN-title.md is a template",
        ]
    )
    assert problems_in(source, text, counts) == []
    assert counts == Counter({"markdown file": 3, "anchor": 2, "link": 1, "path": 1, "ADR": 2}), (
        counts
    )


def test_slugs_follow_github() -> None:
    assert slug(" Commands 70-82") == "commands-70-82"
    assert slug("What works, and on which broker") == "what-works-and-on-which-broker"
    assert slug("0003 — Package layering (`core`)") == "0003--package-layering-core"
