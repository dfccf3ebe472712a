"""`rubric-eval ci` on the example suite (seed, golden, adversarial and production sets built
from the demo rows, a slice threshold on a metadata field, a cost budget, a latency SLO): the
checklist and JUnit XML, exit 7 naming a failing golden threshold, ``${VAR}`` and ``.env``,
CLI flags over the file, the baseline found from the last passing run, and the schema."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.suite import load_suite, suite_json_schema
from rubric_engine.suite.load import SuiteError
from tests.conftest import ROOT

SUITE = ROOT / "examples" / "rubric-eval.yaml"
runner = CliRunner()


def ci(tmp: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["ci", "--suite", str(SUITE), "--store", str(tmp / "store.sqlite"),
              "--out", str(tmp / "out"), "--branch", "main", *args],
    )  # fmt: skip
    return result.exit_code, result.output


def test_ci_prints_the_checklist_and_junit_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOLDEN_MEAN_MIN", raising=False)
    code, out = ci(tmp_path)
    assert code == 0, out
    for item in (
        "[seed set: every case passes]",
        "[golden set: main metrics meet",
        "[adversarial set]",  # its own threshold (redFlagRate<=0.6): no "at least 90%" claim
        "[cost within budget]",
        "[latency within SLO]",
        "[every slice passes]",
        "[no regression against",
    ):
        assert item in out, item  # fmt: skip
    assert "at least 90% refused" not in out
    assert "✓  health-golden: minMeanScoreBy.answerSource>=1.5   1.545" in out
    assert "✓  suite: agent duration p95" in out and "8109 ms" in out
    assert "ci passed: 20 of 20 check(s) hold" in out
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "20" and suite.get("failures") == "0"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert "health-golden: meanScore>=1.65" in names and "suite: costUsd" in names
    # the second run on main compares every dataset with the first (tolerant rule)
    code, out = ci(tmp_path)
    assert code == 0 and "health-golden: noRegression (tolerant)" in out, out
    runs = (tmp_path / "suite-runs.jsonl").read_text("utf-8").splitlines()
    assert len(runs) == 2 and json.loads(runs[0])["passed"] is True


def test_a_failing_golden_threshold_exits_7_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDEN_MEAN_MIN", "1.9")  # ${GOLDEN_MEAN_MIN:-1.65} in the suite
    code, out = ci(tmp_path)
    assert code == 7, out
    assert "✗  health-golden: meanScore>=1.9" in out
    assert out.rstrip().endswith("ci failed: 19 of 20 check(s) hold: health-golden: meanScore>=1.9")
    failures = [
        c.get("name")
        for c in ET.parse(tmp_path / "out" / "junit.xml").iter("testcase")
        if c.find("failure") is not None
    ]
    assert failures == ["health-golden: meanScore>=1.9"]


def test_cli_flags_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOLDEN_MEAN_MIN", raising=False)
    code, out = ci(tmp_path, "--cassettes", str(ROOT / "cassettes-worse"))
    assert code == 7
    assert "✗  health-golden: meanScore>=1.65" in out  # the worse verdicts: 1.5
    assert "✗  airline-adversarial: judgeErrors==0" in out  # no airline answers there


def _suite_file(folder: Path, body: str) -> Path:
    path = folder / "rubric-eval.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_variables_come_from_the_environment_then_the_env_file(tmp_path: Path) -> None:
    cases = ROOT / "cases" / "diagnosis" / "cases" / "diagnosis-cases.json"
    path = _suite_file(tmp_path, f"""name: t
store: ${{STORE_DIR}}/s.sqlite
datasets:
  - {{name: d, tier: production, inputs: ["{cases}"], judge: none,
     thresholds: ["passedRows>=${{MIN_PASSED:-1}}"]}}
""")  # fmt: skip
    (tmp_path / ".env").write_text("STORE_DIR=from-dotenv\nMIN_PASSED=2\n", encoding="utf-8")
    suite = load_suite(path, environ={})
    assert suite.store == tmp_path / "from-dotenv" / "s.sqlite"
    assert suite.datasets[0].thresholds == ["passedRows>=2"]
    suite = load_suite(path, environ={"STORE_DIR": "/elsewhere"})
    assert suite.store == Path("/elsewhere/s.sqlite")  # the environment wins over .env
    (tmp_path / ".env").unlink()
    with pytest.raises(SuiteError) as raised:
        load_suite(path, environ={})
    assert f"{path}:2: store: ${{STORE_DIR}} is not set" in str(raised.value)


def test_every_problem_of_a_suite_file_is_named_with_its_line(tmp_path: Path) -> None:
    path = _suite_file(
        tmp_path,
        """name: t
datasets:
  - name: a
    tier: gold
    inputs: [x.jsonl]
    rubric: health_cs
    thresholds: ["passrate>=0.9"]
  - name: b
    tier: seed
    inputs: [y.jsonl]
    colour: red
""",
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path, environ={})
    text = str(raised.value)
    assert f"{path}:4: datasets[0].tier" in text and "'seed'" in text
    assert f"{path}:11: datasets[1].colour" in text
    path = _suite_file(
        tmp_path,
        """name: t
datasets:
  - {name: a, tier: golden, inputs: [x.jsonl], rubric: k, thresholds: ["passrate>=0.9"]}
  - {name: a, tier: seed, inputs: [y.jsonl]}
""",
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path, environ={})
    text = str(raised.value)
    assert "unknown metric 'passrate'" in text and "used twice" in text
    assert "needs rubric: KEY (or judge: none)" in text
    code, out = ci(tmp_path.parent, "--suite", str(tmp_path / "missing.yaml"))
    assert code == 2 and "no suite file here" in out


def test_a_misspelt_threshold_is_named_beside_the_other_problems_of_the_file(
    tmp_path: Path,
) -> None:
    """A suite with a wrong tier and a misspelt threshold metric named the tier alone; the
    threshold showed only once the tier was fixed and the file run again. Both are named at
    once now, and the tier's problem says what was written."""
    path = _suite_file(
        tmp_path,
        """name: t
datasets:
  - name: a
    tier: gold
    inputs: [x.jsonl]
    rubric: health_cs
    thresholds: ["passrate>=0.9"]
tiers:
  seed: ["judgeErors==0"]
""",
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path, environ={})
    text = str(raised.value)
    assert f"{path}:4: datasets[0].tier" in text and "(got 'gold')" in text, text
    assert f"{path}:7: datasets[0].thresholds[0]" in text, text
    assert "unknown metric 'passrate' (did you mean passRate?)" in text
    assert f"{path}:9: tiers.seed[0]" in text and "unknown metric 'judgeErors'" in text, text


def test_the_exported_schema_is_current_and_validates_the_example() -> None:
    import jsonschema
    import yaml

    shipped = json.loads((ROOT / "examples" / "rubric-eval.schema.json").read_text("utf-8"))
    assert shipped == suite_json_schema()
    jsonschema.validate(yaml.safe_load(SUITE.read_text("utf-8")), shipped)


def test_judge_params_in_the_suite_reach_the_judge(tmp_path: Path) -> None:
    seed_rows = ROOT / "examples" / "data" / "health_seed.jsonl"
    body = f"""name: t
store: s.sqlite
rubrics: ["{ROOT / "rubrics" / "health_cs.yaml"}"]
judge: {{mode: replay, cassettes: "{ROOT / "cassettes"}", params: {{seed: 7}}}}
datasets:
  - {{name: a, tier: seed, inputs: ["{seed_rows}"], rubric: health_cs, passScore: 3}}
"""
    path = _suite_file(tmp_path, body)
    assert load_suite(path, environ={}).judge.params == {"seed": 7}
    result = runner.invoke(app, ["ci", "--suite", str(path), "--out", str(tmp_path / "o")])
    # the seed is part of every request, so the demo cassettes (recorded without) all miss
    assert result.exit_code == 7 and "✗  a: judgeErrors==0" in result.output, result.output
    path.write_text(body.replace(", params: {seed: 7}", ""), encoding="utf-8")
    result = runner.invoke(app, ["ci", "--suite", str(path), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 0, result.output


def test_own_thresholds_keep_judge_errors_failing_and_drop_the_tier_s_claim() -> None:
    """Newcomer finding: a seed dataset with `thresholds: ["meanScore>=1"]` passed under
    "[seed set: every case passes]" with 4 JUDGE_ERROR rows and a 3.6 % pass rate: its own
    thresholds had replaced the tier's, judgeErrors==0 included. A judged dataset keeps
    judgeErrors==0 unless it names a judgeErrors threshold itself, and a dataset on thresholds
    of its own is listed under "<tier> set", not under the tier's default line."""
    from rubric_engine.suite.checklist import ITEMS, item_for
    from rubric_engine.suite.model import Dataset, EvalSuite, dataset_thresholds, own_thresholds

    def dataset(**given: object) -> Dataset:
        return Dataset.model_validate({"name": "d", "inputs": ["x.jsonl"], "rubric": "k", **given})

    seed = dataset(tier="seed", thresholds=["meanScore>=1"])
    suite = EvalSuite(name="s", datasets=[seed])
    assert dataset_thresholds(suite, seed) == ["meanScore>=1", "judgeErrors==0"]
    allowed = dataset(tier="seed", thresholds=["meanScore>=1", "judgeErrors <= 2"])
    assert dataset_thresholds(suite, allowed) == ["meanScore>=1", "judgeErrors <= 2"]
    rules_only = dataset(tier="production", judge="none", rubric="", thresholds=["passedRows>=1"])
    assert dataset_thresholds(suite, rules_only) == ["passedRows>=1"]
    default = dataset(tier="seed")
    assert dataset_thresholds(suite, default) == ["passRate==1", "judgeErrors==0"]
    assert own_thresholds(suite, seed) and not own_thresholds(suite, default)
    assert ITEMS[item_for("seed", None, own=False)] == "seed set: every case passes"
    assert item_for("seed", None, own=True) == "seed set"
    assert item_for("golden", None, own=True) == "golden"  # its line claims no figure
