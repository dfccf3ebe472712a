"""Two reviewers and a lead on the demo airline task (docs/calibration.md walk-through): α
without the lead, the alternative annotator test per requirement, the gate on it and on the
same record whoever calibrated last, a v2 that changes one requirement's text leaving exactly
that requirement's labels out, and labels on a JUDGE_ERROR row kept and counted.

The labels are the shipped scenario ``cases/labels/airline_two_reviewers.jsonl``
(``scripts/make_review_scenario.py`` says how each line was made)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.testing.openai_stub import StubServer, load_verdicts, verdicts_responder
from tests.conftest import CASES, CASSETTES, RUBRICS

runner = CliRunner()
SCENARIO = CASES / "labels" / "airline_two_reviewers.jsonl"
CHANGED = "COMMON_NO_SUBJECTIVE_COMMENTS"


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def score(store: Path, out: Path, *extra: object, verdicts: dict[str, Any] | None = None) -> str:
    """Score the demo batch (replay, or live against the loopback stub with ``verdicts``)."""
    args: list[object] = ["score", CASES / "airline_tau2_dev.json", "--store", store,
                          "--out", out, "--display", "none", *extra]  # fmt: skip
    if verdicts is None:
        code, text = run(*args, "--rubric", "airline_cs", "--cassettes", CASSETTES)
    else:
        with StubServer(verdicts_responder(verdicts)) as server:
            code, text = run(*args, "--mode", "live", "--api-base", server.base_url,
                             "--model", "openai/stub-judge")  # fmt: skip
    assert code in (0, 4), text
    return text.split("task id: ")[1].split()[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("reviewers")
    store = folder / "store.sqlite"
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store)[0] == 0
    task = score(store, folder / "v1")
    code, out = run("labels", "import", SCENARIO, "--task", task, "--store", store)
    assert code == 0 and "imported 842 label(s)" in out, out
    return store, task


def calibrate(store: Path, task: str, *extra: object) -> dict[str, Any]:
    code, out = run("calibrate", task, "--store", store, "--format", "json", *extra)
    assert code == 0, out
    result: dict[str, Any] = json.loads(out)
    return result


def test_reviewer_alpha_leaves_the_lead_out(demo: tuple[Path, str]) -> None:
    import krippendorff
    import numpy as np

    store, task = demo
    result = calibrate(store, task, "--no-save")
    labels = [json.loads(line) for line in SCENARIO.read_text().splitlines()]
    units = sorted({(lab["rowId"], lab["requirementId"]) for lab in labels if "status" in lab})
    value = {"FOLLOWED": 0.0, "VIOLATED": 1.0, "PARTIAL": 1.0}

    def column(who: str) -> list[float]:
        mine = {(lab["rowId"], lab["requirementId"]): lab["status"] for lab in labels
                if lab["reviewer"] == who and "status" in lab}  # fmt: skip
        return [value.get(mine.get(u, ""), np.nan) for u in units]

    alpha = result["krippendorffAlpha"]
    two = krippendorff.alpha(reliability_data=[column("mia"), column("noah")],
                             level_of_measurement="nominal")  # fmt: skip
    three = krippendorff.alpha(reliability_data=[column("mia"), column("noah"), column("lena")],
                               level_of_measurement="nominal")  # fmt: skip
    assert alpha["reviewerCount"] == 2 and alpha["adjudicatorCount"] == 1
    assert alpha["reviewers"] == pytest.approx(two)
    assert alpha["withAdjudication"] == pytest.approx(three)
    assert alpha["withAdjudication"] > alpha["reviewers"]  # the lead sided with one of them
    _, text = run("calibrate", task, "--store", store, "--no-save")
    assert f"Krippendorff alpha: reviewers {two:.3f}" in text
    assert f"adjudicated: alpha {three:.3f} counting the 1 adjudicator(s)" in text


def test_the_alt_test_per_requirement_names_the_red_line_the_judge_cannot_take_over(
    demo: tuple[Path, str],
) -> None:
    store, task = demo
    result = calibrate(store, task, "--no-save", "--min-instances", "20")
    alt = result["altTest"]
    assert alt["reviewers"] == ["mia", "noah"] and alt["epsilon"] == 0.2
    verdicts = {r["id"]: r["passed"] for r in alt["status"]["requirements"]}
    assert verdicts.pop("COMMON_NO_FABRICATED_INFO") is False
    assert verdicts and all(verdicts.values())  # 13 common requirements the judge can take
    assert alt["status"]["passed"] is True and alt["score"]["passed"] is False
    fabricated = next(
        r for r in alt["status"]["requirements"] if r["id"] == "COMMON_NO_FABRICATED_INFO"
    )
    assert fabricated["critical"] is True and fabricated["winningRate"] == 0.0
    _, text = run("calibrate", task, "--store", store, "--no-save", "--min-instances", "20")
    assert (
        "the judge can stand in for a reviewer on 13 of 14 requirement(s) tested; not on the "
        "red lines COMMON_NO_FABRICATED_INFO" in text
    )
    assert "warning: 2 reviewers" in text
    # at the paper's minimum of 30 instances per reviewer, 25 rows are too few per requirement
    default = calibrate(store, task, "--no-save")["altTest"]
    assert all(r["passed"] is None for r in default["status"]["requirements"])
    assert [s["reviewer"] for s in default["intent"]["skipped"]] == ["mia", "noah"]
    assert default["status"]["passed"] is True  # 350 (row, requirement) instances each


def test_least_agreement_first_is_sorted_by_kappa_and_says_what_it_left_off(
    demo: tuple[Path, str],
) -> None:
    store, task = demo
    by_id = {r["id"]: r for r in calibrate(store, task, "--no-save")["requirements"]}
    disagree = sorted((r["kappa"], r["id"]) for r in by_id.values() if r["fp"] or r["fn"])
    _, text = run("calibrate", task, "--store", store, "--no-save")
    block = text.split("requirements (least agreement first, by kappa):\n")[1].splitlines()
    listed = [line.split(":")[0].strip() for line in block if line.startswith("  COMMON_")]
    assert listed == [name for _, name in disagree][: len(listed)] and len(listed) == 8
    more = len(disagree) - 8
    assert f"  … and {more} more with a disagreement, higher kappa" in text
    agreeing = sum(1 for r in by_id.values() if r["n"] and not (r["fp"] or r["fn"]))
    assert f"  {agreeing} requirement(s) with no disagreement" in text


def test_the_reviewers_as_the_baseline_rank_the_judge(demo: tuple[Path, str]) -> None:
    store, task = demo
    base = calibrate(store, task, "--no-save")["reviewerBaseline"]
    status = base["status"]
    assert [r["reviewer"] for r in status["reviewers"]] == ["mia", "noah"]
    assert status["raters"] == 3 and 1 <= status["judgeRank"] <= 3
    fabricated = next(r for r in status["requirements"] if r["id"] == "COMMON_NO_FABRICATED_INFO")
    assert fabricated["withinReviewers"] is False  # both reviewers saw what the judge missed


def test_the_gate_reads_the_same_calibration_whoever_ran_calibrate_last(
    demo: tuple[Path, str], tmp_path: Path
) -> None:
    store, task = demo
    code, out = run("calibrate", task, "--store", store, "--min-instances", "20")
    assert code == 0, out
    record = out.split("calibration id: ")[1].split()[0]
    checks = ("--threshold", "calibration.altTest.passed>=1",
              "--threshold", "calibration.altTest.status.passed>=1",
              "--threshold", "calibration.altTest.requirements.COMMON_NO_FABRICATED_INFO.passed>=1",
              "--threshold", "calibration.redFlagRecall.lower95>=0.8")  # fmt: skip
    code, first = run("gate", task, "--store", store, *checks)
    assert code == 7, first
    holds = "holds: calibration.altTest.status.passed = 1, needs >= 1"
    assert f"PASS  calibration.altTest.status.passed>=1 {holds} (calibration {record})" in first
    # every field tested must pass: the scores failed
    assert "FAIL  calibration.altTest.passed>=1 fails: calibration.altTest.passed = 0" in first
    assert (
        "FAIL  calibration.altTest.requirements.COMMON_NO_FABRICATED_INFO.passed>=1 fails" in first
    )
    # someone calibrates one reviewer's labels, then a file: the gate reads neither
    assert run("calibrate", task, "--store", store, "--reviewer", "noah")[0] == 0
    only_mia = tmp_path / "mia.jsonl"
    only_mia.write_text("".join(line + "\n" for line in SCENARIO.read_text().splitlines()
                                if '"reviewer": "mia"' in line))  # fmt: skip
    assert run("calibrate", task, "--store", store, "--labels", only_mia)[0] == 0
    code, again = run("gate", task, "--store", store, *checks)
    assert code == 7 and again == first


def test_a_v2_that_changes_one_requirement_leaves_exactly_its_labels_out(
    demo: tuple[Path, str], tmp_path: Path
) -> None:
    store, task = demo
    code, yaml_text = run("rubric", "show", "airline_cs@1", "--format", "yaml", "--store", store)
    assert code == 0
    v2 = yaml_text.replace("\nversion: 1\n", "\nversion: 2\n").replace(
        "no subjective recommendations or comments",
        "no subjective recommendations, ratings or comments",
    )
    (tmp_path / "v2.yaml").write_text(v2, encoding="utf-8")
    assert run("rubric", "publish", tmp_path / "v2.yaml", "--store", store)[0] == 0
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    second = score(store, tmp_path / "v2", "--rubric", "airline_cs@2", verdicts=verdicts)
    result = calibrate(store, second, "--no-save")
    labels = [json.loads(line) for line in SCENARIO.read_text().splitlines()]
    on_changed = sum(1 for lab in labels if lab.get("requirementId") == CHANGED)
    assert result["labels"]["leftOut"] == {
        "labels": on_changed, "requirements": {CHANGED: on_changed}, "rowLabels": 0,
    }  # fmt: skip
    by_id = {r["id"]: r for r in result["requirements"]}
    assert by_id[CHANGED]["n"] == 0 and by_id["COMMON_NO_FABRICATED_INFO"]["n"] == 25
    code, text = run("calibrate", second, "--store", store, "--no-save")
    said = f"left out: {on_changed} label(s) of what changed since they were made"
    assert f"{said}: {CHANGED} ({on_changed})" in text
    included = calibrate(store, second, "--no-save", "--include-changed")
    assert {r["id"]: r for r in included["requirements"]}[CHANGED]["n"] == 25
    assert included["labels"]["leftOut"]["labels"] == 0
    # labelling v2's task again: unchanged requirements are no new labels; the changed one is a
    # new judgment beside v1's, so v1's task keeps its own
    code, out = run("labels", "import", SCENARIO, "--task", second, "--store", store)
    assert code == 0 and f"imported {on_changed} label(s)" in out, out
    assert calibrate(store, second, "--no-save")["labels"]["leftOut"]["labels"] == 0
    old = {r["id"]: r for r in calibrate(store, task, "--no-save")["requirements"]}
    assert old[CHANGED]["n"] == 25


def test_labels_on_a_judge_error_row_are_kept_and_counted(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store)[0] == 0
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    broken = {**verdicts, "airline-5": {**verdicts["airline-5"], "intentKey": "NOT_AN_INTENT"}}
    task = score(store, tmp_path / "rep", "--rubric", "airline_cs", verdicts=broken)
    code, out = run("labels", "convert", "tau2", CASES / "airline_tau2_dev.json", "--out", tmp_path)
    assert code == 0, out
    converted = tmp_path / "airline_tau2_dev.labels.jsonl"
    on_row = sum(1 for line in converted.read_text().splitlines() if '"airline-5"' in line)
    assert on_row
    code, out = run("labels", "import", converted, "--task", task, "--store", store)
    assert code == 0 and "imported 58 label(s)" in out, out
    result = calibrate(store, task, "--no-save")
    assert result["excluded"]["noVerdictToCompare"] == 1
    assert result["overall"]["n"] == 58 - on_row


def test_two_judges_of_the_same_rows_side_by_side(demo: tuple[Path, str], tmp_path: Path) -> None:
    """A second judge that misses what the reviewers and the first judge saw on one rule (not a
    red line, so nothing is backfilled) of five rows: against the same reviewers, its advantage
    probability is lower, overall and on that rule."""
    store, task = demo
    verdicts = load_verdicts(CASES / "verdicts" / "airline_cs.jsonl")
    worse = dict(verdicts)
    for row_id in ("airline-0", "airline-1", "airline-3", "airline-5", "airline-24"):
        unmet = [r for r in verdicts[row_id]["unmetRequirementIds"]
                 if r != "COMMON_ONE_TOOL_CALL_AT_A_TIME"]  # fmt: skip
        worse[row_id] = {**verdicts[row_id], "unmetRequirementIds": unmet}
    other = score(store, tmp_path / "other", "--rubric", "airline_cs", verdicts=worse)
    result = calibrate(store, task, "--no-save", "--compare-with", other, "--min-instances", "20")
    side = result["judgeComparison"]["tests"]["status"]
    assert set(side) == {task, other}
    assert side[task]["advantageProbability"] > side[other]["advantageProbability"]
    assert result["judgeComparison"]["highestAdvantage"]["status"] == task
    confirmation = result["judgeComparison"]["tests"]["status:COMMON_ONE_TOOL_CALL_AT_A_TIME"]
    assert confirmation[task]["advantageProbability"] > confirmation[other]["advantageProbability"]


def test_the_stream_gives_the_same_calibration_on_postgresql(
    demo: tuple[Path, str], pg_url: str
) -> None:
    """Both stores order rowIds the same way (code points), so the merged stream and every
    figure are the same."""
    store, task = demo
    code, out = run("store", "migrate", "--from", store, "--to", pg_url)
    assert code == 0, out
    on_sqlite = calibrate(store, task, "--no-save", "--min-instances", "20")
    on_postgres = calibrate(pg_url, task, "--no-save", "--min-instances", "20")
    for key in ("overall", "requirements", "redFlags", "krippendorffAlpha", "altTest",
                "reviewerBaseline", "lengthLeniency", "excluded", "rows"):  # fmt: skip
        assert on_postgres[key] == on_sqlite[key], key


def test_labels_on_rows_outside_the_task_are_neither_used_nor_counted(
    store_at: str, tmp_path: Path
) -> None:
    """Current labels of the task's rubric on rows the task does not have, sorting before and
    after its rowIds, change nothing: not a figure, nor the count or digest of labels used."""
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store_at)[0] == 0
    task = score(store_at, tmp_path / "v1")  # type: ignore[arg-type]
    code, out = run("labels", "import", SCENARIO, "--task", task, "--store", store_at)
    assert code == 0 and "imported 842 label(s)" in out, out
    before = calibrate(store_at, task, "--no-save", "--min-instances", "20")  # type: ignore[arg-type]
    elsewhere = tmp_path / "elsewhere.jsonl"
    lines = [{"rowId": row, "reviewer": "mia", "requirementId": "COMMON_EXPLICIT_CONFIRMATION",
              "status": "VIOLATED", "rubricKey": "airline_cs", "rubricVersion": 1}
             for row in ("aaa-elsewhere", "airline-0x", "zzz-elsewhere")]  # fmt: skip
    elsewhere.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    code, out = run("labels", "import", elsewhere, "--store", store_at)
    assert code == 0 and "imported 3 label(s)" in out, out
    after = calibrate(store_at, task, "--no-save", "--min-instances", "20")  # type: ignore[arg-type]
    assert after == before
    assert before["labels"]["count"] == 842 - before["labels"]["leftOut"]["labels"]


def test_calibrate_reads_the_labelled_rows_by_rowid_and_every_row_once_in_input_order(
    tmp_path: Path,
) -> None:
    """The judge's observed rates need every row's result: read once, in input order (the order
    rows are stored in); the labelled rows' results are looked up by rowId, and no read takes
    the task's rows in rowId order (a page at a random place per row in a large store). Both
    reads check the rows' digests."""
    from rubric_engine.calibration.run import calibrate_task
    from rubric_engine.store.task_store import TaskStore

    store = tmp_path / "store.sqlite"
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store)[0] == 0
    task = score(store, tmp_path / "v1")
    labelled = {"airline-1", "airline-12", "airline-3", "airline-7"}
    lines = [line for line in SCENARIO.read_text("utf-8").splitlines()
             if json.loads(line)["rowId"] in labelled]  # fmt: skip
    (tmp_path / "some.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    code, out = run("labels", "import", tmp_path / "some.jsonl", "--task", task, "--store", store)
    assert code == 0 and f"imported {len(lines)} label(s)" in out, out
    with TaskStore(store) as opened:
        ran: list[str] = []
        opened.backend.connection.set_trace_callback(ran.append)
        result = calibrate_task(opened, task, save=False)
        opened.backend.connection.set_trace_callback(None)
    # both read every column of the row: its digest is checked (docs/verify.md)
    read = [sql for sql in ran if sql.startswith("SELECT task_id, seq, row_id, status, ")]
    every = [sql for sql in read if " IN (" not in sql]
    looked_up = [sql for sql in read if " IN (" in sql]
    assert every and all("ORDER BY seq" in sql for sql in every)
    assert len(looked_up) == 1 and looked_up[0].count("'airline-") == len(labelled)
    assert all(f"'{row}'" in looked_up[0] for row in labelled)
    on_rows = [sql for sql in ran if sql.partition(" FROM ")[2].startswith("rows ")]
    assert len(on_rows) == len(every) + 1 and not [s for s in on_rows if "ORDER BY row_id" in s]
    assert result["rows"] == {"reference": 4, "judge": 25, "compared": 4}
