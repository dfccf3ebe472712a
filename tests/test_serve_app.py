"""`rubric-eval serve` pages through Starlette's test client, on SQLite and on PostgreSQL
(docs/review.md): the task list, the report and comparison pages, blind review that shows and
fills in nothing, labels made by the signed-in reviewer with a reason where a change was made,
claims, skip and drafts, adjudication that shows the dispute and settles it for good, a queue a
two-person team finishes, queue settings every server reads, and the agreement panel."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip(
    "starlette", reason="the serve extra is not installed: pip install -e '.[serve]'"
)

from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import read_labels
from rubric_engine.review.queue_store import get_queue, progress
from rubric_engine.serve.app import ServeConfig, create_app
from rubric_engine.store.location import parse_location
from rubric_engine.store.task_store import TaskStore
from tests.serve_helpers import (
    Person,
    answer_form,
    clone_store,
    demo_store,
    make_queue,
    override_red_line,
    red_line_row,
    task_row,
)

_clones = count(1)
#: a chosen radio button, checkbox or option in a form
CHECKED = re.compile(r"<input[^>]* checked")
OPENED = re.compile(r'name="opened" value="[^"]*"')


def unstamped(page: str) -> str:
    """The page without the second it was opened (a hidden field of the form)."""
    return OPENED.sub('name="opened" value=""', page)


@dataclass
class Demo:
    kind: str
    store: str
    ids: dict[str, str]
    cluster: Any = None


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Demo:
    folder = tmp_path_factory.mktemp(f"serve-{request.param}")
    cluster = None
    if request.param == "sqlite":
        store = str(folder / "store.sqlite")
    else:
        cluster = request.getfixturevalue("pg_cluster")
        store = cluster.create_database(f"serve_app_{next(_clones)}")
    return Demo(request.param, store, demo_store(store, folder), cluster)


@pytest.fixture()
def fresh(demo: Demo, tmp_path: Path) -> Demo:
    """A copy of the demo store this test may write to."""
    name = f"serve_app_clone_{next(_clones)}"
    return Demo(demo.kind, clone_store(demo.store, tmp_path, demo.cluster, name), demo.ids)


def people(store: str, *names: str, **config: Any) -> list[Person]:
    app = create_app(ServeConfig(store, **config))
    return [Person(app, store, n) for n in names]


def labels_of(store: str, task_id: str, **kw: Any) -> list[Any]:
    with TaskStore(store) as opened:
        return read_labels(opened.backend, task_id=task_id, **kw)


def test_tasks_page_lists_every_task_with_its_figures(demo: Demo) -> None:
    # on PostgreSQL this page answered 500 (the store's URL has no file name)
    (alice,) = people(demo.store, "alice")
    page = alice.get("/").text
    row = re.search(rf'<tr data-task="{demo.ids["airline"]}">(.*?)</tr>', page, re.S)
    assert row, page[:2000]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert "airline-dev" in cells[1] and '<span class="tag">demo</span>' in cells[1]
    assert "airline_cs@1" in cells[2] and "gpt-4o-mini" in cells[3] and cells[4] == "COMPLETED"
    assert cells[5] == "25/25"
    from rubric_engine.report.run import read_report

    totals = read_report(demo.ids["airline"], parse_location(demo.store)).totals
    assert cells[6] == f"{totals.pass_rate * 100:.1f}%"
    assert cells[7] == str(totals.rows_with_red_flags) and cells[8] == str(totals.judge_errors)


def test_report_page_is_the_report_html_with_each_row_linking_to_its_review(demo: Demo) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    task = demo.ids["airline"]
    cli = CliRunner().invoke(app, ["report", task, "--format", "html", "--store", demo.store])
    (alice,) = people(demo.store, "alice")
    page = alice.get(f"/tasks/{task}/report")
    assert page.status_code == 200
    links = re.findall(r' <a class="review-link" href="([^"]+)">review this row</a>', page.text)
    drilled = re.findall(r'<details class="row" id="', cli.output)
    assert links and len(links) == len(drilled)
    assert all(link.startswith(f"/tasks/{task}/review/") for link in links)
    # apart from the links, byte for byte what `report --format html` prints
    unlinked = re.sub(r' <a class="review-link" href="[^"]+">review this row</a>', "", page.text)
    assert unlinked == cli.output
    assert alice.get("/tasks/airline-dev/report").text == page.text
    assert alice.get("/tasks/tag:nightly/report").text == page.text


def test_compare_page_puts_regressions_first_and_pages_them(demo: Demo) -> None:
    (alice,) = people(demo.store, "alice")
    base, cur = demo.ids["health"], demo.ids["worse"]
    page = alice.get(f"/compare?baseline={base}&current={cur}").text
    types = re.findall(r'<tr class="item-(\w+)">', page)
    assert types and types[0] == "REGRESSION"
    assert types == sorted(types, key=["REGRESSION", "CHANGED", "IMPROVEMENT"].index)
    shown = re.search(r'id="items-page" class="muted">items 1–(\d+) of (\d+)', page)
    assert shown and int(shown.group(1)) == len(types) <= 100
    links = re.findall(rf'href="/tasks/{cur}/rows/([^"]+)"', page)
    assert links and alice.get(f"/tasks/{cur}/rows/{links[0]}").status_code == 200


def test_a_blind_reviewer_is_shown_and_given_nothing_of_the_verdict(fresh: Demo) -> None:
    task = fresh.ids["airline"]
    make_queue(fresh.store, task, members={"alice": False, "bob": True})
    result, rubric, rid = red_line_row(fresh.store, task)
    (bob,) = people(fresh.store, "bob")
    url = f"/tasks/{task}/review/{quote(result.row_id, safe='')}"
    page = bob.get(url).text
    explanation = (result.score_explanation or "")[:40]
    assert 'id="blind-note"' in page and 'id="judge-verdict"' not in page
    assert explanation and explanation not in page.replace("&#39;", "'")
    assert "data-judge" not in page.replace("data-judge-evidence-key", "")
    # nothing chosen: no intent, no score, no flag, no requirement status
    assert not CHECKED.search(page) and '<option value="" selected>' in page
    # no URL lifts it (the page differs only in the second it was opened)
    for trick in ("?blind=0", "?blind=0&queue=main", "?queue=main&blind=false"):
        assert unstamped(bob.get(url + trick).text) == unstamped(page)
    row_page = bob.get(f"/tasks/{task}/rows/{quote(result.row_id, safe='')}?blind=0").text
    assert 'id="blind-hidden"' in row_page and 'id="judge-verdict"' not in row_page
    assert bob.get(f"/tasks/{task}/report").status_code == 403
    assert bob.get(f"/compare?baseline={task}&current={task}").status_code == 403
    # a submit with an unanswered requirement is refused, and the form comes back as sent
    partial = answer_form(result, rubric)
    del partial[f"status.{rid}"]
    partial[f"reason.{rid}"] = "kept as typed"
    refused = bob.post(url, partial)
    assert refused.status_code == 400 and f"not answered: {rid}" in refused.text
    assert 'value="kept as typed"' in refused.text
    assert labels_of(fresh.store, task) == []
    done = bob.post(url, answer_form(result, rubric))
    assert done.status_code == 200 and 'id="saved"' in done.text
    stored = labels_of(fresh.store, task)
    assert stored and {lab.reviewer for lab in stored} == {"bob"}
    assert all(lab.saw_judge_verdict is False for lab in stored)
    # answered: now the verdict shows on the row (and an edit records that it was seen)
    assert 'id="judge-verdict"' in done.text
    assert 'id="judge-verdict"' in bob.get(url).text


def test_a_review_stores_labels_of_the_signed_in_reviewer(fresh: Demo) -> None:
    task = fresh.ids["airline"]
    make_queue(fresh.store, task)
    result, rubric, rid = red_line_row(fresh.store, task)
    (alice,) = people(fresh.store, "alice")
    url = f"/tasks/{task}/review/{quote(result.row_id, safe='')}"
    page = alice.get(url).text
    assert 'id="judge-verdict"' in page and not CHECKED.search(page)  # shown, not filled in
    form = override_red_line(result, rubric, rid, reason=None)
    refused = alice.post(url, form)
    assert refused.status_code == 400 and f"{rid} VIOLATED → FOLLOWED (its reason)" in refused.text
    assert labels_of(fresh.store, task) == []
    form[f"reason.{rid}"] = "the agent asked for confirmation in turn 6"
    form[f"evidence.{rid}"] = "6, 999"
    outside = alice.post(url, form)
    assert outside.status_code == 400 and f"evidence.{rid} &#39;6, 999&#39;" in outside.text
    form[f"evidence.{rid}"] = "6"
    form["reviewer"] = "bob"  # a form field never names the reviewer
    assert alice.post(url, form, follow_redirects=False).status_code == 303
    stored = labels_of(fresh.store, task)
    assert {lab.reviewer for lab in stored} == {"alice"}
    assert all(
        lab.time and lab.source is LabelSource.REVIEW and lab.saw_judge_verdict for lab in stored
    )
    by_req = {lab.requirement_id: lab for lab in stored}
    assert str(by_req[rid].status) == "FOLLOWED" and by_req[rid].evidence_turns == (6,)
    assert by_req[rid].reason == form[f"reason.{rid}"]
    assert [lab.requirement_id for lab in stored if lab.reason] == [rid]  # not copied around
    asked = {k[len("status.") :] for k in form if k.startswith("status.")}
    assert set(by_req) == {None, *asked}
    # a second answer by the same reviewer supersedes: the store keeps both
    form[f"reason.{rid}"] = "on second reading: still followed"
    alice.post(url, form)
    every = labels_of(fresh.store, task, include_superseded=True)
    current = labels_of(fresh.store, task)
    assert len(current) == len(stored) and len(every) == len(stored) + 1


def test_a_claim_keeps_another_reviewer_off_the_row_until_it_expires(
    fresh: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime, timedelta

    from rubric_engine.review import claims

    now = [datetime.now(UTC)]
    monkeypatch.setattr(claims, "_now", lambda: now[0])
    task = fresh.ids["airline"]
    make_queue(fresh.store, task, claim_ttl_s=1)
    alice, bob = people(fresh.store, "alice", "bob")
    first = re.search(r'id="start" href="([^"]+)"', bob.get(f"/tasks/{task}/queues/main").text)
    assert first
    target = first.group(1).replace("&amp;", "&")
    assert alice.get(target).status_code == 200
    held = bob.get(target)
    assert held.status_code == 409 and "being reviewed by alice" in held.text
    again = re.search(r'id="start" href="([^"]+)"', bob.get(f"/tasks/{task}/queues/main").text)
    assert again and again.group(1) != first.group(1)
    now[0] += timedelta(seconds=2.1)
    assert bob.get(target).status_code == 200


def test_skip_and_drafts_lose_nothing(fresh: Demo) -> None:
    task = fresh.ids["five"]
    make_queue(fresh.store, task, second_review=0)
    (alice,) = people(fresh.store, "alice")
    queue_page = alice.get(f"/tasks/{task}/queues/main").text
    start = re.search(r'id="start" href="/tasks/[^/]+/review/([^?"]+)', queue_page)
    assert start
    row_id = start.group(1)
    url = f"/tasks/{task}/review/{row_id}?queue=main"
    alice.get(url)
    draft = {"queue": "main", "intent": "HEALTH_CONSULTATION", "score": "3", "reason": "halfway"}
    draft["status.COMMON_BACKEND_EXPOSURE"] = "FOLLOWED"
    assert alice.post(f"/tasks/{task}/draft/{row_id}", draft).json() == {"saved": True}
    back = alice.get(url).text
    assert 'value="FOLLOWED" checked' in back and ">halfway</textarea>" in back
    skipped = alice.post(f"/tasks/{task}/skip/{row_id}", {"queue": "main"})
    assert skipped.status_code == 200 and f"/review/{row_id}" not in str(skipped.url)
    listed = re.findall(
        r"<td><code>([^<]+)</code></td>", alice.get(f"/tasks/{task}/queues/main").text
    )
    assert listed[-1] == row_id and len(listed) == 5  # the skipped row comes back last
    assert ">halfway</textarea>" in alice.get(url).text  # and its draft is still there


def test_adjudication_shows_the_dispute_and_settles_it_for_good(fresh: Demo) -> None:
    task = fresh.ids["airline"]
    make_queue(fresh.store, task, second_review=0)
    result, rubric, rid = red_line_row(fresh.store, task)
    row = quote(result.row_id, safe="")
    alice, bob, carol = people(fresh.store, "alice", "bob", "carol")
    form = override_red_line(result, rubric, rid, "confirmation was asked in turn 6")
    form[f"evidence.{rid}"] = "6"
    alice.post(f"/tasks/{task}/review/{row}", form)
    # the override sends the row to a second reviewer, first in their queue
    queue = bob.get(f"/tasks/{task}/queues/main").text
    assert re.search(r'id="start" href="[^"]+/review/([^?"]+)', queue).group(1) == row  # type: ignore[union-attr]
    bob.post(f"/tasks/{task}/review/{row}", answer_form(result, rubric))
    assert alice.get(f"/tasks/{task}/adjudicate").status_code == 403  # a lead's page
    listing = carol.get(f"/tasks/{task}/adjudicate").text
    assert f"<code>{result.row_id}</code>" in listing and "alice, bob" in listing and rid in listing
    page = carol.get(f"/tasks/{task}/adjudicate/{row}").text
    line = re.search(rf'<tr class="req disputed" data-req="{rid}">(.*?)</tr>', page, re.S)
    assert line, page[:3000]
    cells = line.group(1)
    # each reviewer's status, evidence turns and reason, side by side with the judge's
    assert cells.count("VIOLATED") >= 2 and "FOLLOWED" in cells
    assert 'href="#turn-6">#6</a>' in cells and "confirmation was asked in turn 6" in cells
    assert 'name="decide.' + rid + '"' in cells and not CHECKED.search(cells)  # none decided
    refused = carol.post(f"/tasks/{task}/adjudicate/{row}", {"intent": result.intent_key})
    assert refused.status_code == 400 and f"decide each disputed requirement: {rid}" in refused.text
    decision = {
        "intent": result.intent_key,
        "score": str(result.final_score),
        "flag": list(result.red_flag_types),
        f"decide.{rid}": "FOLLOWED",
        "reason": "turn 6 asks for confirmation before the write",
    }
    decision["flag"] = form["flag"]
    settled = carol.post(f"/tasks/{task}/adjudicate/{row}", decision)
    assert 'id="none-disputed"' in settled.text
    decided = labels_of(fresh.store, task, reviewers=("carol",))
    assert {lab.requirement_id for lab in decided} == {None, rid}
    assert all(
        lab.source is LabelSource.ADJUDICATION and lab.role == "adjudicator" for lab in decided
    )
    # settled: in no queue, no list; an answer to it is refused instead of reopening it
    again = bob.post(f"/tasks/{task}/review/{row}", answer_form(result, rubric, reason="x"))
    assert again.status_code == 409 and "settled" in again.text
    assert carol.get(f"/tasks/{task}/adjudicate/{row}").status_code == 409
    with TaskStore(fresh.store) as opened:
        main = get_queue(opened.backend, task, "main")
        assert progress(opened.backend, main, "alice").settled == 1
    # reopening is its own explicit action, by a lead, with a reason
    assert alice.post(f"/tasks/{task}/reopen/{row}", {"reason": "x"}).status_code == 403
    assert carol.post(f"/tasks/{task}/reopen/{row}", {"reason": ""}).status_code == 400
    reopened = carol.post(f"/tasks/{task}/reopen/{row}", {"reason": "new policy text"})
    assert "new policy text" in reopened.text and "disputed" in reopened.text
    assert f"<code>{result.row_id}</code>" in carol.get(f"/tasks/{task}/adjudicate").text


def test_a_two_person_team_finishes_a_queue_with_a_second_review(fresh: Demo) -> None:
    task = fresh.ids["five"]
    make_queue(fresh.store, task, second_review=0.4, members={"alice": False, "bob": True})
    alice, bob = people(fresh.store, "alice", "bob")
    answered: list[tuple[str, str]] = []
    for _ in range(20):
        moved = False
        for person in (alice, bob):
            start = re.search(
                r'id="start" href="/tasks/[^/]+/review/([^?"]+)',
                person.get(f"/tasks/{task}/queues/main").text,
            )
            if start:
                result, rubric = task_row(fresh.store, task, start.group(1))
                person.get(f"/tasks/{task}/review/{start.group(1)}")
                person.post(f"/tasks/{task}/review/{start.group(1)}", answer_form(result, rubric))
                answered.append((person.name, start.group(1)))
                moved = True
        if not moved:
            break
    with TaskStore(fresh.store) as opened:
        main = get_queue(opened.backend, task, "main")
        done = progress(opened.backend, main, "alice")
    assert main.sample_size == 2 and done.complete == done.total == 5 and done.open == 0
    assert len(answered) == 7 == len(set(answered))  # 5 rows + 2 second reviews, none twice
    rows = labels_of(fresh.store, task)
    assert len([lab for lab in rows if lab.requirement_id is None]) == 7


def test_queue_settings_live_with_the_task_and_every_server_reads_them(fresh: Demo) -> None:
    task = fresh.ids["five"]
    make_queue(fresh.store, task, second_review=0.2)
    (carol,) = people(fresh.store, "carol")
    (alice_elsewhere,) = people(fresh.store, "alice")  # another server over the same store
    saved = carol.post(
        f"/tasks/{task}/queues/main/settings",
        {"reviewers_per_row": "2", "claim_ttl": "120", "member": "bob:blind", "blind": ""},
    )
    assert saved.status_code == 200
    assert alice_elsewhere.get(f"/tasks/{task}/queues/main").status_code == 403  # not assigned
    with TaskStore(fresh.store) as opened:
        main = get_queue(opened.backend, task, "main")
    assert main.settings.reviewers_per_row == 2 and main.settings.members == {"bob": True}
    assert main.settings.claim_ttl_s == 120 and main.sample_size == 1
    made = carol.post(
        f"/tasks/{task}/queues",
        {"name": "flags", "strategy": "red-flag", "second_review": "0.5", "member": ""},
    )
    assert made.status_code in (200, 400)
    assert "<option>unstable-first</option>" in carol.get(f"/tasks/{task}/queues").text
    shaky = carol.post(
        f"/tasks/{task}/queues",
        {"name": "shaky", "strategy": "unstable-first", "second_review": "0.2", "member": ""},
    )  # the task asked the judge once per row: nothing to put first
    assert shaky.status_code == 400 and "--samples" in shaky.text, shaky.text


def test_the_agreement_panel_prints_what_calibrate_prints(fresh: Demo) -> None:
    from rubric_engine.calibration.render import render_calibration_text
    from rubric_engine.calibration.run import calibrate_task

    task = fresh.ids["airline"]
    make_queue(fresh.store, task, second_review=0)
    result, rubric, rid = red_line_row(fresh.store, task)
    alice, bob, carol = people(fresh.store, "alice", "bob", "carol")
    row = quote(result.row_id, safe="")
    assert 'id="no-labels"' in carol.get(f"/tasks/{task}/queues/main/agreement").text
    alice.post(f"/tasks/{task}/review/{row}", override_red_line(result, rubric, rid, "asked"))
    bob.post(f"/tasks/{task}/review/{row}", answer_form(result, rubric))
    page = carol.get(f"/tasks/{task}/queues/main/agreement").text
    with TaskStore(fresh.store) as opened:
        rows = [r for (r,) in opened.backend.execute("SELECT row_id FROM review_items")]
        expected = render_calibration_text(calibrate_task(opened, task, rows=rows, save=False))
    shown = re.search(r'<pre id="calibrate-text">(.*?)</pre>', page, re.S)
    assert shown and shown.group(1).replace("&#39;", "'") == expected
    first = re.search(r'<tr data-req="([^"]+)">', page)
    assert first and first.group(1) == rid  # the one requirement they disagree on comes first
    assert alice.get(f"/tasks/{task}/queues/main/agreement").status_code == 403


def test_labels_imported_for_a_task_count_in_its_queues(fresh: Demo, tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from rubric_engine.cli import app

    task = fresh.ids["five"]
    make_queue(fresh.store, task, second_review=0)
    with TaskStore(fresh.store) as opened:
        first = opened.backend.execute(
            "SELECT row_id FROM review_items WHERE task_id=? ORDER BY position", (task,)
        ).fetchone()[0]
    result, rubric = task_row(fresh.store, task, first)
    lines = [{"rowId": first, "reviewer": "erin", "intentKey": result.intent_key, "score": 3}]
    lines += [
        {
            "rowId": first,
            "reviewer": "erin",
            "requirementId": b.requirement_id,
            "status": "FOLLOWED",
        }
        for b in result.reference_basis
        if b.requirement_id in rubric.requirements_by_id
    ]
    path = tmp_path / "erin.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    done = CliRunner().invoke(
        app, ["labels", "import", str(path), "--task", task, "--store", fresh.store]
    )
    assert done.exit_code == 0, done.output
    with TaskStore(fresh.store) as opened:
        state = opened.backend.execute(
            "SELECT reviews, state FROM review_items WHERE task_id=? AND row_id=?", (task, first)
        ).fetchone()
    assert state[0] == 1 and state[1] in ("done", "partial")


# -- rows edited in the store (docs/verify.md) ---------------------------------------------------


def forge_final_score(store: str, task_id: str, row_id: str, score: int) -> None:
    """Edit a row's stored ``finalScore`` as someone with database access would."""
    import json

    with TaskStore(store) as opened:
        db = opened.backend
        query = "SELECT result FROM rows WHERE task_id=? AND row_id=?"
        (text,) = db.execute(query, (task_id, row_id)).fetchone()
        db.execute(
            "UPDATE rows SET result=? WHERE task_id=? AND row_id=?",
            (json.dumps({**json.loads(text), "finalScore": score}), task_id, row_id),
        )
        db.commit()


def test_a_row_edited_in_the_store_shows_no_verdict_to_review(fresh: Demo) -> None:
    """A reviewer is never anchored on a forged verdict: the row's page and its review form
    check the row's digest and refuse it, naming it; the queue page shows no figures for it."""
    task = fresh.ids["health"]
    make_queue(fresh.store, task)
    forge_final_score(fresh.store, task, "medgpt-7", 5)
    (alice,) = people(fresh.store, "alice")
    for url in (f"/tasks/{task}/rows/medgpt-7", f"/tasks/{task}/review/medgpt-7?queue=main"):
        page = alice.get(url)
        assert page.status_code == 400, (url, page.text[:2000])
        assert "medgpt-7" in page.text and "do not match their digest" in page.text, page.text
        assert 'id="judge-verdict"' not in page.text and "final score 5" not in page.text
        assert 'id="reviewer-name">alice<' in page.text  # the header knows who is signed in
    assert alice.get(f"/tasks/{task}/rows/medgpt-8").status_code == 200  # untouched rows show
    queue = alice.get(f"/tasks/{task}/queues/main").text
    row = re.search(r"<tr><td>\d+</td><td><code>medgpt-7</code></td>(.*?)</tr>", queue, re.S)
    assert row and 'class="error untrusted"' in row.group(1), queue[:3000]


def test_the_task_list_marks_an_unreadable_task_and_lists_the_others(
    fresh: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One task whose row does not match its digest, and one signed with a key the server does
    not hold: the list still shows every task, those two with the reason."""
    from rubric_engine.store.digest import SIGNING_KEY_ENV
    from tests.serve_helpers import score_demo

    forge_final_score(fresh.store, fresh.ids["health"], "medgpt-7", 5)
    monkeypatch.setenv(SIGNING_KEY_ENV, "k" * 40)
    signed = score_demo(fresh.store, "health_consult_zh.jsonl", "health_cs", tmp_path / "s")
    monkeypatch.delenv(SIGNING_KEY_ENV)
    (alice,) = people(fresh.store, "alice")
    page = alice.get("/")
    assert page.status_code == 200, page.text[:2000]

    def cells(task_id: str) -> list[str]:
        row = re.search(rf'<tr data-task="{task_id}">(.*?)</tr>', page.text, re.S)
        assert row, page.text[:3000]
        return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)

    edited = cells(fresh.ids["health"])
    assert "cannot be read" in edited[6] and "medgpt-7" in edited[6], edited
    assert "do not match their digest" in edited[6]
    assert "signed with the key" in cells(signed)[6] and SIGNING_KEY_ENV in cells(signed)[6]
    assert cells(fresh.ids["airline"])[6].endswith("%")  # the others keep their figures
    report = alice.get(f"/tasks/{fresh.ids['health']}/report")
    assert report.status_code == 400 and 'id="reviewer-name">alice<' in report.text
    assert 'href="/">back to the tasks' in report.text


def test_a_disputed_row_edited_in_the_store_is_listed_with_why_and_not_settled(
    fresh: Demo,
) -> None:
    task = fresh.ids["airline"]
    make_queue(fresh.store, task, second_review=0)
    result, rubric, rid = red_line_row(fresh.store, task)
    row = quote(result.row_id, safe="")
    alice, bob, carol = people(fresh.store, "alice", "bob", "carol")
    form = override_red_line(result, rubric, rid, "confirmation was asked in turn 6")
    alice.post(f"/tasks/{task}/review/{row}", form)
    bob.post(f"/tasks/{task}/review/{row}", answer_form(result, rubric))
    forge_final_score(fresh.store, task, result.row_id, 5)
    listing = carol.get(f"/tasks/{task}/adjudicate")
    assert listing.status_code == 200, listing.text[:2000]
    line = re.search(
        rf"<tr><td><code>{re.escape(result.row_id)}</code></td>(.*?)</tr>", listing.text
    )
    assert line and "do not match their digest" in line.group(1), listing.text[:3000]
    assert 'class="adjudicate"' not in line.group(1)
    assert carol.get(f"/tasks/{task}/adjudicate/{row}").status_code == 400
