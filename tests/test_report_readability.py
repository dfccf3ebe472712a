"""Reports a PM can read, checked in headless Chromium on a 2,000-row report: the summary is on
the first screen (the red-flag bucket shows per type the count, the red lines that raised it and
up to 5 example rows, not every row id), the glossary exists, the text filter does not match the
requirement IDs every row carries, a red flag's link filters the drill-down to it; compliance
bars are coloured by compliance with red lines badged; case-level requirements show their text;
Markdown escapes HTML-like text; the HTML diff page renders with no console errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.report.render.html import compliance_band
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS
from tests.test_html_report import needs_chromium, open_in_chromium

runner = CliRunner()
FIRST_SCREEN_PX = 900  # a 1280x900 window, the probe's page is 1280 wide


@pytest.fixture(scope="module")
def big_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.replicate import make_replica

    tmp = tmp_path_factory.mktemp("big")
    replica = make_replica(tmp / "replica", 2000)
    result = score(
        ScoreOptions(inputs=[replica.rows], rubric=RUBRICS / "health_cs.yaml", draft=True,
                     store=tmp / "s.sqlite", out=tmp / "out", cassettes=replica.cassettes)
    )  # fmt: skip
    assert result.report.totals.rows == 2000
    return result.files.html


@needs_chromium
def test_a_2000_row_report_shows_its_summary_on_the_first_screen(
    big_html: Path, tmp_path: Path
) -> None:
    probe = open_in_chromium(big_html, tmp_path)
    assert probe["errors"] == []
    assert probe["bucketFirst"] is True
    assert probe["summaryTop"] < FIRST_SCREEN_PX, probe["summaryTop"]
    assert {"JUDGE_ERROR", "referenceBasis", "violationScore (cap)"} <= set(probe["glossary"])
    assert probe["rowsShown"] == "500 of 500 rows"
    # a requirement ID is in every row's referenceBasis table: the filter matches only the rows
    # whose dialogue or explanation says it (judges cite IDs in their explanations)
    rid = probe["anyId"]
    html = big_html.read_text("utf-8")
    shown_ids = {
        i.removeprefix("row-") for i in re.findall(r'<details class="row" id="([^"]+)"', html)
    }
    rows = [
        json.loads(line)
        for line in (big_html.parent / "rows.jsonl").read_text("utf-8").splitlines()
    ]
    citing = sum(
        1 for r in rows if r["rowId"] in shown_ids and rid in (r["scoreExplanation"] or "")
    )
    assert probe["filterById"] == f"{citing} of 500 rows" and citing < 500
    flag, shown = probe["filterByFlag"]
    expected = sum(1 for f in re.findall(r'data-flags="([^"]*)"', html) if flag in f.split())
    assert shown == f"{expected} of 500 rows" and expected > 5
    bucket = html[html.index('id="red-flags"') : html.index('id="summary"')]
    flags = bucket.count('<tr class="flag"')
    linked = re.findall(r">(bench-\d+)</a>", bucket)
    assert flags == 7 and len(linked) <= 5 * flags  # examples, not every flagged row (923)
    assert "INTENT_HEALTH_NO_REMOTE_DIAGNOSIS" in bucket  # the red line that raised the flag


def test_compliance_bars_are_coloured_by_compliance_and_red_lines_badged(big_html: Path) -> None:
    assert [compliance_band(v) for v in (1.0, 0.96, 0.9, 0.8, 0.5)] == [
        "good", "good", "good", "mid", "bad"]  # fmt: skip
    chart = big_html.read_text("utf-8").split('id="chart-compliance"')[1].split("</figure>")[0]
    bars = re.findall(r'<rect class="bar ([a-z]+)( critical)?" data-label="([^"]+)" '
                      r'data-value="([^"]+)"', chart)  # fmt: skip
    assert bars
    for band, _critical, _label, value in bars:
        assert band == compliance_band(float(value))
    assert chart.count('class="badge"') == sum(1 for b in bars if b[1])
    assert any(b[1] and b[0] == "good" for b in bars)  # a well-kept red line is not drawn red


def test_case_level_requirements_show_their_text(tmp_path: Path) -> None:
    result = score(
        ScoreOptions(inputs=[CASES / "airline_tau2_dev.json"], rubric=RUBRICS / "airline_cs.yaml",
                     draft=True, store=tmp_path / "s.sqlite", out=tmp_path / "o",
                     cassettes=CASSETTES)
    )  # fmt: skip
    case = next(r for r in result.report.requirements if r.category == "CASE" and r.text)
    table = result.files.html.read_text("utf-8").split('id="requirements"')[1]
    row = table.split(f"<code>{case.id}</code>")[1].split("</tr>")[0]
    assert case.text.split()[0] in row


def test_markdown_escapes_html_like_text_and_has_a_glossary(tmp_path: Path) -> None:
    result = score(
        ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric=RUBRICS / "health_cs.yaml",
                     draft=True, store=tmp_path / "s.sqlite", out=tmp_path / "o",
                     cassettes=CASSETTES)
    )  # fmt: skip
    md = result.files.markdown.read_text("utf-8")
    assert "&lt;questions&gt;" in md and "<questions>" not in md
    assert "## Glossary" in md and "- **JUDGE_ERROR**:" in md


@needs_chromium
def test_the_html_diff_page_puts_regressions_first_and_renders_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    runner.invoke(
        app, ["rubric", "publish", str(RUBRICS / "health_cs.yaml"), "--store", str(store)]
    )
    ids = [
        score(ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric="health_cs",
                           store=store, out=tmp_path / n, cassettes=c)).task_id
        for n, c in (("a", CASSETTES), ("b", ROOT / "cassettes-worse"))
    ]  # fmt: skip
    page = tmp_path / "diff.html"
    result = runner.invoke(app, ["diff", *ids, "--store", str(store), "--format", "html",
                                 "--out", str(page)])  # fmt: skip
    assert result.exit_code == 0, result.output
    html = page.read_text("utf-8")
    assert (
        html.index('id="regressions"')
        < html.index('id="improvements"')
        < html.index('id="changes"')
    )
    assert "Regressions (17)" in html and "http" not in html.split("</head>")[1]
    probe = open_in_chromium(page, tmp_path)
    assert probe["errors"] == []
