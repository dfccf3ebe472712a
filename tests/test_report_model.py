"""The typed report: report.json is the model's JSON byte for byte, gate and diff read
one metric table, gate and diff are library calls, and the pure report modules load no I/O."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_engine.engine import ScoreOptions, ScoreResult, score
from rubric_engine.errors import ConfigurationError, StoreError
from rubric_engine.report.aggregate import RowFacts
from rubric_engine.report.diff import DIFF_METRICS, DiffSide, diff_tasks
from rubric_engine.report.gate import check_parameters, check_threshold, parse_threshold
from rubric_engine.report.metrics import METRICS, Better, MetricKind, find_metric, metric_table
from rubric_engine.report.model import Report
from rubric_engine.report.render.json_md import render_markdown
from rubric_engine.report.run import run_diff, run_gate
from rubric_engine.results.model import RuleSummary
from rubric_engine.rubric.model import EvalRubric
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS
from tests.test_report_rules import report, row


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> ScoreResult:
    tmp = tmp_path_factory.mktemp("demo")
    return score(
        ScoreOptions(
            inputs=[CASES / "health_consult_zh.jsonl"],
            rubric=RUBRICS / "health_cs.yaml",
            draft=True,
            store=tmp / "s.sqlite",
            out=tmp / "out",
            cassettes=CASSETTES,
        )
    )


def test_report_json_round_trips_through_the_typed_report_byte_for_byte(demo: ScoreResult) -> None:
    written = demo.files.json.read_bytes()
    parsed = Report.model_validate_json(written)
    assert parsed == demo.report
    assert parsed.to_json().encode() == written
    # the Markdown is built from the typed report alone: the parsed copy gives the same bytes
    assert render_markdown(parsed).encode() == demo.files.markdown.read_bytes()


def test_optional_sections_round_trip_and_are_left_out_only_when_absent(
    mini_rubric: EvalRubric,
) -> None:
    rows = [row("a", 5), row("b", 2, violated=("REFUND_VERIFY",)), row("c", None)]
    rules = RuleSummary(case_id="a", passed=False, failed_checks=("x: y",), duration_ms=12)
    rows[0] = rows[0].model_copy(update={"rules": rules})
    meta = [{"scenario": "x"}, {"scenario": "y"}, {}]
    full = report(mini_rubric, rows, meta, by=("scenario", "intent"))
    text = full.to_json()
    assert Report.model_validate_json(text).to_json() == text
    keys = list(json.loads(text))
    assert keys.index("requirements") < keys.index("slices") < keys.index("issueClusters")
    assert keys[-1] == "rules" and json.loads(text)["rules"]["averageDurationMs"] == 12.0
    bare = json.loads(report(mini_rubric, rows[1:]).to_json())
    assert "slices" not in bare and "rules" not in bare and "checked" not in bare["totals"]
    for key in ("cassettes", "stopReason", "renormalizedFrom", "judgedUnder"):
        assert key not in bare["task"]
    assert bare["totals"]["meanJudgeScore"] == 2.0 and bare["lowestRows"][0]["judgeScore"] == 2


def test_gate_and_diff_read_one_metric_table(mini_rubric: EvalRubric) -> None:
    assert all(any(m is d for m in METRICS) for d in DIFF_METRICS)
    assert [m.name for m in DIFF_METRICS] == [
        "passRate",
        "meanScore",
        "judgeErrors",
        "redFlags.<TYPE>",
        "compliance.<REQUIREMENT_ID>",
        "intents.<INTENT_KEY>.meanScore",
        "toolCallsMean",
        "durationMsMean",
    ]
    base_rows = [row("a", 5), row("b", 4), row("c", 2, violated=("REFUND_VERIFY",))]
    cur_rows = [
        row("a", 1, violated=("COMMON_LEAK",), flags=("BACKEND_EXPOSURE",)),
        row("b", None),
        row("c", 4),
        row("d", 5),
    ]
    base = report(mini_rubric, base_rows, task_id="B")
    cur = report(mini_rubric, cur_rows, task_id="C")
    diff = diff_tasks(
        DiffSide(base, mini_rubric, [(r, RowFacts()) for r in base_rows]),
        DiffSide(cur, mini_rubric, [(r, RowFacts()) for r in cur_rows]),
    )
    aggregate = [i for i in diff.items if i.scope == "aggregate"]
    directed = [i for i in aggregate if i.type != "CHANGED"]
    assert {i.type for i in directed} == {"REGRESSION", "IMPROVEMENT"}
    for item in directed:
        found = find_metric(item.metric)
        assert found is not None, item.metric
        metric, param = found
        assert parse_threshold(f"{item.metric}>=0").metric is metric  # the gate's metric
        assert metric.value(base, param) == pytest.approx(item.baseline_value, abs=1e-4)
        up = item.current_value > item.baseline_value
        improved = up if metric.better is Better.HIGHER else not up
        assert (item.type == "IMPROVEMENT") == improved, item.metric
    rows_item = next(i for i in aggregate if i.metric == "rows")
    rows_metric = find_metric("rows")
    assert rows_item.type == "CHANGED" and rows_metric and rows_metric[0].better is Better.NEITHER


def test_metric_table_is_derived_from_the_typed_report(mini_rubric: EvalRubric) -> None:
    built = report(mini_rubric, [row("a", 5), row("b", 2, violated=("REFUND_VERIFY",))])
    table = {v.name: v for v in metric_table(built)}
    assert table["passRate"].value == 0.5 and table["passRate"].definition.kind is MetricKind.SHARE
    assert table["compliance.REFUND_VERIFY"].value == 0.5
    assert table["redFlags.BACKEND_EXPOSURE"].value == 0
    assert table["intents.REFUND.meanScore"].value == 3.5
    assert "minPassRateBy.<FIELD>" not in table and not any("By." in n for n in table)
    sliced = report(mini_rubric, [row("a", 5)], by=("intent",))
    assert {v.name: v.value for v in metric_table(sliced)}["minPassRateBy.intent"] == 1.0
    # a share is written 0–1, whatever its description says
    for metric in METRICS:
        if metric.kind is MetricKind.SHARE:
            name = metric.concrete("x")
            with pytest.raises(ConfigurationError, match="share from 0 to 1"):
                parse_threshold(f"{name}>=90")


def test_gate_and_diff_are_library_calls(demo: ScoreResult, tmp_path: Path) -> None:
    store = demo.files.json.parent.parent / "s.sqlite"
    result = run_gate(store, demo.task_id, ["passRate>=0", "judgeErrors==1"])
    assert [c.name for c in result.checks] == ["complete", "passRate>=0", "judgeErrors==1"]
    assert [c.passed for c in result.checks] == [True, True, False] and not result.passed
    same = run_diff(store, demo.task_id, demo.task_id)
    assert same.items == () and same.has_regression is False
    gated = run_gate(
        store, demo.task_id, baseline=demo.task_id, no_regression=True, allow_partial=True
    )
    assert [c.name for c in gated.checks] == ["noRegression"] and gated.passed
    with pytest.raises(StoreError, match="no task store here"):
        run_gate(tmp_path / "none.sqlite", demo.task_id, ["passRate>=0"])


PURE = (
    "rubric_engine.report.model",
    "rubric_engine.report.aggregate",
    "rubric_engine.report.accumulate",
    "rubric_engine.report.slices",
    "rubric_engine.report.clusters",
    "rubric_engine.report.per_row",
    "rubric_engine.report.outcome",
    "rubric_engine.report.metrics",
    "rubric_engine.report.gate",
    "rubric_engine.report.diff",
    "rubric_engine.report.diff_cases",
    "rubric_engine.report.rows",
    "rubric_engine.report.rules_section",
    "rubric_engine.report.render.json_md",
    "rubric_engine.report.render.junit",
)
IO_MODULES = (
    "sqlite3",
    "httpx",
    "litellm",
    "instructor",
    "rubric_engine.store.task_store",
    "rubric_engine.cli",
    "rubric_engine.report.stored",
)


def _loaded_after_import(module: str, watched: tuple[str, ...]) -> list[str]:
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print(' '.join(m for m in sys.argv[2:] if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, module, *watched],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout.split()


def test_importing_report_aggregate_does_not_import_sqlite3() -> None:
    """Regression: ``rubric_engine/report/__init__.py`` imported the store, so every pure report
    module loaded sqlite3."""
    assert _loaded_after_import("rubric_engine.report.aggregate", ("sqlite3",)) == []


@pytest.mark.parametrize("module", PURE)
def test_pure_report_modules_import_no_io_module(module: str) -> None:
    assert _loaded_after_import(module, IO_MODULES) == []


def test_pure_report_modules_do_not_load_yaml() -> None:
    assert _loaded_after_import("rubric_engine.report.aggregate", ("yaml",)) == []


def test_every_metric_definition_is_complete() -> None:
    """What a new definition (``calibration.*`` …) must carry for gate, diff and the README."""
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    for metric in METRICS:
        assert metric.description, metric.name
        assert metric.name.count("<") <= 1, metric.name
        assert not metric.in_diff or "{param}" in metric.label or not metric.takes_param
        assert not metric.in_diff or metric.label, metric.name
        assert (metric.kind is MetricKind.QUANTITY) == (metric.unit is not None), metric.name
        assert find_metric(metric.concrete("X")) == (metric, "X" if metric.takes_param else "")


def test_exact_figures_are_an_argument_not_ambient_state(mini_rubric: EvalRubric) -> None:
    """A gate decides on exact values (0.89995 must fail passRate>=0.9); a written report rounds
    to 4 places. The choice is the caller's argument, so two reports built side by side (or in
    concurrent tasks) never share it."""
    rows = [row("a", 5), row("b", 2), row("c", 2)]
    exact = report(mini_rubric, rows, exact=True, by=("intent",))
    rounded = report(mini_rubric, rows, by=("intent",))
    assert exact.totals.pass_rate == 1 / 3 and rounded.totals.pass_rate == 0.3333
    assert exact.intents[0].pass_rate == 1 / 3 and rounded.intents[0].pass_rate == 0.3333
    assert exact.slices and exact.slices[0].groups[0].pass_rate == 1 / 3
    threshold = parse_threshold("passRate>=0.33333")
    assert check_threshold(threshold, exact).passed is True
    assert check_threshold(threshold, rounded).passed is False  # 0.3333 once rounded


def test_calibration_metrics_are_read_from_the_section_passed_in_as_data(
    mini_rubric: EvalRubric,
) -> None:
    """The pure gate reads ``calibration.*`` from the report's calibration section (the edge
    attaches it); a stale or missing one fails with its reason; report.json never holds it."""
    from rubric_engine.report.calibration import calibration_section
    from rubric_engine.report.gate import check_parameters

    built = report(mini_rubric, [row("a", 5)])
    metrics = {"calibration.kappa": 0.7, "calibration.redFlagRecall": 0.9}
    metrics |= {"calibration.redFlagRecall.lower95": 0.6, "calibration.redFlagRecall.upper95": 1.0}
    current = built.model_copy(
        update={"calibration": calibration_section("current", "matches", metrics, "C1")}
    )
    assert current.to_json() == built.to_json()
    kappa, lower = (
        parse_threshold("calibration.kappa>=0.6"),
        parse_threshold("calibration.redFlagRecall.lower95>=0.8"),
    )
    assert (kappa.param, lower.param) == ("kappa", "redFlagRecall.lower95")
    assert check_threshold(kappa, current).passed is True
    failed = check_threshold(lower, current)
    assert failed.passed is False and "= 0.6, needs >= 0.8" in failed.message
    with pytest.raises(ConfigurationError, match="valid: kappa, redFlagRecall"):
        check_parameters([parse_threshold("calibration.kapa>=0.6")], current)
    table = {v.name: v.value for v in metric_table(current)}
    assert table["calibration.redFlagRecall.lower95"] == 0.6
    assert not any(n.startswith("calibration.") for n in {v.name for v in metric_table(built)})
    figures = {f.name: f for f in current.calibration.figures}  # type: ignore[union-attr]
    assert figures["calibration.redFlagRecall"].interval == (0.6, 1.0)
    assert figures["calibration.tnr"].value is None  # current but never measured
    stale = built.model_copy(
        update={"calibration": calibration_section("stale", "judge model 'a' vs 'b'", {}, "C1")}
    )
    check_parameters([kappa], stale)  # a documented name: accepted, and fails below
    # a misspelt one is refused before any calibration is current (newcomer finding: the
    # typo hid behind "calibration is missing", exit 7, until the first calibration)
    for without in (stale, built):
        with pytest.raises(ConfigurationError, match=r"docs/calibration\.md names, e\.g\. kappa"):
            check_parameters([parse_threshold("calibration.kapa>=0.6")], without)
    message = check_threshold(kappa, stale).message
    assert message.endswith("cannot pass (calibration is stale: judge model 'a' vs 'b')")
    assert "## Judge calibration" in render_markdown(stale)
    assert check_threshold(kappa, built).message.endswith(
        "no value in this task, so it cannot pass"
    )
    missing = built.model_copy(
        update={"calibration": calibration_section("missing", "no calibration", {})}
    )
    assert render_markdown(missing) == render_markdown(built)  # never calibrated: no section


def test_a_documented_calibration_figure_without_a_value_fails_never_unknown(
    mini_rubric: EvalRubric,
) -> None:
    """Newcomer finding: with a current calibration, calibration.intentAccuracy (undefined for
    those labels) was refused as an unknown metric (exit 2) while a stale calibration failed it
    (exit 7): a CI job flipped between the two as labels came in. A documented name now always
    fails as having no value; a misspelt one is still refused, listing the figures held."""
    from rubric_engine.report.calibration import calibration_section

    built = report(mini_rubric, [row("a", 5)])
    current = built.model_copy(
        update={
            "calibration": calibration_section(
                "current", "matches", {"calibration.kappa": 0.7}, "C1"
            )
        }
    )
    for name in (
        "intentAccuracy",
        "requirements.X_1.kappa.lower95",
        "redFlagRecall.SAFETY.lower95",
        "alpha.reviewers",
        "scoreSpearman",
    ):
        threshold = parse_threshold(f"calibration.{name}>=0.5")
        check_parameters([threshold], current)  # accepted
        failed = check_threshold(threshold, current)
        assert failed.passed is False and "has no such figure" in failed.message
    with pytest.raises(ConfigurationError, match="valid: kappa"):
        check_parameters([parse_threshold("calibration.kapa>=0.6")], current)


def test_a_pipe_in_a_row_id_or_tool_name_never_shifts_a_report_md_table(
    mini_rubric: EvalRubric,
) -> None:
    """Newcomer finding: a rowId `a|b` broke the rule-check table of report.md (`| a|b |
    must_contain: …`): the case column wrote the data's text unescaped. Every cell that holds
    text from the data (rowId, case id, tool name) is escaped: each table line keeps its
    columns."""
    rules = RuleSummary(
        case_id="a|b",
        passed=False,
        failed_checks=("must_contain: x|y",),
        evidence_coverage={"search|db": False},
        duration_ms=12,
    )
    rows = [row("a|b", 2, violated=("REFUND_VERIFY",)).model_copy(update={"rules": rules})]
    text = render_markdown(report(mini_rubric, rows))
    table = [line for line in text.splitlines() if "a\\|b" in line and line.startswith("|")]
    assert table, text
    tables: list[list[str]] = [[]]
    for line in text.splitlines():  # consecutive table lines form one table
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    for lines in filter(None, tables):
        bars = {line.replace("\\|", "").count("|") for line in lines}
        assert len(bars) == 1, lines  # every line as many columns as its header
    assert "| a\\|b | must_contain: x\\|y | search\\|db ✗ |" in text


def test_a_gate_on_a_point_figure_from_few_pairs_says_so(mini_rubric: EvalRubric) -> None:
    """Newcomer finding: with 6 labelled pairs `calibrate` printed "kappa too few" while
    `gate --threshold 'calibration.accuracy>=0.5'` printed PASS with no word of it. The check
    still holds or fails on the figure; its message now says how few pairs it rests on and
    which bound to gate on instead. Bounds, and figures from enough pairs, get no caution."""
    from rubric_engine.calibration.correction import MIN_PAIRS
    from rubric_engine.report.calibration import calibration_section

    built = report(mini_rubric, [row("a", 5)])

    def checked(text: str, metrics: dict[str, float]) -> str:
        section = calibration_section("current", "matches", metrics, "C1")
        current = built.model_copy(update={"calibration": section})
        return check_threshold(parse_threshold(text), current).message

    few = {"calibration.accuracy": 0.667, "calibration.accuracy.lower95": 0.3, "calibration.n": 6}
    message = checked("calibration.accuracy>=0.5", few)
    assert message.startswith("calibration.accuracy>=0.5 holds")
    assert f"caution: measured on 6 pair(s), fewer than {MIN_PAIRS}" in message
    assert "calibration.accuracy.lower95" in message
    assert "caution" not in checked("calibration.accuracy.lower95>=0.2", few)
    enough = few | {"calibration.n": MIN_PAIRS}
    assert "caution" not in checked("calibration.accuracy>=0.5", enough)
    per_req = {"calibration.requirements.X_1.kappa": 0.5, "calibration.requirements.X_1.n": 3}
    assert "measured on 3 pair(s)" in checked("calibration.requirements.X_1.kappa>=0.4", per_req)
