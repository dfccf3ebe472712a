"""The review app end to end in a real headless Chromium: a demo
store scored as README's first block does it, `rubric-eval serve` started as a user starts it,
five rows reviewed with the keyboard (one red line overridden with a reason), a second reviewer
who disagrees, an adjudication; then the labels are in the store and `calibrate` counts the
override. Driven by Playwright against Debian's ``chromium`` (never a downloaded browser)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import read_labels
from rubric_engine.store.task_store import TaskStore
from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
    ),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def cli(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rubric_engine.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Path, str, subprocess.Popen[str]]]:
    """(base URL, store, airline task id, server process) in a copy of the repo's demo files."""
    for name in ("rubrics", "cases", "cassettes"):
        shutil.copytree(ROOT / name, tmp_path / name)
    store = tmp_path / ".rubric-eval" / "store.sqlite"
    cli("rubric", "publish", "rubrics/airline_cs.yaml", cwd=tmp_path)
    out = cli(
        "score",
        "cases/airline_tau2_dev.json",
        "--rubric",
        "airline_cs",
        "--out",
        "reports/demo-airline",
        "-q",
        cwd=tmp_path,
    )
    task_id = out.strip().rsplit("task id: ", 1)[1].split()[0]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "rubric_engine.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        server.kill()
        pytest.fail("serve did not start: " + (server.stderr.read() if server.stderr else ""))
    try:
        yield base, store, task_id, server
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_review_with_the_keyboard_disagree_and_adjudicate(
    served: tuple[str, Path, str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    base, store, task_id, server = served
    problems: list[str] = []
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        def who(name: str) -> None:
            page.click("text=switch")
            page.fill("#name", name)
            with page.expect_navigation():
                page.keyboard.press("Enter")

        def press(key: str) -> None:
            with page.expect_navigation():
                page.keyboard.press(key)

        page.goto(base + "/")
        assert page.locator(f'tr[data-task="{task_id}"] td.rows').inner_text() == "25/25"
        page.click(f'tr[data-task="{task_id}"] >> text=review')
        page.fill("#name", "alice")  # no reviewer yet: the app asks first
        press("Enter")
        page.goto(f"{base}/tasks/{task_id}/queue?strategy=red-flag&blind=0")
        press("Enter")
        # row 1: the red line the judge found is overridden, with a reason, by keyboard only
        overridden = page.inner_text("#row-id")
        red_line = page.evaluate(
            """() => { const rows = [...document.querySelectorAll('#reqs tr[data-req]')]
                 .filter(tr => !tr.classList.contains('hidden'));
               const i = rows.findIndex(tr => tr.dataset.critical === '1' &&
                 tr.querySelector('input[value=VIOLATED]:checked'));
               return [i, rows[i].dataset.req]; }"""
        )
        index, requirement = red_line
        assert index >= 0
        for _ in range(index):
            page.keyboard.press("j")
        page.keyboard.press("f")
        page.keyboard.press("e")  # the turns that show it: typed, then highlighted
        page.keyboard.type("1, 2")
        page.keyboard.press("Escape")
        assert page.get_attribute("#turn-2", "class") == "msg assistant evidence"
        page.keyboard.press("5")
        assert page.is_checked(f'#reqs tr[data-req="{requirement}"] input[value=FOLLOWED]')
        assert page.get_attribute(f'#reqs tr[data-req="{requirement}"]', "class") == "cur"
        shot = tmp_path / "review-page.png"
        page.screenshot(path=str(shot), full_page=False)
        page.keyboard.press("r")
        page.keyboard.type("The agent did confirm before acting; the judge misread turn order.")
        page.keyboard.press("Escape")
        press("Enter")
        assert page.locator("#saved").is_visible()
        # rows 2-5: confirmed as the judge said, Enter on each page
        for _ in range(4):
            press("Enter")  # the row page's "next row"
            press("Enter")  # submit the pre-filled verdict
        reviewed = page.inner_text("#row-id")
        assert reviewed != overridden
        # a second reviewer draws the disagreement queue: the overridden row comes first
        who("bob")
        page.goto(f"{base}/tasks/{task_id}/queue?strategy=disagreement&blind=0")
        press("Enter")
        assert page.inner_text("#row-id") == overridden
        press("Enter")  # bob agrees with the judge: now alice and bob disagree
        assert page.locator("#disputed").is_visible()
        who("carol")
        page.goto(f"{base}/tasks/{task_id}/adjudicate")
        with page.expect_navigation():
            page.click("a.adjudicate")
        # prefilled with the first reviewer's answer; the adjudicator agrees with alice
        assert page.is_checked(f'#reqs tr[data-req="{requirement}"] input[value=FOLLOWED]')
        page.keyboard.press("r")
        page.keyboard.type("Turn order shows the confirmation came first; alice is right.")
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        assert page.locator("#none-disputed").is_visible()
        browser.close()
    assert problems == []
    assert shot.stat().st_size > 10_000
    server.terminate()
    server.wait(timeout=10)

    with TaskStore(store) as opened:
        labels = read_labels(opened.backend, task_id=task_id)
    rows_by = {
        name: {lab.row_id for lab in labels if lab.reviewer == name}
        for name in ("alice", "bob", "carol")
    }
    assert len(rows_by["alice"]) == 5 and rows_by["bob"] == {overridden} == rows_by["carol"]
    assert all(lab.time and lab.time.endswith("Z") for lab in labels)
    override = next(
        lab for lab in labels if lab.reviewer == "alice" and lab.requirement_id == requirement
    )
    assert str(override.status) == "FOLLOWED" and override.reason and "confirm" in override.reason
    assert override.evidence_turns == (1, 2)
    assert override.saw_judge_verdict is True and override.source is LabelSource.REVIEW
    settled = [lab for lab in labels if lab.reviewer == "carol"]
    assert all(lab.source is LabelSource.ADJUDICATION and lab.reason for lab in settled)
    calibration = json.loads(cli("calibrate", task_id, "--format", "json", cwd=store.parent.parent))
    counted = next(r for r in calibration["requirements"] if r["id"] == requirement)
    assert counted["fp"] == 1  # the judge said unmet; the adjudicated label says followed
