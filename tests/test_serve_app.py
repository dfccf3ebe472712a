"""`rubric-eval serve` pages over a demo store, through Starlette's test client:
the task list, the report page, the comparison page, blind review, labels written by a review,
reasons for overrides, claims and adjudication."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip(
    "starlette", reason="the serve extra is not installed: pip install -e '.[serve]'"
)
from starlette.testclient import TestClient

from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import read_labels
from rubric_engine.review.queue import QueuePolicy
from rubric_engine.serve.app import REVIEWER_COOKIE, ServeConfig, create_app
from rubric_engine.store.task_store import TaskStore
from tests.serve_helpers import (
    WORSE,
    confirm_form,
    copy_store,
    override_red_line,
    publish,
    red_line_row,
    score_demo,
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with the airline demo (named, tagged) and the health demo scored twice (the
    second from the deliberately worse cassettes)."""
    tmp = tmp_path_factory.mktemp("serve")
    store = tmp / "store.sqlite"
    publish(store, "airline_cs.yaml")
    publish(store, "health_cs.yaml")
    ids = {
        "airline": score_demo(
            store,
            "airline_tau2_dev.json",
            "airline_cs",
            tmp / "a",
            name="airline-dev",
            tags=("demo", "nightly"),
        ),
        "health": score_demo(store, "health_consult_zh.jsonl", "health_cs", tmp / "h"),
        "worse": score_demo(
            store, "health_consult_zh.jsonl", "health_cs", tmp / "w", cassettes=WORSE
        ),
    }
    return store, ids


def client(store: Path, reviewer: str | None = "alice", **config: object) -> TestClient:
    app = create_app(ServeConfig(store, **config))  # type: ignore[arg-type]
    c = TestClient(app)
    if reviewer:
        c.cookies.set(REVIEWER_COOKIE, quote(reviewer, safe=""))
    return c


def test_tasks_page_lists_every_task_with_its_figures(demo: tuple[Path, dict[str, str]]) -> None:
    store, ids = demo
    page = client(store).get("/").text
    row = re.search(rf'<tr data-task="{ids["airline"]}">(.*?)</tr>', page, re.S)
    assert row, page[:2000]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert "airline-dev" in cells[1] and '<span class="tag">demo</span>' in cells[1]
    assert "airline_cs@1" in cells[2] and "gpt-4o-mini" in cells[3] and cells[4] == "COMPLETED"
    assert cells[5] == "25/25"
    from rubric_engine.report.run import read_report

    totals = read_report(ids["airline"], store).totals
    assert cells[6] == f"{totals.pass_rate * 100:.1f}%"
    assert cells[7] == str(totals.rows_with_red_flags) and cells[8] == str(totals.judge_errors)


def test_report_page_is_the_report_html_of_the_same_typed_report(
    demo: tuple[Path, dict[str, str]],
) -> None:
    store, ids = demo
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    cli = CliRunner().invoke(
        app, ["report", ids["airline"], "--format", "html", "--store", str(store)]
    )
    page = client(store).get(f"/tasks/{ids['airline']}/report")
    assert page.status_code == 200 and page.text == cli.output
    # the task's name works wherever its id does
    assert client(store).get("/tasks/airline-dev/report").text == cli.output
    assert client(store).get("/tasks/tag:nightly/report").text == cli.output


def test_compare_page_puts_regressions_first_and_links_their_rows(
    demo: tuple[Path, dict[str, str]],
) -> None:
    store, ids = demo
    page = client(store).get(f"/compare?baseline={ids['health']}&current={ids['worse']}").text
    types = re.findall(r'<tr class="item-(\w+)">', page)
    assert types and types[0] == "REGRESSION"
    assert types == sorted(types, key=["REGRESSION", "CHANGED", "IMPROVEMENT"].index)
    links = re.findall(rf'href="/tasks/{ids["worse"]}/rows/([^"]+)"', page)
    assert links
    assert client(store).get(f"/tasks/{ids['worse']}/rows/{links[0]}").status_code == 200


def test_blind_page_holds_no_verdict_until_the_reviewer_answered(
    demo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store = copy_store(demo[0], tmp_path)
    task = demo[1]["airline"]
    result, _, _ = red_line_row(store, task)
    c = client(store, blind=True)
    blind = c.get(f"/tasks/{task}/review/{result.row_id}").text
    seen = c.get(f"/tasks/{task}/review/{result.row_id}?blind=0").text
    assert result.score_explanation and result.score_explanation[:40] in seen.replace("&#39;", "'")
    for page, shown in ((blind, False), (seen, True)):
        assert ('id="judge-verdict"' in page) is shown
        assert (result.score_explanation[:40] in page.replace("&#39;", "'")) is shown
        # nothing of the verdict is pre-selected: no intent, no score, no red flag
        assert ('<option value="" selected>' in page) is not shown
        assert (
            re.search(r'name="score" value="\d" id="score-\d" checked', page) is None
        ) is not shown
        assert (
            re.search(r'name="flag" value="\w+" data-flag="\w+" checked', page) is None
        ) is not shown
    # nor by typing the row page's URL before answering (a hole found on the first pass)
    typed = c.get(f"/tasks/{task}/rows/{result.row_id}").text
    assert 'id="judge-verdict"' not in typed and 'id="blind-hidden"' in typed
    assert result.score_explanation[:40] not in typed.replace("&#39;", "'")
    answered = c.post(
        f"/tasks/{task}/review/{result.row_id}",
        data={**confirm_form(result), "blind": "1"},
        follow_redirects=True,
    ).text
    assert 'id="judge-verdict"' in answered and 'id="saved"' in answered
    with TaskStore(store) as opened:
        labels = read_labels(opened.backend, task_id=task)
    assert labels and all(lab.saw_judge_verdict is False for lab in labels)


def test_a_review_writes_labels_through_the_label_model(
    demo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store = copy_store(demo[0], tmp_path)
    task = demo[1]["airline"]
    result, rubric, rid = red_line_row(store, task)
    c = client(store)
    form = override_red_line(result, rubric, rid, reason=None)
    refused = c.post(f"/tasks/{task}/review/{result.row_id}", data=form)
    assert refused.status_code == 400 and "say why" in refused.text and rid in refused.text
    with TaskStore(store) as opened:
        assert read_labels(opened.backend, task_id=task) == []
    form["reason"] = "the agent asked for confirmation in turn 6"
    form[f"evidence.{rid}"] = "6, 999"
    outside = c.post(f"/tasks/{task}/review/{result.row_id}", data=form)
    assert outside.status_code == 400
    assert f"evidence.{rid} '6, 999'" in outside.text.replace("&#39;", "'")
    assert 'value="6, 999"' in outside.text  # shown again, nothing lost
    form[f"evidence.{rid}"] = "6"
    done = c.post(f"/tasks/{task}/review/{result.row_id}", data=form, follow_redirects=False)
    assert done.status_code == 303
    with TaskStore(store) as opened:
        labels = read_labels(opened.backend, task_id=task)
    assert {lab.reviewer for lab in labels} == {"alice"}
    assert all(lab.time and lab.reason == form["reason"] for lab in labels)
    assert all(lab.source is LabelSource.REVIEW and lab.saw_judge_verdict for lab in labels)
    assert all(lab.rubric_key == "airline_cs" and lab.rubric_version == 1 for lab in labels)
    by_req = {lab.requirement_id: lab for lab in labels}
    assert str(by_req[rid].status) == "FOLLOWED" and by_req[rid].evidence_turns == (6,)
    assert by_req[None].score == rubric.score_scale.max
    assert len(by_req) == 1 + len(result.reference_basis)
    # a second answer by the same reviewer supersedes: the store keeps both
    form["reason"] = "on second reading: still followed"
    c.post(f"/tasks/{task}/review/{result.row_id}", data=form)
    with TaskStore(store) as opened:
        every = read_labels(opened.backend, task_id=task, include_superseded=True)
        current = read_labels(opened.backend, task_id=task)
    assert len(every) == 2 * len(labels) and len(current) == len(labels)
    assert all(lab.supersedes for lab in current)


def test_a_claim_keeps_another_reviewer_off_the_row_until_it_expires(
    demo: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the claims' clock stands still until the test moves it: a loaded machine taking more
    # than the 1 s claim between two requests let the claim lapse before bob was turned away
    from datetime import UTC, datetime, timedelta

    from rubric_engine.review import claims

    now = [datetime.now(UTC)]
    monkeypatch.setattr(claims, "_now", lambda: now[0])
    store = copy_store(demo[0], tmp_path)
    task = demo[1]["airline"]
    alice = client(store, "alice", claim_ttl_s=1)
    bob = client(store, "bob", claim_ttl_s=1)
    queue = bob.get(f"/tasks/{task}/queue?strategy=random").text
    first = re.search(r'id="start" href="/tasks/[^/]+/review/([^?"]+)', queue).group(1)
    assert alice.get(f"/tasks/{task}/review/{first}").status_code == 200
    held = bob.get(f"/tasks/{task}/review/{first}")
    assert held.status_code == 409 and "being reviewed by alice" in held.text
    again = bob.get(f"/tasks/{task}/queue?strategy=random").text
    assert re.search(r'id="start" href="/tasks/[^/]+/review/([^?"]+)', again).group(1) != first
    now[0] += timedelta(seconds=2.1)
    assert bob.get(f"/tasks/{task}/review/{first}").status_code == 200


def test_a_reviewer_name_is_asked_for_before_any_review(demo: tuple[Path, dict[str, str]]) -> None:
    store, ids = demo
    c = client(store, reviewer=None)
    asked = c.get(f"/tasks/{ids['airline']}/queue", follow_redirects=False)
    assert asked.status_code == 303 and asked.headers["location"].startswith("/reviewer?next=")
    assert c.post("/reviewer", data={"name": " ", "next": "/"}).status_code == 400
    named = c.post("/reviewer", data={"name": "dana", "next": f"/tasks/{ids['airline']}/queue"})
    assert named.status_code == 200 and 'id="reviewer-name">dana<' in named.text


def test_disagreeing_reviewers_go_to_adjudication_which_a_third_person_settles(
    demo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store = copy_store(demo[0], tmp_path)
    task = demo[1]["airline"]
    result, rubric, rid = red_line_row(store, task)
    url = f"/tasks/{task}/review/{result.row_id}"
    alice, bob, carol = (
        client(store, n, policy=QueuePolicy(second_review_share=0))
        for n in ("alice", "bob", "carol")
    )
    alice.post(url, data=override_red_line(result, rubric, rid, "confirmation was asked"))
    # the override sends the row to a second reviewer, first in the disagreement queue
    queue = bob.get(f"/tasks/{task}/queue?strategy=disagreement").text
    assert re.search(r'id="start" href="[^"]+/review/([^?"]+)', queue).group(1) == quote(
        result.row_id, safe=""
    )
    bob.post(url, data=confirm_form(result))
    listing = carol.get(f"/tasks/{task}/adjudicate").text
    assert f"<code>{result.row_id}</code>" in listing and "alice, bob" in listing
    adjudicate = f"/tasks/{task}/adjudicate/{result.row_id}"
    refused = bob.post(adjudicate, data={**confirm_form(result), "reason": "mine"})
    assert refused.status_code == 400 and "settled by someone else" in refused.text
    settled = carol.post(
        adjudicate,
        data=override_red_line(result, rubric, rid, "turn 6 asks for confirmation"),
        follow_redirects=True,
    )
    assert 'id="none-disputed"' in settled.text
    with TaskStore(store) as opened:
        labels = read_labels(opened.backend, task_id=task, reviewers=("carol",))
    assert labels and all(
        lab.source is LabelSource.ADJUDICATION and lab.role == "adjudicator" for lab in labels
    )
