"""`rubric-eval calibrate` as a new user runs it: two label
files give `overall` figures equal to scikit-learn's; the LLM-Rubric baselines come out to the
printed precision; tau2's recorded verdicts and HealthBench's grader convert to labels."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from tests.conftest import CASES, shared_data

runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_two_label_files_give_overall_figures_equal_to_scikit_learn(tmp_path: Path) -> None:
    sk = pytest.importorskip("sklearn.metrics")
    rng = random.Random(12)
    statuses = ["FOLLOWED"] * 6 + ["VIOLATED"] * 2 + ["PARTIAL", "NOT_APPLICABLE", "UNSURE"]
    human, judge, ref_bits, judge_bits = [], [], [], []
    for row in range(200):
        for req in range(6):  # 1,200 pairs, some outside the comparison
            h = rng.choice(statuses)
            j = h if rng.random() < 0.8 else rng.choice(statuses)
            ids = {"rowId": f"row-{row}", "requirementId": f"REQ_{req}"}
            human.append({**ids, "status": h, "reviewer": "expert-1"})
            judge.append({**ids, "status": j, "reviewer": "judge"})
            if {h, j} <= {"FOLLOWED", "VIOLATED", "PARTIAL"}:
                ref_bits.append(h != "FOLLOWED")
                judge_bits.append(j != "FOLLOWED")
    code, out = run(
        "calibrate",
        "--judge-labels",
        write(tmp_path / "judge.jsonl", judge),
        "--labels",
        write(tmp_path / "human.jsonl", human),
        "--format",
        "json",
    )
    assert code == 0, out
    overall = json.loads(out)["overall"]
    expected = {
        "n": len(ref_bits),
        "accuracy": sk.accuracy_score(ref_bits, judge_bits),
        "kappa": sk.cohen_kappa_score(ref_bits, judge_bits),
        "precisionUnmet": sk.precision_score(ref_bits, judge_bits),
        "recallUnmet": sk.recall_score(ref_bits, judge_bits),
        "f1Unmet": sk.f1_score(ref_bits, judge_bits),
    }
    for key, value in expected.items():
        assert round(overall[key], 3) == round(value, 3), key
    assert 700 < overall["n"] < 1200  # NOT_APPLICABLE / UNSURE pairs were left out


# The LLM-Rubric repository's README, "Baselines", real conversation data, Q0 (N = 223); its
# `expected` baseline scores the judge with fractional expected answers, which a label (a whole
# point) does not hold: see test_the_expected_answer_is_rounded_to_a_whole_point
LLM_RUBRIC_BASELINES = {
    "sample": (1.207228, 0.039810, 0.045245, 0.040967),
    "argmax": (1.201643, 0.140091, 0.086990, 0.081134),
}


@pytest.mark.parametrize("answer", sorted(LLM_RUBRIC_BASELINES))
def test_llm_rubric_baselines_come_out_of_calibrate(tmp_path: Path, answer: str) -> None:
    folder = shared_data("llm-rubric")
    code, out = run(
        "labels", "convert", "llm-rubric", folder, "--out", tmp_path, "--answer", answer
    )
    assert code == 0, out
    code, out = run(
        "calibrate",
        "--judge-labels",
        tmp_path / "judge.jsonl",
        "--labels",
        tmp_path / "human.jsonl",
        "--format",
        "json",
    )
    assert code == 0, out
    scores = json.loads(out)["scores"]
    assert scores["n"] == 223
    got = tuple(round(scores[k], 6) for k in ("rmse", "pearson", "spearman", "kendall"))
    assert got == LLM_RUBRIC_BASELINES[answer]


def test_the_expected_answer_is_rounded_to_a_whole_point(tmp_path: Path) -> None:
    """Scores are whole points in every mode: `--answer expected` rounds half up, says so, keeps
    the exact value, and calibrate's figures are those of the rounded scores."""
    import numpy as np
    from scipy import stats

    folder = shared_data("llm-rubric")
    code, out = run("labels", "convert", "llm-rubric", folder, "--out", tmp_path)
    assert code == 0 and "rounded to the nearest whole point, halves up" in out, out
    judge = [json.loads(x) for x in (tmp_path / "judge.jsonl").read_text().splitlines()]
    human = [json.loads(x) for x in (tmp_path / "human.jsonl").read_text().splitlines()]
    for lab in judge:
        exact = lab["metadata"]["expectedAnswer"]
        assert lab["score"] == int(exact + 0.5) and abs(lab["score"] - exact) <= 0.5
    code, out = run(
        "calibrate", "--judge-labels", tmp_path / "judge.jsonl",
        "--labels", tmp_path / "human.jsonl", "--format", "json",
    )  # fmt: skip
    assert code == 0, out
    scores = json.loads(out)["scores"]
    by_row = {lab["rowId"]: lab["score"] for lab in judge}
    ref = np.array([lab["score"] for lab in human], dtype=float)
    got = np.array([by_row[lab["rowId"]] for lab in human], dtype=float)
    assert scores["n"] == len(ref) == 223
    assert math.isclose(scores["rmse"], float(np.sqrt(np.mean((got - ref) ** 2))))
    assert math.isclose(scores["spearman"], float(stats.spearmanr(got, ref).statistic))


def test_a_fractional_score_is_refused_comparing_two_files(tmp_path: Path) -> None:
    judge = write(tmp_path / "j.jsonl", [{"rowId": "r1", "score": 2.5, "reviewer": "judge"}])
    human = write(tmp_path / "h.jsonl", [{"rowId": "r1", "score": 3, "reviewer": "ann"}])
    code, out = run("calibrate", "--judge-labels", judge, "--labels", human)
    assert code == 2, out
    assert "j.jsonl:1: score: 2.5 is not a whole point" in " ".join(out.split())


def test_tau2_recorded_verdicts_import_against_the_demo_task(tmp_path: Path) -> None:
    """tau2's own LLM judge per nl-assertion vs the demo's authored verdicts on the same
    case-level requirements: every converted label lands on a row and requirement of the task."""
    from tests.test_labels import score_airline

    store, task = score_airline(tmp_path)
    code, out = run("labels", "convert", "tau2", CASES / "airline_tau2_dev.json", "--out", tmp_path)
    assert code == 0 and "wrote 58 label(s)" in out
    labels = tmp_path / "airline_tau2_dev.labels.jsonl"
    code, out = run("labels", "import", labels, "--task", task, "--store", store)
    assert code == 0, out
    code, out = run("calibrate", task, "--store", store, "--format", "json", "--no-save")
    assert code == 0, out
    result = json.loads(out)
    assert result["overall"]["n"] == 58
    assert result["overall"]["tp"] + result["overall"]["fn"] == 12  # tau2's judge: 12 not met
    assert {r["category"] for r in result["requirements"] if r["n"]} == {"CASE"}


def test_healthbench_grader_verdicts_convert_with_the_sign_of_their_points(tmp_path: Path) -> None:
    source = shared_data("healthbench", "graded_consensus_runs_dev.jsonl")
    code, out = run("labels", "convert", "healthbench", source, "--out", tmp_path)
    assert code == 0 and "wrote 72 label(s)" in out
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    expected_unmet = sum(
        (not item["criteria_met"]) if item["points"] > 0 else item["criteria_met"]
        for row in rows
        for item in row["rubric_items"]
    )
    labels = [
        json.loads(line)
        for line in (tmp_path / "graded_consensus_runs_dev.labels.jsonl").read_text().splitlines()
    ]
    assert sum(lab["status"] == "VIOLATED" for lab in labels) == expected_unmet
    # the grader against itself agrees perfectly: the conversion loses nothing
    path = tmp_path / "graded_consensus_runs_dev.labels.jsonl"
    code, out = run("calibrate", "--judge-labels", path, "--labels", path, "--format", "json")
    assert json.loads(out)["overall"]["accuracy"] == 1.0 and json.loads(out)["overall"]["n"] == 72


def test_two_judges_side_by_side_on_the_alt_test_and_ids_in_natural_order(tmp_path: Path) -> None:
    """Three reviewers, two judge files: each judge's ρ beside the other's; the judge that
    copies the first reviewer is ahead of one that answers at random. Requirement IDs R2 and
    R10 are listed in that order, and no red-flag table is printed when no side has flags."""
    rng = random.Random(5)
    humans, good, noisy = [], [], []
    for row in range(40):
        for req in ("R10", "R2"):
            truth = rng.choice(["FOLLOWED", "VIOLATED"])
            ids = {"rowId": f"row-{row}", "requirementId": req}
            for who in ("ann", "bob", "cy"):
                flip = rng.random() < 0.1
                status = truth if not flip else ("FOLLOWED" if truth == "VIOLATED" else "VIOLATED")
                humans.append({**ids, "status": status, "reviewer": who})
            good.append({**ids, "status": truth, "reviewer": "judge-a"})
            noisy.append({**ids, "status": rng.choice(["FOLLOWED", "VIOLATED"]), "reviewer": "b"})
    files = [write(tmp_path / n, rows) for n, rows in
             (("a.jsonl", good), ("b.jsonl", noisy), ("h.jsonl", humans))]  # fmt: skip
    code, out = run("calibrate", "--judge-labels", files[0], "--judge-labels", files[1],
                    "--labels", files[2], "--format", "json")  # fmt: skip
    assert code == 0, out
    result = json.loads(out)
    side = result["judgeComparison"]["tests"]["status"]
    assert set(side) == {"a.jsonl", "b.jsonl"}
    assert (
        side["a.jsonl"]["advantageProbability"]
        == result["altTest"]["status"]["advantageProbability"]
    )
    assert side["a.jsonl"]["advantageProbability"] > side["b.jsonl"]["advantageProbability"]
    assert result["judgeComparison"]["highestAdvantage"]["status"] == "a.jsonl"
    assert result["altTest"]["status"]["passed"] is True
    code, md = run("calibrate", "--judge-labels", files[0], "--labels", files[2], "--format", "md")
    assert code == 0, md
    assert md.index("| R2 |") < md.index("| R10 |")
    assert "## Red flags" not in md


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--epsilon", "1.5", "--epsilon 1.5 must be in [0, 1): 0.2 for expert reviewers"),
        ("--fdr-q", "0", "--fdr-q 0.0 must be in (0, 1)"),
        ("--min-instances", "1", "--min-instances 1 must be at least 2"),
    ],
)
def test_alt_test_options_out_of_range_are_refused(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    labels = write(tmp_path / "h.jsonl", [{"rowId": "r1", "score": 3, "reviewer": "ann"}])
    code, out = run("calibrate", "--judge-labels", labels, "--labels", labels, option, value)
    assert code == 2 and said in " ".join(out.split()), out


def test_perfect_agreement_says_its_kappa_interval_is_a_point_and_why(tmp_path: Path) -> None:
    """Newcomer finding: labels equal to the judge's on every pair printed `kappa 1.000
    [1.000, 1.000]`, complete certainty, with no word that a bootstrap of no disagreement
    is a point or that labels made seeing the verdict agree this way. The text says both;
    one disagreement and the line is gone."""
    human, judge = [], []
    for row in range(30):
        ids = {"rowId": f"row-{row}", "requirementId": "REQ_A"}
        status = "VIOLATED" if row % 3 == 0 else "FOLLOWED"
        human.append({**ids, "status": status, "reviewer": "expert-1"})
        judge.append({**ids, "status": status, "reviewer": "judge"})
    labels = write(tmp_path / "human.jsonl", human)
    code, out = run(
        "calibrate", "--judge-labels", write(tmp_path / "j.jsonl", judge), "--labels", labels
    )
    assert code == 0, out
    assert "kappa 1.000 [1.000, 1.000]" in out
    assert "every pair agrees: kappa's bootstrap has no disagreement to resample" in out
    assert "what 30 pair(s) can show" in out and "sawJudgeVerdict: false" in out
    judge[0] = {**judge[0], "status": "FOLLOWED"}
    code, out = run(
        "calibrate", "--judge-labels", write(tmp_path / "j.jsonl", judge), "--labels", labels
    )
    assert code == 0 and "every pair agrees" not in out, out


def test_converting_a_folder_or_a_missing_file_says_which_it_is(tmp_path: Path) -> None:
    code, out = run("labels", "convert", "tau2", tmp_path, "--out", tmp_path / "out")
    assert code == 2 and f"{tmp_path} is a folder; give the results file inside it" in out
    missing = tmp_path / "results.json"
    code, out = run("labels", "convert", "tau2", missing, "--out", tmp_path / "out")
    assert code == 2 and "cannot read it (No such file or directory)" in out, out
    assert "as JSON" not in out
    missing.write_text("{not json", "utf-8")
    code, out = run("labels", "convert", "tau2", missing, "--out", tmp_path / "out")
    assert code == 2 and "cannot read it as JSON" in out
