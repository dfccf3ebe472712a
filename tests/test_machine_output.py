"""What CI scripts read: ``score``/``gate``/``ci --json`` print exactly one JSON object on stdout
(docs/json-output.md), ``-q`` prints only errors, and the documented schemas are the models'."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_engine.report.summary import CiSummary, GateSummary, ScoreSummary
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

CLI = [sys.executable, "-m", "rubric_engine.cli"]
HEALTH = [str(CASES / "health_consult_zh.jsonl"), "-r", str(RUBRICS / "health_cs.yaml"), "--draft"]


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(
        [*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )


def one_object(stdout: str) -> dict[str, object]:
    """stdout holds exactly one JSON object and nothing else (one line)."""
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
    value = json.loads(stdout)
    assert isinstance(value, dict)
    return value


def test_score_json_is_one_object_that_matches_the_report(tmp_path: Path) -> None:
    done = cli("score", *HEALTH, "--cassettes", CASSETTES, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = one_object(done.stdout)
    ScoreSummary.model_validate(summary)
    report = json.loads((tmp_path / str(summary["reports"]["json"])).read_text("utf-8"))  # type: ignore[index]
    assert summary["taskId"] == report["task"]["id"]
    assert summary["state"] == "COMPLETED" and summary["exitMeaning"] == "done"
    assert summary["rows"] == {"planned": 26, "total": 26, "scored": 26, "judgeErrors": 0,
                               "checked": 0, "passed": report["totals"]["passedRows"]}  # fmt: skip
    assert summary["metrics"]["meanScore"] == report["totals"]["meanScore"]  # type: ignore[index]
    # a rate worked out for the summary is rounded as the report rounds its figures
    flagged = report["totals"]["rowsWithRedFlags"] / report["totals"]["scored"]
    assert summary["metrics"]["redFlagRate"] == round(flagged, 4) == 0.5385  # type: ignore[index]
    assert summary["rubric"] == "health_cs@1"


def test_quiet_prints_nothing_on_success_and_only_the_error_on_failure(tmp_path: Path) -> None:
    done = cli("score", *HEALTH, "--cassettes", CASSETTES, "-q", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    empty = tmp_path / "no-cassettes"
    empty.mkdir()
    missed = cli("score", *HEALTH, "--cassettes", empty, "-q", cwd=tmp_path)
    assert missed.returncode == 4 and missed.stdout == ""
    assert missed.stderr.startswith("error: 26 row(s) had no cassette entry")
    # --json on the same failure still prints one object, with the exit code and its meaning
    as_json = cli("score", *HEALTH, "--cassettes", empty, "--json", cwd=tmp_path)
    summary = one_object(as_json.stdout)
    assert as_json.returncode == summary["exitCode"] == 4
    assert summary["rows"]["judgeErrors"] == 26  # type: ignore[index]
    assert "no cassette entry" in summary["notes"][0]  # type: ignore[index]


def test_json_of_a_command_that_fails_before_a_result_carries_the_error(tmp_path: Path) -> None:
    done = cli("score", CASES / "health_consult_zh.jsonl", "-r", "nope", "--json", cwd=tmp_path)
    summary = one_object(done.stdout)
    assert done.returncode == summary["exitCode"] == 2 and summary["taskId"] is None
    assert "no store at" in str(summary["error"]) and done.stderr.startswith("error: no store")
    gate = cli("gate", "missing-task", "--store", tmp_path / "none.sqlite", "--json", cwd=tmp_path)
    gate_summary = one_object(gate.stdout)
    GateSummary.model_validate(gate_summary)
    assert gate.returncode == gate_summary["exitCode"] != 0 and gate_summary["error"]


def test_gate_json_lists_every_check(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    scored = cli("score", *HEALTH, "--cassettes", CASSETTES, "--store", store, "--json",
                 cwd=tmp_path)  # fmt: skip
    task = one_object(scored.stdout)["taskId"]
    done = cli("gate", task, "--store", store, "-t", "meanScore>=2", "-t", "judgeErrors==0",
               "--json", cwd=tmp_path)  # fmt: skip
    summary = one_object(done.stdout)
    assert done.returncode == summary["exitCode"] == 7 and summary["passed"] is False
    assert [(c["name"], c["passed"]) for c in summary["checks"]] == [  # type: ignore[attr-defined]
        ("complete", True), ("meanScore>=2", False), ("judgeErrors==0", True)]  # fmt: skip


def test_ci_json_and_markdown(tmp_path: Path) -> None:
    for folder in ("examples", "cases", "rubrics", "cassettes"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    md = tmp_path / "summary.md"
    done = cli("ci", "--suite", "examples/rubric-eval.yaml", "--json", "--markdown", md,
               cwd=tmp_path)  # fmt: skip
    summary = one_object(done.stdout)
    CiSummary.model_validate(summary)
    assert done.returncode == summary["exitCode"] == 0 and summary["passed"] is True
    assert len(summary["checks"]) == 20 and summary["regressions"] == []  # type: ignore[arg-type]
    assert "scored health-seed (seed): task" in done.stderr
    text = md.read_text("utf-8")
    assert text.startswith("## rubric-eval ci: demo-suite passed\n\n20 of 20 check(s) hold.")
    assert "| ✓ | health-golden: meanScore>=1.65 | 1.692 | >= 1.65 |" in text


@pytest.mark.parametrize("model", [ScoreSummary, GateSummary, CiSummary])
def test_the_documented_schemas_are_the_models(model: type[ScoreSummary]) -> None:
    doc = (ROOT / "docs" / "json-output.md").read_text("utf-8")
    schema = json.dumps(model.model_json_schema(by_alias=True), indent=2)
    assert f"```json\n{schema}\n```" in doc, f"docs/json-output.md: refresh {model.__name__}"
