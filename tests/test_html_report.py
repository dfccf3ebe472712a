"""The HTML report in a real browser: headless Chromium (Debian package ``chromium``, installed
by ``.ci/run``) opens the file offline and must render the charts and the red-flag bucket with no
console errors, no failed loads and no Content-Security-Policy violations (nothing may be
fetched: the file is self-contained)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score
from tests.conftest import CASES, CASSETTES, RUBRICS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_without_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)",
)


def needs_chromium(test: Any) -> Any:
    """A test that opens a page in headless Chromium: marked ``browser``, skipped without it."""
    return pytest.mark.browser(_without_chromium(test))


#: Injected first in <head>: records every error the page raises, then measures what rendered and
#: writes it into the DOM, which ``--dump-dom`` prints.
PROBE = (Path(__file__).parent / "data" / "html_probe.js").read_text(encoding="utf-8")


def open_in_chromium(html: Path, tmp_path: Path) -> dict:
    """Load ``html`` with the probe in headless Chromium; return the probe's findings."""
    probed = tmp_path / "probed.html"
    text = html.read_text(encoding="utf-8")
    probed.write_text(
        text.replace("<head>", "<head>\n<script>\n" + PROBE + "</script>", 1), encoding="utf-8"
    )
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,2000",
            "--virtual-time-budget=3000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe result; chromium exit {done.returncode}: {done.stderr[-2000:]}"
    raw = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(raw.replace("&amp;", "&"))


@pytest.fixture(scope="module")
def health_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("html")
    result = score(
        ScoreOptions(
            inputs=[CASES / "health_consult_zh.jsonl"],
            rubric=RUBRICS / "health_cs.yaml",
            store=tmp / "s.sqlite",
            out=tmp / "out",
            cassettes=CASSETTES,
            draft=True,
        )
    )
    assert result.files.html.is_file()
    return result.files.html


@needs_chromium
def test_charts_and_red_flag_bucket_render_without_errors(
    health_html: Path, tmp_path: Path
) -> None:
    probe = open_in_chromium(health_html, tmp_path)
    assert probe["errors"] == []
    assert probe["bucketFirst"] is True
    assert probe["bucketSize"][1] > 100
    assert probe["bucketFlags"][0] == "MEDICAL_OVERREACH"  # most frequent first
    report = json.loads((health_html.parent / "report.json").read_text(encoding="utf-8"))
    assert probe["bucketFlags"] == [f["type"] for f in report["redFlags"] if f["count"]]
    scores = probe["charts"]["chart-scores"]
    assert [b["label"] for b in scores] == list(report["totals"]["scoreDistribution"])
    for bar in scores:  # a bar is drawn (non-zero height) exactly when its score has rows
        count = report["totals"]["scoreDistribution"][bar["label"]]
        assert (bar["size"][1] > 0) == (count > 0)
    assert [b["label"] for b in probe["charts"]["chart-intents"]] == ["HEALTH_CONSULTATION"]
    compliance = probe["charts"]["chart-compliance"]
    assert len(compliance) >= 10 and all(b["size"][0] >= 0 for b in compliance)
    assert max(b["size"][0] for b in compliance) > 100
    assert probe["rowsShown"] == "26 of 26 rows"  # the page's own script ran


@needs_chromium
def test_the_probe_sees_a_broken_page(health_html: Path, tmp_path: Path) -> None:
    """Guards the test above: a script error and a network fetch must both be reported."""
    broken = tmp_path / "broken.html"
    text = health_html.read_text(encoding="utf-8")
    broken.write_text(
        text.replace(
            "</main>",
            '</main><img src="https://example.invalid/x.png"><script>undefinedFn();</script>',
        ),
        encoding="utf-8",
    )
    errors = open_in_chromium(broken, tmp_path)["errors"]
    assert any("undefinedFn" in e for e in errors)
    assert any("csp" in e and "example.invalid" in e for e in errors)
