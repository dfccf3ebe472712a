"""The regression demo as a new user runs it: the health batch scored twice, the second time
from the deliberately worse authored verdicts in ``cassettes-worse/``; ``diff`` names the
regressions, ``gate --no-regression`` fails CI and its JUnit XML names the failing checks."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

WORSE = ROOT / "cassettes-worse"
runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(store, baseline task id, current task id)."""
    tmp = tmp_path_factory.mktemp("regression")
    store = tmp / "s.sqlite"
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    assert code == 0, out
    ids = []
    for name, cassettes in (("base", CASSETTES), ("worse", WORSE)):
        result = score(
            ScoreOptions(
                inputs=[CASES / "health_consult_zh.jsonl"],
                rubric="health_cs",
                store=store,
                out=tmp / name,
                cassettes=cassettes,
            )
        )
        assert result.cassette_misses == []
        ids.append(result.task_id)
    return store, ids[0], ids[1]


def test_worse_cassettes_say_they_are_deliberately_worse() -> None:
    entries = [
        json.loads(line)
        for line in (WORSE / "health_cs" / "health_consult_zh.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]
    assert len(entries) == 26
    for entry in entries:
        provenance = entry["provenance"]
        assert provenance["kind"] == "authored"
        assert "DELIBERATELY WORSE" in provenance["method"]


def test_diff_lists_regressions_at_case_and_aggregate_scope(demo: tuple[Path, str, str]) -> None:
    store, base, cur = demo
    code, out = run("diff", base, cur, "--store", store, "--format", "json")
    assert code == 0, out
    diff = json.loads(out)
    assert diff["hasRegression"] is True and diff["improvementCount"] == 0
    assert diff["rubricComparison"]["sameRubric"] is True
    found = {(i["type"], i["scope"], i["caseId"], i["metric"]) for i in diff["items"]}
    # the one passing row (medgpt-26-agent, 5) was re-judged at 3: pass -> fail
    assert ("REGRESSION", "case", "medgpt-26-agent", "passed") in found
    # medgpt-13-agent's card oversteps; the worse verdict calls it a red line
    assert ("REGRESSION", "case", "medgpt-13-agent", "redFlags.CARD_VIOLATION") in found
    assert ("REGRESSION", "case", "medgpt-45", "requirements.INTENT_HEALTH_ON_TOPIC") in found
    assert ("REGRESSION", "aggregate", None, "passRate") in found
    assert ("REGRESSION", "aggregate", None, "redFlags.CARD_VIOLATION") in found
    assert ("REGRESSION", "aggregate", None, "compliance.COMMON_QUESTIONS_CARD_RELEVANT") in found
    # medgpt-42 and medgpt-46 were regressions while a red line judged PARTIAL stayed PARTIAL
    # in the normal set; it is VIOLATED there too now (docs/protocol.md §8), so both sets agree
    regressed_rows = {i["caseId"] for i in diff["items"] if i["scope"] == "case"}
    assert regressed_rows == {
        "medgpt-24",
        "medgpt-45",
        "medgpt-13-agent",
        "medgpt-26-agent",
    }
    pass_rate = next(i for i in diff["items"] if i["metric"] == "passRate")
    assert pass_rate["baselineValue"] > pass_rate["currentValue"]
    assert pass_rate["delta"] == round(pass_rate["currentValue"] - pass_rate["baselineValue"], 4)
    code, text = run("diff", base, cur, "--store", store)
    assert code == 0 and "**REGRESSION**" in text
    assert text.index("## Regressions") < text.index("## Improvements")


def test_gate_no_regression_fails_and_junit_names_the_checks(
    demo: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, base, cur = demo
    junit = tmp_path / "gate.xml"
    code, out = run(
        "gate", cur, "--store", store,
        "--threshold", "judgeErrors==0",
        "--threshold", "redFlags.CARD_VIOLATION<=1",
        "--baseline", base, "--no-regression", "--junit", junit,
    )  # fmt: skip
    assert code == 7, out
    assert "gate failed" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["judgeErrors==0"].find("failure") is None
    failing = {name for name, c in cases.items() if c.find("failure") is not None}
    assert "redFlags.CARD_VIOLATION<=1" in failing
    assert "noRegression: case medgpt-13-agent redFlags.CARD_VIOLATION" in failing
    assert "noRegression: aggregate passRate" in failing
    assert suite.get("failures") == str(len(failing))


def test_gate_passes_against_itself_and_on_met_thresholds(
    demo: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, base, _ = demo
    junit = tmp_path / "gate.xml"
    code, out = run(
        "gate", base, "--store", store, "-t", "redFlags.SAFETY_OMISSION<=3", "-t", "judgeErrors==0",
        "--baseline", base, "--no-regression", "--junit", junit,
    )  # fmt: skip
    assert code == 0, out
    assert "4 of 4 check(s) hold" in out and "PASS  complete:" in out
    assert ET.parse(junit).getroot().get("failures") == "0"
    # the baseline may live in another store, e.g. a CI artifact of the last accepted run
    other = tmp_path / "baseline.sqlite"
    shutil.copy(store, other)
    code, out = run(
        "gate", base, "--store", store, "--baseline", base, "--baseline-store", other,
        "--no-regression",
    )  # fmt: skip
    assert code == 0 and "no regression against task" in out


def test_unknown_metric_is_an_error_listing_the_valid_names(demo: tuple[Path, str, str]) -> None:
    store, base, _ = demo
    code, out = run("gate", base, "--store", store, "-t", "passrate>=0.9")
    assert code == 2
    assert "unknown metric 'passrate'" in out and "passRate" in out and "redFlags.<TYPE>" in out
    assert "(did you mean passRate?)" in out
    code, out = run("gate", base, "--store", store, "-t", "redFlags.BACKEND==0")
    assert code == 2 and "BACKEND_EXPOSURE" in out and "COMPETITOR_MENTION" in out
    code, out = run("gate", base, "--store", store, "-t", "passRate=>0.9")
    assert code == 2 and "METRIC OP NUMBER" in out
    code, out = run("gate", base, "--store", store, "--no-regression")
    assert code == 2 and "--baseline" in out
    code, out = run("gate", base, "--store", store)
    assert code == 2 and "nothing to check" in out


def test_a_metric_without_a_value_fails_rather_than_passing(demo: tuple[Path, str, str]) -> None:
    store, base, _ = demo
    code, out = run("gate", base, "--store", store, "-t", "costUsd<=1")
    assert code == 7 and "no value" in out  # replayed calls have no known cost


def test_report_slices_and_html_from_the_store(demo: tuple[Path, str, str]) -> None:
    store, base, _ = demo
    code, out = run("report", base, "--store", store, "--format", "json", "--by", "answerSource")
    assert code == 0, out
    report = json.loads(out)
    groups = {g["value"]: g for g in report["slices"][0]["groups"]}
    assert sum(g["rows"] for g in groups.values()) == 26
    assert groups["original (MedicalGPT sample data)"]["rows"] == 22
    twice = ("--by", "answerSource", "--by", "intent", "--by", "answerSource")
    code, out = run("report", base, "--store", store, "--format", "json", *twice)
    assert code == 0, out  # a name given twice is one slice (the section was written twice)
    assert [s["by"] for s in json.loads(out)["slices"]] == ["answerSource", "intent"], out
    code, out = run("report", base, "--store", store, "--by", "ward")
    assert code == 2 and "valid: intent, category, answerSource" in out
    code, html = run("report", base, "--store", store, "--format", "html")
    assert code == 0
    assert html.index('id="red-flags"') < html.index('id="summary"') < html.index('id="rows"')
    assert "http://" not in html and "https://" not in html


def test_tasks_under_two_rubric_versions_are_compared_on_shared_ids(
    demo: tuple[Path, str, str], tmp_path: Path
) -> None:
    """v2 drops COMMON_TRANSFER_PATH; `renormalize` re-scores the v1 task's judge outputs under
    it, and the diff says it compared the two versions on the IDs both declare."""
    import yaml

    store, base, _ = demo
    code, text = run("rubric", "show", "health_cs@1", "--format", "yaml", "--store", store)
    assert code == 0, text
    pack = yaml.safe_load(text)
    pack["version"] = 2
    pack["commonRequirements"] = [
        r for r in pack["commonRequirements"] if r["id"] != "COMMON_TRANSFER_PATH"
    ]
    v2 = tmp_path / "health_v2.yaml"
    v2.write_text(yaml.safe_dump(pack, allow_unicode=True, sort_keys=False), encoding="utf-8")
    code, out = run("rubric", "publish", v2, "--store", store)
    assert code == 0, out
    code, out = run("renormalize", base, "-r", "health_cs@2", "--store", store, "--out", tmp_path)
    assert code == 0, out
    current = re.search(r"task id: (\S+)", out).group(1)  # type: ignore[union-attr]
    code, out = run("diff", base, current, "--store", store, "--format", "json")
    assert code == 0, out
    comparison = json.loads(out)["rubricComparison"]
    assert comparison["sameRubric"] is False
    assert comparison["onlyInBaseline"] == ["COMMON_TRANSFER_PATH"]
    assert comparison["baseline"]["version"] == 1 and comparison["current"]["version"] == 2
    assert "compared on the 34 IDs both declare" in comparison["note"]
    assert all("COMMON_TRANSFER_PATH" not in i["metric"] for i in json.loads(out)["items"])
    code, text = run("diff", base, current, "--store", store)
    assert "different rubrics (health_cs v1 → health_cs v2)" in text


def test_a_partial_run_fails_the_gate_and_its_missing_rows_are_regressions(
    demo: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, base, _ = demo
    partial = score(
        ScoreOptions(
            inputs=[CASES / "health_consult_zh.jsonl"],
            rubric="health_cs@1",  # another test here publishes v2
            store=store,
            out=tmp_path / "partial",
            cassettes=CASSETTES,
            max_calls=5,
        )
    )
    assert partial.stopped is not None, partial.report
    assert partial.report["totals"]["judgeErrors"] == 0, partial.report["judgeErrors"][:1]
    code, out = run("gate", partial.task_id, "--store", store, "-t", "judgeErrors==0")
    assert code == 7 and "FAIL  complete:" in out and "is STOPPED with 5 of 26" in out
    code, out = run(
        "gate", partial.task_id, "--store", store, "-t", "judgeErrors==0", "--allow-partial"
    )
    assert code == 0, out
    code, out = run(
        "gate", partial.task_id, "--store", store, "--baseline", base, "--no-regression",
        "--allow-partial",
    )  # fmt: skip
    assert code == 7 and "judged in the baseline, no result in the current task" in out


def test_gate_and_diff_name_an_unwritable_output(
    demo: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, base, worse = demo
    code, out = run("diff", base, worse, "--store", store, "--out", tmp_path)
    assert code == 2 and f"--out {tmp_path} is a folder" in out
    code, out = run("gate", base, "--store", store, "-t", "judgeErrors==0", "--junit", tmp_path)
    assert code == 2 and f"--junit {tmp_path} is a folder" in out and "PASS" not in out
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    code, out = run("diff", base, worse, "--store", store, "--out", blocked / "diff.md")
    assert code == 2 and "cannot write it" in out


def test_gate_decides_on_exact_values_not_rounded_ones(demo: tuple[Path, str, str]) -> None:
    store, base, _ = demo
    code, out = run("report", base, "--store", store, "--format", "json")
    totals = json.loads(out)["totals"]
    exact = totals["passedRows"] / totals["scored"]
    assert round(exact, 4) != exact  # the report shows a rounded figure
    just_above = f"{round(exact, 4) + 0.00001:.5f}" if round(exact, 4) < exact else None
    limit = just_above or f"{round(exact, 4):.4f}"
    code, out = run("gate", base, "--store", store, "-t", f"passRate>={limit}")
    assert (code == 7) == (exact < float(limit)), out


@pytest.mark.parametrize(
    ("given", "meant"),
    [("meanscore", "meanScore"), ("redflags.CARD_VIOLATION", "redFlags.CARD_VIOLATION"),
     ("passRat", "passRate"), ("Stability.kappa", "stability.kappa"), ("zzz", None)],
)  # fmt: skip
def test_an_unknown_metric_names_the_one_most_likely_meant(given: str, meant: str | None) -> None:
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.report.gate import parse_threshold

    with pytest.raises(ConfigurationError) as refused:
        parse_threshold(f"{given}>=0.5")
    assert ("did you mean" in str(refused.value)) is (meant is not None)
    if meant:
        assert f"(did you mean {meant}?)" in str(refused.value)
