"""A diff of unrelated tasks is refused, not a list of regressions."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run


def scored(tmp_path: Path, store: Path, rows: Path, rubric: Path, out: str) -> str:
    code, text = run(
        "score", rows, "-r", rubric, "--draft", "--store", store, "--cassettes", CASSETTES,
        "--out", tmp_path / out, "--display", "none",
    )  # fmt: skip
    assert code == 0, text
    return text.rsplit("task id: ", 1)[1].split()[0]


def test_diff_and_gate_of_tasks_sharing_no_row_and_no_requirement_are_refused(
    tmp_path: Path,
) -> None:
    # before: exit 0 with dozens of REGRESSION items, so a --no-regression gate failed CI for
    # nothing
    store = tmp_path / "s.sqlite"
    health = scored(
        tmp_path, store, CASES / "health_consult_zh.jsonl", RUBRICS / "health_cs.yaml", "h"
    )
    airline = scored(
        tmp_path, store, CASES / "airline_tau2_dev.json", RUBRICS / "airline_cs.yaml", "a"
    )
    code, out = run("diff", health, airline, "--store", store)
    assert code == 2, out
    assert "nothing comparable" in out and "share no rowId and no requirement ID" in out
    assert "REGRESSION" not in out
    code, out = run("gate", airline, "--store", store, "--baseline", health, "--no-regression")
    assert code == 2 and "nothing comparable" in out, out
    # the same rows under the same rubric stay comparable
    code, out = run("diff", health, health, "--store", store)
    assert code == 0, out
