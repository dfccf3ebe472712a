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


def test_a_diff_with_an_unfinished_task_says_so_beside_its_regressions(tmp_path: Path) -> None:
    """A run stopped after 5 of 26 rows, diffed against a full one, printed "REGRESSION · 31
    regression(s)" and nothing about the 21 rows it never judged; the diff (unchanged) now
    comes with a note on stderr naming the task's state, its rows and how to finish it."""
    store = tmp_path / "s.sqlite"
    rows, rubric = CASES / "health_consult_zh.jsonl", RUBRICS / "health_cs.yaml"
    full = scored(tmp_path, store, rows, rubric, "full")
    code, text = run(
        "score", rows, "-r", rubric, "--draft", "--store", store, "--cassettes", CASSETTES,
        "--out", tmp_path / "part", "--display", "none", "--max-calls", "5",
    )  # fmt: skip
    assert code == 6, text
    part = text.rsplit("task id: ", 1)[1].split()[0]
    code, out = run("diff", full, part, "--store", store)
    assert code == 0, out
    assert (
        f"note: the current task {part} is STOPPED with 5 of 26 planned row(s); the rows it has "
        "not judged show as 'no result in the current task'; finish it first: "
        f"`rubric-eval score --resume {part} --store {store}`" in out
    ), out
    code, out = run("diff", part, full, "--store", store)
    assert code == 0, out
    assert (
        f"note: the baseline task {part} is STOPPED with 5 of 26 planned row(s); the rows it "
        "has not judged show as 'only in the current task'" in out
    ), out
    code, out = run("diff", full, full, "--store", store)
    assert code == 0 and "note:" not in out
