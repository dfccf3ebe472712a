"""The pure core imports no I/O or edge module (docs/architecture.md).

The core — the rubric model, normalization, rule checks, the row-result step and report
aggregation — does no I/O, so same input gives the same output and property tests can lean on
it. This test enforces the rule instead of a comment: it walks every import a core module makes
(statically, with ``ast``: at module level and inside functions alike, every package
``__init__`` on the way, only ``if TYPE_CHECKING:`` blocks skipped), transitively through the
project's own modules, and fails naming the chain that reaches a forbidden module. A second
test imports the core in a fresh interpreter and checks ``sys.modules``, which also catches
imports the walk cannot see (``importlib`` calls at import time).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = "rubric_engine"

#: the pure core; a trailing ``.*`` means every module of that package
CORE = (
    "rubric_engine.rubric.*",
    "rubric_engine.rules.*",
    "rubric_engine.verdict.*",
    "rubric_engine.results.*",
    "rubric_engine.report.aggregate",
    "rubric_engine.report.accumulate",
    "rubric_engine.report.slices",
    "rubric_engine.report.clusters",
    "rubric_engine.report.outcome",
    "rubric_engine.report.model",
    "rubric_engine.report.metrics",
    "rubric_engine.report.calibration",
    "rubric_engine.report.rows",
    "rubric_engine.report.rules_section",
    "rubric_engine.report.gate",
    "rubric_engine.report.diff",
    "rubric_engine.report.diff_cases",
    "rubric_engine.report.diff_list",
    "rubric_engine.review.answers",
    "rubric_engine.review.queue",
    "rubric_engine.review.adjudication",
    "rubric_engine.actions.model",
    "rubric_engine.actions.clusters",
    "rubric_engine.actions.failures",
    "rubric_engine.actions.render",
)
#: core packages' modules that are edges by design: the loader reads YAML files, the version
#: registry keeps versions in the task store
CORE_EDGES = frozenset({"rubric_engine.rubric.loader", "rubric_engine.rubric.versions"})

#: what the core must not reach: I/O libraries, the network, and the project's edges
FORBIDDEN = (
    "sqlite3",
    "psycopg",
    "yaml",
    "httpx",
    "requests",
    "litellm",
    "instructor",
    "openai",
    "tenacity",
    "jinja2",
    "typer",
    "rich",
    "rubric_engine.store",
    "rubric_engine.rubric.versions",
    "rubric_engine.cli",
    "rubric_engine.engine",
    "rubric_engine.judge.cassettes.cassette",
    "rubric_engine.judge.cassettes.index",
    "rubric_engine.judge.prompt",
    "rubric_engine.dialogue.readers",
    "rubric_engine.judge.backends",
    "rubric_engine.judge.instructor_judge",
    "rubric_engine.judge.limiter",
    "rubric_engine.judge.retry",
    "rubric_engine.rubric.loader",
    "rubric_engine.report.render",
    "starlette",
    "uvicorn",
    "rubric_engine.serve",
    "rubric_engine.review.claims",
    "rubric_engine.review.accounts",
    "rubric_engine.review.queue_store",
    "rubric_engine.review.rows",
)

#: edges reached today that another change removes, each with that change. An entry here
#: stops the walk at that module; test_known_exceptions_are_still_needed fails once the
#: entry is no longer needed, so it is deleted, not forgotten.
KNOWN_EXCEPTIONS: dict[str, str] = {}


def _forbidden(module: str) -> str | None:
    """The :data:`FORBIDDEN` entry ``module`` is or lies inside, else ``None``."""
    return next((f for f in FORBIDDEN if module == f or module.startswith(f + ".")), None)


def _module_file(root: Path, module: str) -> Path | None:
    """The source of a project module under ``root`` (a package's ``__init__.py``)."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module an import statement in ``tree`` names, TYPE_CHECKING blocks skipped."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            yield from (
                name for child in node.orelse for name in _imports(child, module, is_package)
            )
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base
            # ``from pkg import sub`` may name a submodule: the walk checks whether it is one
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        yield from _imports(node, module, is_package)


def _with_parents(module: str) -> list[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def violations(root: Path, start: str, exceptions: frozenset[str] = frozenset()) -> list[str]:
    """Import chains from ``start`` to a forbidden module, one per forbidden module reached.

    Args:
        root: the folder holding the ``rubric_engine`` package.
        start: a dotted module name.
        exceptions: project modules whose imports are not followed.
    """
    found: dict[str, list[str]] = {}
    chains: dict[str, list[str]] = {}
    queue = [(name, [name]) for name in _with_parents(start)]
    while queue:
        module, chain = queue.pop(0)
        if module in chains:
            continue
        chains[module] = chain
        if _forbidden(module) and module != start:
            found.setdefault(module, chain)
            continue
        if not module.startswith(PACKAGE) or module in exceptions:
            continue
        path = _module_file(root, module)
        if path is None:
            continue  # a name imported from a module, not a module
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _imports(tree, module, path.name == "__init__.py"):
            for target in _with_parents(name):
                target = _forbidden(target) or target  # `sqlite3.dbapi2` is `sqlite3`
                if target not in chains and (
                    _forbidden(target) or _module_file(root, target) is not None
                ):
                    queue.append((target, [*chain, target]))
    return [" -> ".join(chain) for chain in found.values()]


def core_modules(root: Path) -> list[str]:
    """The modules :data:`CORE` names that exist under ``root``, sorted."""
    found: set[str] = set()
    for entry in CORE:
        if entry.endswith(".*"):
            package = entry[:-2]
            folder = root.joinpath(*package.split("."))
            for path in folder.glob("*.py"):
                name = package if path.stem == "__init__" else f"{package}.{path.stem}"
                found.add(name)
        elif _module_file(root, entry) is not None:
            found.add(entry)
    return sorted(found - CORE_EDGES)


def test_pure_core_imports_no_edge_module() -> None:
    problems = {
        module: chains
        for module in core_modules(ROOT)
        if (chains := violations(ROOT, module, frozenset(KNOWN_EXCEPTIONS)))
    }
    assert not problems, "the pure core reaches I/O or edge modules:\n" + "\n".join(
        f"  {chain}" for chains in problems.values() for chain in chains
    )


def test_the_core_list_covers_the_new_row_result_step_and_the_normalizer() -> None:
    modules = core_modules(ROOT)
    for module in (
        "rubric_engine.results.normalize",
        "rubric_engine.results.row_result",
        "rubric_engine.rules.run",
    ):
        assert module in modules
    assert "rubric_engine.rubric.model" in modules and "rubric_engine.rubric.loader" not in modules


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("*.pyc"))
    return tmp_path


def test_an_sqlite3_import_in_the_normalizer_is_caught(package_copy: Path) -> None:
    # docs/architecture.md: adding `import sqlite3` to the normalizer makes this test fail
    normalize = package_copy / PACKAGE / "results" / "normalize.py"
    normalize.write_text(
        normalize.read_text(encoding="utf-8") + "\nimport sqlite3  # noqa\n", encoding="utf-8"
    )
    exceptions = frozenset(KNOWN_EXCEPTIONS)
    assert violations(package_copy, "rubric_engine.results.normalize", exceptions) == [
        "rubric_engine.results.normalize -> sqlite3"
    ]
    # and every core module that uses the normalizer is flagged through it
    assert violations(package_copy, "rubric_engine.results.row_result", exceptions) == [
        "rubric_engine.results.row_result -> rubric_engine.results.normalize -> sqlite3"
    ]
    # the real one is clean
    assert not violations(ROOT, "rubric_engine.results.normalize", exceptions)


def test_a_lazy_import_of_an_edge_inside_a_function_is_caught(package_copy: Path) -> None:
    rules = package_copy / PACKAGE / "rules" / "text.py"
    rules.write_text(
        rules.read_text(encoding="utf-8")
        + "\n\ndef _sneak() -> None:\n"
        + "    from rubric_engine.store.task_store import TaskStore  # noqa\n",
        encoding="utf-8",
    )
    found = violations(package_copy, "rubric_engine.rules.text")
    assert found == ["rubric_engine.rules.text -> rubric_engine.store"]


def test_type_checking_imports_are_not_runtime_imports(package_copy: Path) -> None:
    case_level = package_copy / PACKAGE / "rubric" / "case_level.py"
    text = case_level.read_text(encoding="utf-8")
    assert "if TYPE_CHECKING:" in text
    case_level.write_text(
        text.replace("if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    import sqlite3  # noqa\n", 1),
        encoding="utf-8",
    )
    assert not violations(package_copy, "rubric_engine.rubric.case_level")


def test_known_exceptions_are_still_needed() -> None:
    # once the change named beside an exception lands, the exception must go
    for module, why in KNOWN_EXCEPTIONS.items():
        assert violations(ROOT, module), f"{module} no longer reaches an edge ({why}): delete it"


def test_importing_the_core_loads_no_edge_library() -> None:
    modules = list(core_modules(ROOT))
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} "
        f"or m in {FORBIDDEN!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == []
