"""The demo airline task scenario: import labels with one
override of the judge on a red line each way, calibrate, see the missed and the false red flag;
judge the same rows with another model and see the calibration reported stale."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rubric_engine.calibration.record import calibration_metrics
from rubric_engine.cli import app
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import StubServer, load_verdicts, verdicts_responder
from tests.conftest import CASES
from tests.test_labels import score_airline

runner = CliRunner()
REVIEWER = "demo-scenario"


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


#: the shipped scenario file: six labels agreeing with the judge, two overrides (cases/README.md)
REVIEW = CASES / "labels" / "airline_red_line_overrides.jsonl"


def calibrated_demo(tmp_path: Path) -> tuple[Path, str, dict]:  # type: ignore[type-arg]
    store, task = score_airline(tmp_path)
    code, out = run(
        "labels",
        "import",
        REVIEW,
        "--task",
        task,
        "--store",
        store,
    )
    assert code == 0, out
    # every reviewer's labels (here one): the selection the gate reads
    code, out = run("calibrate", task, "--store", store, "--format", "json")
    assert code == 0, out
    return store, task, json.loads(out)


def test_an_override_on_a_red_line_shows_as_a_missed_and_a_false_red_flag(tmp_path: Path) -> None:
    _, _, result = calibrated_demo(tmp_path)
    flags = {t["type"]: t for t in result["redFlags"]["types"]}
    assert flags["FABRICATED_INFO"]["missedRows"] == ["airline-3"]
    assert flags["FABRICATED_INFO"]["falseRows"] == ["airline-22"]
    assert flags["FABRICATED_INFO"]["recall"] == 0.5
    overall = result["redFlags"]["overall"]
    assert (overall["tp"], overall["fn"], overall["fp"]) == (6, 1, 1)
    assert overall["recallInterval95"][0] < 0.8  # 6 of 7 is far from certified
    assert result["omission"]["rows"] == []  # airline-3 has other unmet rules: not an omission
    assert result["calibrationId"].startswith("C")


def test_the_markdown_page_lists_red_flags_and_only_compared_requirements(tmp_path: Path) -> None:
    store, task, _ = calibrated_demo(tmp_path)
    code, out = run("calibrate", task, "--store", store, "--format", "md", "--no-save")
    assert code == 0, out
    assert "| FABRICATED_INFO | 1 | 1 | 1 | 0.500 | 0.500 |" in out
    # κ from 3 pairs is "too few", not a point; the rates keep their (wide) Wilson intervals
    assert (
        "| COMMON_NO_FABRICATED_INFO | 3 | 1 | 1 | 1 | 0 | too few | 0.500 [0.09, 0.91] | "
        "0.000 [0.00, 0.79] | 0.500 |" in out
    )
    assert "COMMON_BAGGAGE_ALLOWANCE" not in out  # never labelled: counted, not listed
    assert "requirement(s) of the task have no compared label" in out


def test_the_calibration_is_pinned_and_stale_for_another_judge_model(tmp_path: Path) -> None:
    store, task, result = calibrated_demo(tmp_path)
    with TaskStore(store) as opened:
        status = calibration_metrics(opened.task(task), opened.backend)
    assert status.state == "current" and status.record_id == result["calibrationId"]
    assert status.metrics["calibration.redFlagRecall"] == 6 / 7
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    with StubServer(verdicts_responder(verdicts)) as server:
        code, out = run(
            "score",
            CASES / "airline_tau2_dev.json",
            "--rubric",
            "airline_cs",
            "--store",
            store,
            "--mode",
            "live",
            "--api-base",
            server.base_url,
            "--model",
            "openai/stub-judge",
            "--out",
            tmp_path / "other",
            "--display",
            "none",
        )
    assert code == 0, out
    other = out.split("task id: ")[1].split()[0]
    with TaskStore(store) as opened:
        stale = calibration_metrics(opened.task(other), opened.backend)
    assert stale.state == "stale" and stale.metrics == {}
    assert "judge model 'openai/gpt-4o-mini' vs this task's 'openai/stub-judge'" in stale.reason
    assert f"rubric-eval calibrate {other}" in stale.reason


def test_judge_against_judge_over_the_same_rows_counts_flips(tmp_path: Path) -> None:
    """A second judge that differs on one rule of one row: that rule flips once in 25 rows."""
    store, task = score_airline(tmp_path)
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    # airline-12's only cap is DENY_AGAINST_POLICY (airline-4, used before, also has a critical
    # PARTIAL, which caps it: a red line is all or nothing, docs/protocol.md §8); a judge that does
    # not see the violation also scores above that rule's cap
    changed = dict(verdicts["airline-12"])
    changed["unmetRequirementIds"] = []  # drops DENY_AGAINST_POLICY
    changed["score"] = 3
    with StubServer(verdicts_responder({**verdicts, "airline-12": changed})) as server:
        code, out = run(
            "score",
            CASES / "airline_tau2_dev.json",
            "--rubric",
            "airline_cs",
            "--store",
            store,
            "--mode",
            "live",
            "--api-base",
            server.base_url,
            "--model",
            "openai/stub-judge",
            "--out",
            tmp_path / "other",
            "--display",
            "none",
        )
    assert code == 0, out
    other = out.split("task id: ")[1].split()[0]
    code, out = run("calibrate", task, "--against", other, "--store", store, "--format", "json")
    assert code == 0, out
    result = json.loads(out)
    flips = {r["id"]: r["flipRate"] for r in result["requirements"] if r["flipRate"]}
    assert flips == {"COMMON_DENY_AGAINST_POLICY": 1 / 25}
    assert result["overall"]["flipRate"] == 1 / result["overall"]["n"]
    # that rule caps the score, so the final score of that one row differs too
    assert result["rowFlips"] == {"rows": 25, "intent": 0.0, "finalScore": 1 / 25}


def test_a_missing_calibration_says_how_to_make_one(tmp_path: Path) -> None:
    store, task = score_airline(tmp_path)
    with TaskStore(store) as opened:
        status = calibration_metrics(opened.task(task), opened.backend)
    assert status.state == "missing"
    assert f"labels import FILE --task {task}" in status.reason


def test_the_gate_fails_on_calibration_red_flag_recall_and_on_a_stale_calibration(
    tmp_path: Path,
) -> None:
    store, task, _ = calibrated_demo(tmp_path)
    code, out = run(
        "gate",
        task,
        "--store",
        store,
        "--threshold",
        "calibration.redFlagRecall.lower95>=0.8",
        "--threshold",
        "calibration.redFlagRecall>=0.85",
    )
    assert code == 7, out
    assert (
        "FAIL  calibration.redFlagRecall.lower95>=0.8 fails: "
        "calibration.redFlagRecall.lower95 = 0.48" in out
    )
    assert "PASS  calibration.redFlagRecall>=0.85 holds" in out  # 6/7 = 0.857
    code, out = run("gate", task, "--store", store, "--threshold", "calibration.kapa>=0.6")
    assert code == 2 and "valid: " in out and "kappa" in out
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    with StubServer(verdicts_responder(verdicts)) as server:
        code, out = run(
            "score",
            CASES / "airline_tau2_dev.json",
            "--rubric",
            "airline_cs",
            "--store",
            store,
            "--mode",
            "live",
            "--api-base",
            server.base_url,
            "--model",
            "openai/stub-judge",
            "--out",
            tmp_path / "other",
            "--display",
            "none",
        )
    other = out.split("task id: ")[1].split()[0]
    code, out = run("gate", other, "--store", store, "--threshold", "calibration.kappa>=0.6")
    assert code == 7, out
    assert (
        "calibration.kappa>=0.6: no value in this task, so it cannot pass (calibration is stale:"
        in out
    )
    assert "judge model 'openai/gpt-4o-mini' vs this task's 'openai/stub-judge'" in out


def test_reports_show_the_calibration_once_there_is_one(tmp_path: Path) -> None:
    store, task, _ = calibrated_demo(tmp_path)
    code, out = run("report", task, "--store", store, "--out", tmp_path / "rebuilt")
    assert code == 0, out
    markdown = (tmp_path / "rebuilt" / "report.md").read_text(encoding="utf-8")
    assert "## Judge calibration" in markdown and "**current**" in markdown
    assert "| red-flag recall | 0.857 | [0.487, 0.974] |" in markdown
    html = (tmp_path / "rebuilt" / "report.html").read_text(encoding="utf-8")
    assert '<section id="calibration">' in html and "Judge calibration — current" in html
    assert "0.487 – 0.974" in html
    assert "calibration" not in (tmp_path / "rebuilt" / "report.json").read_text(encoding="utf-8")
    # a task never calibrated keeps its report exactly as before (no section)
    plain = tmp_path / "rep" / "report.md"
    assert "Judge calibration" not in plain.read_text(encoding="utf-8")


def test_run_gate_reads_the_pinned_calibration_from_the_store(tmp_path: Path) -> None:
    from rubric_engine.report.run import read_report, run_gate

    store, task, _ = calibrated_demo(tmp_path)
    result = run_gate(store, task, ["calibration.redFlagRecall>=0.85", "calibration.kappa>=0.99"])
    assert [c.passed for c in result.checks] == [True, True, False]
    assert read_report(task, store).calibration is None  # what report.json holds: no calibration
