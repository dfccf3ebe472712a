"""The review app end to end in a real headless Chromium, on SQLite and on PostgreSQL
(docs/review.md): a team set up with the CLI as the docs say — two reviewers (bob blind) and a
lead, each signing in with their one-time link — works a queue with a second review through
`rubric-eval serve` until it is empty: evidence clicked with the mouse lands on the requirement
clicked, the keyboard moves through the form, a blind form shows and fills in nothing and
refuses an unanswered submit, the lead settles every dispute side by side. Then every stored
label names its signed-in reviewer, and nothing is lost or duplicated. Driven by Playwright
against Debian's ``chromium`` (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import read_labels
from rubric_engine.store.task_store import TaskStore
from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
)
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
_dbs = count(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A five-row task, the team's one-time sign-in links, a queue with a second review, and
    `serve` started as a user starts it (the CLI set-up itself runs in docs/review.md)."""
    from rubric_engine.review.accounts import add_reviewer
    from tests.serve_helpers import make_queue, publish, score_demo

    if request.param == "sqlite":
        store = str(tmp_path / "store.sqlite")
    else:
        store = request.getfixturevalue("pg_cluster").create_database(f"browser_{next(_dbs)}")
    lines = (ROOT / "cases" / "health_consult_zh.jsonl").read_text("utf-8").splitlines(True)
    (tmp_path / "five.jsonl").write_text("".join(lines[:5]), "utf-8")
    publish(store, "health_cs.yaml")
    task_id = score_demo(store, tmp_path / "five.jsonl", "health_cs", tmp_path / "r")
    port = free_port()
    links = {}
    with TaskStore(store) as opened:
        for name, role in (("alice", "reviewer"), ("bob", "reviewer"), ("carol", "lead")):
            _, token = add_reviewer(opened.backend, name, role)
            links[name] = f"http://127.0.0.1:{port}/signin?token={token}"
    make_queue(store, task_id, second_review=0.4, members={"alice": False, "bob": True})
    server = subprocess.Popen(
        [sys.executable, "-m", "rubric_engine.cli", "serve", "--store", store, "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(base + "/signin", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        server.kill()
        pytest.fail("serve did not start: " + (server.stderr.read() if server.stderr else ""))
    try:
        yield {"base": base, "store": store, "task": task_id, "links": links}
    finally:
        server.terminate()
        server.wait(timeout=10)


def sign_in(browser: Any, link: str, problems: list[str]) -> Any:
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(link)
    with page.expect_navigation():
        page.click("#use-link")
    return page


def press(page: Any, key: str) -> None:
    with page.expect_navigation():
        page.keyboard.press(key)


def visible_reqs(page: Any) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#reqs tr[data-req]')].filter(tr =>
             !tr.classList.contains('hidden') && tr.dataset.observable === '1')
             .map(tr => tr.dataset.req)"""
    )


def alice_reviews(page: Any, base: str, task: str) -> str:
    """Alice works her queue: on the first row one requirement answered against the judge with
    the mouse (its evidence clicked in the dialogue) and the next with the keyboard; every
    other question from the judge's answer (A). Returns the overridden requirement."""
    page.goto(f"{base}/tasks/{task}/queues/main")
    press(page, "Enter")
    reqs = visible_reqs(page)
    picked = next(
        r for r in reqs[2:]
        if page.get_attribute(f'#reqs tr[data-req="{r}"]', "data-critical") == "0"
    )  # fmt: skip
    row = f'#reqs tr[data-req="{picked}"]'
    judged = page.get_attribute(row, "data-judge")
    mine = "VIOLATED" if judged != "VIOLATED" else "FOLLOWED"
    page.click(f'{row} label.st-key[title^="{mine}"]')  # the mouse: a status button …
    page.click("#turn-1 .turn")  # … then a turn of the dialogue
    assert page.inner_text("#current-id") == picked
    assert page.input_value(f"{row} input.evidence") == "1"
    assert page.input_value(f'#reqs tr[data-req="{reqs[0]}"] input.evidence') == ""
    assert "evidence" in (page.get_attribute("#turn-1", "class") or "")
    page.fill(f"{row} input.why", "turn 1 shows it the other way")
    page.click(f"{row} td:first-child")
    page.keyboard.press("Escape")
    page.keyboard.press("j")  # the keyboard: the next requirement, its turns typed
    following = reqs[reqs.index(picked) + 1]
    assert page.inner_text("#current-id") == following
    page.keyboard.press("e")
    page.keyboard.type("0")
    page.keyboard.press("Escape")
    page.keyboard.press("A")  # the judge's answer for every question still open
    assert page.inner_text("#answered") == page.inner_text("#asked")
    assert page.is_checked(f'{row} input[value="{mine}"]')  # what she chose stays
    press(page, "Enter")
    assert page.locator("#saved").is_visible()
    while page.locator("#next").count():
        press(page, "Enter")  # the row page's "next row"
        page.keyboard.press("A")
        press(page, "Enter")
        assert page.locator("#saved").is_visible(), page.inner_text("main")[:500]
    return picked


def bob_reviews_blind(page: Any, base: str, task: str) -> int:
    """Bob works his queue blind, by keyboard: every requirement FOLLOWED. Returns the rows."""
    page.goto(f"{base}/tasks/{task}/queues/main")
    assert page.locator("#queue th", has_text="score").count() == 0  # no judge column
    done = 0
    while page.locator("#start").count() or page.locator("#next").count():
        press(page, "Enter")
        url = page.url
        assert page.locator("#blind-note").is_visible()
        assert page.locator("#judge-verdict, #judge-summary, [data-judge]").count() == 0
        assert page.locator("input:checked").count() == 0  # nothing filled in
        if done == 0:  # no URL lifts blindness
            page.goto(url + "&blind=0")
            assert page.locator("#judge-summary, [data-judge]").count() == 0
            press(page, "Enter")  # an unanswered submit: refused, nothing lost
            assert "not answered" in page.inner_text("#form-error")
        page.keyboard.press("i")  # the first intent
        page.keyboard.press("4")
        for _ in visible_reqs(page):
            page.keyboard.press("f")
            page.keyboard.press("j")
        assert page.inner_text("#answered") == page.inner_text("#asked")
        press(page, "Enter")
        assert page.locator("#saved").is_visible(), page.inner_text("main")[:800]
        done += 1
    return done


def carol_settles(page: Any, base: str, task: str) -> int:
    """Carol settles every dispute, deciding each disputed requirement. Returns how many."""
    settled = 0
    page.goto(f"{base}/tasks/{task}/adjudicate")
    while page.locator("a.adjudicate").count():
        with page.expect_navigation():
            page.click("a.adjudicate")
        disputed = page.locator("#dispute tr.req.disputed")
        for i in range(disputed.count()):
            line = disputed.nth(i)
            answers = line.locator("td.answer")
            assert answers.count() == 2  # alice's and bob's, side by side
            line.locator('label.st-key[title="FOLLOWED"]').click()
        for name in ("intent", "score"):
            if page.locator(f'#dispute tr.field.disputed[data-field="{name}"]').count():
                if name == "intent":
                    page.select_option("#intent", index=1)
                else:
                    page.check('input[name="score"][value="4"]')
        page.fill("#reason", "read against the rule texts")
        with page.expect_navigation():
            page.click("#settle")
        assert page.locator("#form-error").count() == 0, page.inner_text("main")[:800]
        settled += 1
    assert page.locator("#none-disputed").is_visible()
    return settled


def test_two_reviewers_one_blind_and_a_lead_work_a_queue_with_a_second_review(
    served: dict[str, Any],
) -> None:
    base, task, links = served["base"], served["task"], served["links"]
    problems: list[str] = []
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        alice = sign_in(browser, links["alice"], problems)
        bob = sign_in(browser, links["bob"], problems)
        carol = sign_in(browser, links["carol"], problems)
        assert alice.inner_text("#reviewer-name") == "alice"
        overridden = alice_reviews(alice, base, task)
        second = bob_reviews_blind(bob, base, task)
        settled = carol_settles(carol, base, task)
        for page in (alice, bob):
            page.goto(f"{base}/tasks/{task}/queues/main")
            assert page.locator("#empty").is_visible()
            assert "<b>5</b> of 5 rows complete" in page.inner_html("#progress")
        browser.close()
    # the one refused page is the unanswered blind submit (400); nothing else went wrong
    assert [p for p in problems if "400 (Bad Request)" not in p] == [], problems
    assert len(problems) == 1
    assert second >= 2 and settled >= 1
    with TaskStore(served["store"]) as opened:
        labels = read_labels(opened.backend, task_id=task)
        every = read_labels(opened.backend, task_id=task, include_superseded=True)
    assert len(every) == len(labels)  # nobody's answer was stored twice or superseded
    keys = Counter((lab.row_id, lab.requirement_id, lab.reviewer) for lab in labels)
    assert max(keys.values()) == 1
    by = {
        name: [lab for lab in labels if lab.reviewer == name] for name in ("alice", "bob", "carol")
    }
    assert {lab.reviewer for lab in labels} == {"alice", "bob", "carol"}
    assert len({lab.row_id for lab in by["alice"]}) == 5
    assert len({lab.row_id for lab in by["bob"]}) == second
    assert all(lab.saw_judge_verdict is True for lab in by["alice"])
    assert all(lab.saw_judge_verdict is False for lab in by["bob"])
    assert all(lab.source is LabelSource.ADJUDICATION for lab in by["carol"])
    mine = next(lab for lab in by["alice"] if lab.requirement_id == overridden)
    assert mine.evidence_turns == (1,) and mine.reason == "turn 1 shows it the other way"
    assert all(lab.time and lab.time.endswith("Z") for lab in labels)
