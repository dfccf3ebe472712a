"""The calibration statistics are a pure core (docs/architecture.md): no clock, file, database,
environment or unseeded randomness; and `--help` does not pay for scipy."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PURE = (
    "binary",
    "agreement",
    "scores",
    "correction",
    "intervals",
    "compare",
    "views",
    "metrics",
    "render",
    "render_md",
    "render_lines",
    "alt_test",
    "alt_fields",
    "blocks",
    "row_fields",
    "tally",
    "leniency",
)
FORBIDDEN = {
    "os",
    "sys",
    "sqlite3",
    "pathlib",
    "datetime",
    "time",
    "random",
    "socket",
    "subprocess",
    "logging",
    "secrets",
    "io",
}
ROOT = Path(__file__).resolve().parent.parent / "rubric_engine" / "calibration"


@pytest.mark.parametrize("name", PURE)
def test_pure_calibration_modules_import_no_io(name: str) -> None:
    tree = ast.parse((ROOT / f"{name}.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
            if node.module.startswith("rubric_engine.") and node.module.split(".")[1] in (
                "store",
                "cli",
                "judge",
                "registry",
            ):
                imported.add(node.module)
    assert not imported & FORBIDDEN, imported & FORBIDDEN
    assert not {m for m in imported if m.startswith("rubric_engine.")}, imported


def test_help_imports_neither_scipy_nor_numpy() -> None:
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom rubric_engine.cli import app\n"
        "CliRunner().invoke(app, ['--help'])\n"
        "print(sorted(m for m in ('scipy', 'numpy', 'sklearn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
