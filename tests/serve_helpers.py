"""Shared set-up of the serve tests: demo stores scored the way README's first block does it,
on SQLite or PostgreSQL, with a team (two reviewers, a lead, an admin), and clients signed in
the way a person signs in (a one-time link, then the session)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.testclient import TestClient

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.labels.model import LabelStatus
from rubric_engine.report.stored import load_task
from rubric_engine.results.model import RowResult
from rubric_engine.review.accounts import add_reviewer, issue_token
from rubric_engine.review.queue import QueueSettings
from rubric_engine.review.queue_store import create_queue
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

WORSE = ROOT / "cassettes-worse"
BASE = "http://127.0.0.1:8765"
TEAM = {"alice": "reviewer", "bob": "reviewer", "carol": "lead", "dana": "admin"}


def publish(store: Path | str, pack: str) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    result = CliRunner().invoke(
        app, ["rubric", "publish", str(RUBRICS / pack), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output


def score_demo(
    store: Path | str,
    cases: str | Path,
    rubric: str,
    out: Path,
    *,
    cassettes: Path = CASSETTES,
    **extra: Any,
) -> str:
    result = score(
        ScoreOptions(
            inputs=[CASES / cases],
            rubric=rubric,
            store=store,
            out=out,
            cassettes=cassettes,
            **extra,
        )
    )
    assert not result.cassette_misses
    return result.task_id


def demo_store(store: str, folder: Path) -> dict[str, str]:
    """The airline demo (named, tagged), the health demo scored twice (the second from the
    deliberately worse cassettes) and a five-row health task, with the team's accounts."""
    publish(store, "airline_cs.yaml")
    publish(store, "health_cs.yaml")
    five = folder / "health_five.jsonl"
    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines(keepends=True)
    five.write_text("".join(lines[:5]), "utf-8")
    ids = {
        "airline": score_demo(
            store,
            "airline_tau2_dev.json",
            "airline_cs",
            folder / "a",
            name="airline-dev",
            tags=("demo", "nightly"),
        ),
        "health": score_demo(store, "health_consult_zh.jsonl", "health_cs", folder / "h"),
        "worse": score_demo(
            store, "health_consult_zh.jsonl", "health_cs", folder / "w", cassettes=WORSE
        ),
        "five": score_demo(store, five, "health_cs", folder / "f", name="health-five"),
    }
    with TaskStore(store) as opened:
        for name, role in TEAM.items():
            add_reviewer(opened.backend, name, role)
    return ids


def clone_store(store: str, folder: Path, pg_cluster: Any, name: str) -> str:
    """A copy of a demo store for one test: a file copy, or a PostgreSQL database made from
    the demo database as its template."""
    if not store.startswith("postgresql://"):
        target = folder / f"{name}.sqlite"
        shutil.copyfile(store, target)
        return str(target)
    import psycopg

    from rubric_engine.store.location import PostgresUrl
    from rubric_engine.store.postgres import close_pools

    close_pools(PostgresUrl(store))  # a template database must have no open connection
    template = urlsplit(store).path.lstrip("/")
    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return str(pg_cluster.url(name))


def make_queue(store: str, task_id: str, **settings: Any) -> None:
    with TaskStore(store) as opened:
        create_queue(opened, task_id, QueueSettings(**settings), "test")


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:1500]
    return found.group(1)


class Person:
    """A browser-less member of the team: a client signed in with a one-time link."""

    def __init__(self, app: Any, store: str, name: str) -> None:
        self.name = name
        self.client = TestClient(app, base_url=BASE)
        with TaskStore(store) as opened:
            token = issue_token(opened.backend, name)
        self.csrf = csrf_of(self.client.get(f"/signin?token={token}").text)
        signed = self.client.post("/signin", data={"csrf": self.csrf, "token": token, "next": "/"})
        assert signed.status_code == 200 and f'id="reviewer-name">{name}<' in signed.text
        self.csrf = csrf_of(signed.text)  # a new session (and token) after signing in

    def get(self, url: str, **kw: Any) -> Any:
        return self.client.get(url, **kw)

    def post(self, url: str, data: dict[str, Any], **kw: Any) -> Any:
        return self.client.post(url, data={**data, "csrf": self.csrf}, **kw)


def red_line_row(store: str, task_id: str) -> tuple[RowResult, EvalRubric, str]:
    """The first row whose judge verdict violates a red line, the rubric and that requirement."""
    with TaskStore(store) as opened:
        task = load_task(opened, task_id)
    for row in task.rows:
        for entry in row.result.reference_basis:
            req = task.rubric.requirements_by_id.get(entry.requirement_id)
            if req is not None and req.critical and str(entry.status) == "VIOLATED":
                return row.result, task.rubric, entry.requirement_id
    raise AssertionError("the demo has no red-line violation")


def task_row(store: str, task_id: str, row_id: str) -> tuple[RowResult, EvalRubric]:
    with TaskStore(store) as opened:
        task = load_task(opened, task_id)
    return next(r.result for r in task.rows if r.result.row_id == row_id), task.rubric


def answer_form(result: RowResult, rubric: EvalRubric, **changes: Any) -> dict[str, Any]:
    """A review form answering every observable requirement as the judge did (each one
    explicitly: nothing is presumed), the judge's intent, score and red flags."""
    form: dict[str, Any] = {
        "queue": "main",
        "intent": result.intent_key,
        "score": str(result.final_score),
        "flag": list(result.red_flag_types),
        "reason": "",
    }
    reqs = rubric.requirements_by_id
    for entry in result.reference_basis:
        req = reqs.get(entry.requirement_id)
        if req is None or req.observable_in_data:
            form[f"status.{entry.requirement_id}"] = str(entry.status)
    form.update(changes)
    return form


def override_red_line(
    result: RowResult, rubric: EvalRubric, requirement_id: str, reason: str | None
) -> dict[str, Any]:
    """The form with one red line turned FOLLOWED with ``reason`` (its flag dropped when no
    other red line of that type stays VIOLATED)."""
    req = rubric.requirements_by_id[requirement_id]
    form = answer_form(result, rubric, **{f"status.{requirement_id}": str(LabelStatus.FOLLOWED)})
    still = any(
        rubric.requirements_by_id[e.requirement_id].red_flag_type == req.red_flag_type
        for e in result.reference_basis
        if e.requirement_id != requirement_id
        and str(e.status) == "VIOLATED"
        and e.requirement_id in rubric.requirements_by_id
        and rubric.requirements_by_id[e.requirement_id].critical
    )
    if not still:
        form["flag"] = [f for f in form["flag"] if f != req.red_flag_type]
    form[f"reason.{requirement_id}"] = reason or ""
    return form
