"""The repository explains itself: code and docs cite only the repository's own documents.

A reference a reader cannot follow is noise: "SPEC §5" or "issue 18" names a document that is
not here, ``docs/x.md`` a page that was renamed, ``rubric_engine.scoring.run`` a module that
moved. These tests read every source and documentation file and fail on each such reference,
naming the file and line.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: where references are read: the package (code, docstrings, templates), tests, benchmarks,
#: scripts, the docs and the top-level documents
SOURCE_DIRS = ("rubric_engine", "tests", "benchmarks", "scripts", "docs")
TOP_DOCS = ("README.md", "CONTRIBUTING.md")
SUFFIXES = {".py", ".md", ".j2", ".html", ".txt", ".toml", ".yaml", ".yml", ".cfg"}

#: references to documents outside the repository, in any casing
OUTSIDE = re.compile(
    r"SPEC §|\bissues? #?\d|\bseeds? ?-?0\d\d|\bseed-0\d\d|STYLE\.md|/work/|steering repo",
    re.IGNORECASE,
)
#: the one page that may name the design documents it comes from (docs/protocol.md §1)
MAY_NAME_SOURCES = {Path("docs/protocol.md")}

DOC_PAGE = re.compile(r"\bdocs/([\w.-]+\.md)(?: §(\d+))?")
DOTTED = re.compile(r"\brubric_engine(?:\.[A-Za-z_]\w*)+")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _files() -> Iterator[Path]:
    """Every file read, but this one (its examples are the references it refuses)."""
    for top in SOURCE_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            read = path.is_file() and path.suffix in SUFFIXES and path != Path(__file__)
            if read and "__pycache__" not in path.parts:
                yield path
    for name in TOP_DOCS:
        if (ROOT / name).exists():
            yield ROOT / name


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)


def _where(path: Path, n: int) -> str:
    return f"{path.relative_to(ROOT)}:{n}"


def test_nothing_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{_where(path, n)}: {line.strip()[:120]}"
        for path in _files()
        if path.relative_to(ROOT) not in MAY_NAME_SOURCES
        for n, line in _lines(path)
        if OUTSIDE.search(line)
    ]
    assert not found, "cite docs/… of this repository instead:\n" + "\n".join(found)


def _protocol_sections() -> set[str]:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    return set(re.findall(r"^## §(\d+) ", text, flags=re.MULTILINE))


def test_every_cited_docs_page_and_protocol_section_exists() -> None:
    sections = _protocol_sections()
    missing = []
    for path in _files():
        for n, line in _lines(path):
            for page, section in DOC_PAGE.findall(line):
                if not (ROOT / "docs" / page).exists():
                    missing.append(f"{_where(path, n)}: docs/{page}")
                elif page == "protocol.md" and section and section not in sections:
                    missing.append(f"{_where(path, n)}: docs/protocol.md §{section}")
    assert not missing, "no such page or section:\n" + "\n".join(missing)


def _fields(cls: object) -> set[str]:
    """The declared fields of a pydantic model or a dataclass (``None`` for anything else)."""
    names = set(getattr(cls, "model_fields", None) or ())
    return names | set(getattr(cls, "__dataclass_fields__", None) or ())


def _resolves(dotted: str) -> bool:
    """``dotted`` imports as a module, or its longest importable prefix has the rest as
    attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if hasattr(target, name):
                target = getattr(target, name)
            else:
                # a field of a model or dataclass is not an attribute of its class
                return name in _fields(target)
        return True
    return False


def test_every_dotted_rubric_engine_name_resolves() -> None:
    names: dict[str, str] = {}
    for path in _files():
        if path.suffix not in {".py", ".md"}:
            continue
        for n, line in _lines(path):
            for dotted in DOTTED.findall(line):
                names.setdefault(dotted, _where(path, n))
    dangling = [f"{where}: {name}" for name, where in sorted(names.items()) if not _resolves(name)]
    assert not dangling, "no such module or attribute:\n" + "\n".join(dangling)


@pytest.mark.parametrize(
    "page", sorted([*(ROOT / "docs").glob("*.md"), *(ROOT / n for n in TOP_DOCS)]), ids=str
)
def test_relative_links_of_a_page_exist(page: Path) -> None:
    broken = []
    for n, line in _lines(page):
        for target in MD_LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{_where(page, n)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
