"""``rubric-eval trend`` over three demo runs of one name, the last with the deliberately worse
cassettes: the drop shows in the terminal (▼) and as red segments of the SVG chart."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.rubric.versions import RubricRegistry
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_three_runs_show_the_drop_in_the_terminal_and_the_chart(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with TaskStore(store) as opened:
        RubricRegistry(opened).publish(RUBRICS / "health_cs.yaml")
    for n, cassettes in enumerate((CASSETTES, CASSETTES, ROOT / "cassettes-worse")):
        code, out = run("score", CASES / "health_consult_zh.jsonl", "-r", "health_cs",
                        "--name", "nightly", "--tag", f"run{n}", "--cassettes", cassettes,
                        "--store", store, "--out", tmp_path / f"r{n}", "-q")  # fmt: skip
        assert (code, out) == (0, "")
    page = tmp_path / "trend.html"
    code, out = run("trend", "nightly", "--store", store, "--html", page, "-m", "meanScore",
                    "-m", "passRate", "-m", "redFlags.CARD_VIOLATION")  # fmt: skip
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "trend of nightly: 3 task(s), oldest first"
    first, second, third = (re.split(r"\s{2,}", x) for x in lines[2:5])
    assert first[4:7] == second[4:7] == ["1.692", "0.0385", "1"]
    assert third[4:7] == ["1.5 ▼", "0 ▼", "2 ▼"]
    assert "  ▼ meanScore: 1.692 → 1.5 (task" in out
    # run-to-run agreement: the rows each run shares with the one before, read from rows.jsonl
    stable = out.split("run-to-run agreement with the task before (rows judged in both):\n")[1]
    table = [re.split(r"\s{2,}", x) for x in stable.splitlines()[1:3]]
    assert table[0] == ["2", "26", "1", "0", "0"]
    before, after = (_marks(tmp_path / f"r{n}" / "rows.jsonl") for n in (1, 2))
    outcome = sum(before[r][0] != after[r][0] for r in after)
    score = sum(before[r][1] != after[r][1] for r in after)
    assert 0 < outcome <= score  # the worse cassettes move some rows, not all
    assert table[1] == ["3", "26", f"{(26 - outcome) / 26:.3g}", str(outcome), str(score)]
    assert re.search(r"CARD_VIOLATION.*\n1 .*\n2 .*\n3 +(\S+ +){2}0\.0769 ▼", out), out
    svg = page.read_text("utf-8")
    assert f"26 rows in both: {outcome} changed outcome, {score} changed score" in svg
    assert svg.count("<svg") == 3 and 'class="worse"' in svg
    # each chart: the first segment holds, the second (to the worse run) is drawn red
    charts = svg.split("<svg")[1:]
    for chart in charts:
        assert [m for m in re.findall(r'class="(worse|same)"', chart)] == ["same", "worse"]
    # the HTML report of each named task charts its name's earlier tasks and itself
    assert '<section id="trend">' not in (tmp_path / "r0" / "report.html").read_text("utf-8")
    report = (tmp_path / "r2" / "report.html").read_text("utf-8")
    section = report.split('<section id="trend">')[1].split("</section>")[0]
    assert section.count("<svg") == 2 and section.count('class="worse"') == 2
    # a name nobody used is an error naming the known ones
    code, out = run("trend", "nope", "--store", store)
    assert code == 2 and "names: nightly" in out
    code, out = run("trend", "nightly", "--store", store, "-m", "meanScor")
    assert code == 2 and "not a metric" in out


def test_a_change_of_rubric_version_is_marked(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    v2 = tmp_path / "health_cs_v2.yaml"
    text = (RUBRICS / "health_cs.yaml").read_text("utf-8")
    v2.write_text(re.sub(r"(?m)^version: 1$", "version: 2", text), "utf-8")
    with TaskStore(store) as opened:
        RubricRegistry(opened).publish(RUBRICS / "health_cs.yaml")
        RubricRegistry(opened).publish(v2)
    # v2's snapshot hash keys no cassette: its rows are JUDGE_ERROR (exit 4), still a task
    for ref, exit_code in (("health_cs@1", 0), ("health_cs@2", 4)):
        code, out = run("score", CASES / "health_consult_zh.jsonl", "-r", ref, "--tag", "weekly",
                        "--cassettes", CASSETTES, "--store", store, "--out", tmp_path / ref,
                        "-q")  # fmt: skip
        assert code == exit_code, out
    code, out = run("trend", "tag:weekly", "--store", store, "-m", "judgeErrors")
    assert code == 0, out
    assert re.search(r"\n2 .* health_cs@2 +26 +26 ▼ +\* rubric health_cs@1→health_cs@2\n", out), out


def test_a_task_id_is_answered_with_the_name_or_tag_to_follow(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with TaskStore(store) as opened:
        RubricRegistry(opened).publish(RUBRICS / "health_cs.yaml")
    for named in ((), ("--name", "nightly", "--tag", "v1")):
        code, out = run("score", CASES / "health_consult_zh.jsonl", "-r", "health_cs", *named,
                        "--cassettes", CASSETTES, "--store", store, "--out", tmp_path / "r",
                        "--display", "none")  # fmt: skip
        assert code == 0, out
    with TaskStore(store) as opened:
        unnamed, named_id = (t.id for t in opened.tasks())
    code, out = run("trend", named_id, "--store", store)
    assert code == 2
    assert f"{named_id!r} is one task's id" in out
    assert "belongs to nightly, tag:v1: run `rubric-eval trend nightly`" in out
    code, out = run("trend", unnamed, "--store", store)
    assert code == 2 and "has no name or tag" in out and "score --name NAME" in out


def _marks(rows: Path) -> dict[str, tuple[str, int | None]]:
    """(outcome, final score) by rowId as a reader of rows.jsonl works them out: a red flag
    first, then PASS at 4 or more on the 1–5 scale (docs/reports.md)."""
    marks = {}
    for line in rows.read_text("utf-8").splitlines():
        row = json.loads(line)
        score = row["finalScore"]
        outcome = "RED_FLAG" if row["redFlagTypes"] else "PASS" if score >= 4 else "FAIL"
        marks[row["rowId"]] = (outcome, score)
    return marks


def test_a_flat_line_is_drawn_within_what_the_metric_can_be() -> None:
    """Newcomer finding: a pass rate constant at 0.0357 was drawn on an axis from -0.464 to
    0.536 (half a unit either side). A flat share is drawn on 0–1, a flat non-negative figure
    from 0 or above: no axis label is ever below zero."""
    from rubric_engine.report.render.trend_svg import trend_svg
    from rubric_engine.report.trend import Trend, TrendPoint

    def point(i: int, values: tuple[float, ...]) -> TrendPoint:
        return TrendPoint(f"t{i}", "2026-12-05", f"t{i}", "k@1", "m", "p", 28, values)

    metrics = ("passRate", "meanScore", "judgeErrors")
    flat = Trend("name", metrics, tuple(point(i, (0.0357, 3.0, 0.0)) for i in range(3)), ())
    labels = {
        m: [float(t) for t in re.findall(r'font-size="10">([-0-9.e]+)</text>', trend_svg(flat, m))]
        for m in metrics
    }
    assert labels["passRate"] == [1.0, 0.0]  # high, then low
    assert labels["meanScore"] == [3.5, 2.5]
    assert labels["judgeErrors"] == [1.0, 0.0]


def test_an_earlier_task_that_fails_its_check_is_left_out_of_the_chart_not_the_report(
    tmp_path: Path,
) -> None:
    """A row edited in an earlier task of the name stops neither the next run's report nor
    `report`: its HTML page charts the tasks it can read and names the one left out."""
    import sqlite3

    store = tmp_path / "s.sqlite"
    with TaskStore(store) as opened:
        RubricRegistry(opened).publish(RUBRICS / "health_cs.yaml")

    def scored(n: int) -> str:
        code, out = run("score", CASES / "health_consult_zh.jsonl", "-r", "health_cs",
                        "--name", "nightly", "--store", store, "--out", tmp_path / f"r{n}",
                        "--display", "none")  # fmt: skip
        assert code == 0, out
        return re.findall(r"task id: (\S+)", out)[0]

    first = scored(0)
    scored(1)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE rows SET final_score = 5 WHERE task_id = ? AND seq = 0", (first,))
    third = scored(2)
    page = (tmp_path / "r2" / "report.html").read_text("utf-8")
    section = page.split('<section id="trend">')[1].split("</section>")[0]
    assert section.count("<svg") == 2  # the second and third tasks, charted
    assert f"Left out of the trend: task {first}: " in section and "digest" in section
    code, out = run("report", third, "--store", store, "--out", tmp_path / "again")
    assert code == 0, out
    assert (tmp_path / "again" / "report.html").read_text("utf-8") == page
    code, out = run("report", first, "--store", store, "--out", tmp_path / "edited")
    assert code == 3 and first in out  # the edited task itself is still refused
