"""Lint and type checks run with the tests, so CI fails on them too (CONTRIBUTING.md)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_clean() -> None:
    result = _run("ruff", "check", "rubric_engine", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean() -> None:
    result = _run("mypy", "rubric_engine")
    assert result.returncode == 0, result.stdout + result.stderr
