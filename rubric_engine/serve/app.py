"""The web app: routes for the task list, reports, the comparison page, review and
adjudication (docs/review.md). An edge: it reads and writes the task store.

Every request opens the store anew and closes it, so rows another process commits show on the
next reload, and every write (labels, claims) is one short SQLite transaction (WAL mode), so a
scoring run writing the same file is never blocked for long and the file never corrupted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from rubric_engine.errors import RubricEvalError, TaskNotFoundError
from rubric_engine.report.run import require_store
from rubric_engine.report.stored import StoredTask, html_report, load_task, stream_report
from rubric_engine.review.claims import DEFAULT_CLAIM_TTL_S
from rubric_engine.review.queue import QueuePolicy
from rubric_engine.store.task_ref import resolve_in_store, task_name, task_tags
from rubric_engine.store.task_store import TaskStore

__all__ = ["ServeConfig", "create_app"]

REVIEWER_COOKIE = "rubric_eval_reviewer"


@dataclass
class ServeConfig:
    """What ``rubric-eval serve`` was started with.

    Attributes:
        reviewer: the reviewer name used until someone picks another on the page.
        blind: review pages hide the judge's verdict until the reviewer answered, unless a
            queue link says ``blind=0``.
        claim_ttl_s: how long an opened row stays reserved for its reviewer.
    """

    store: Path
    reviewer: str | None = None
    blind: bool = False
    policy: QueuePolicy = field(default_factory=QueuePolicy)
    claim_ttl_s: int = DEFAULT_CLAIM_TTL_S
    #: (task id, state, stored rows) → the list page's figures, so a reload is cheap
    summaries: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("rubric_engine.serve", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "–" if v is None else f"{v * 100:.1f}%"
    env.filters["q"] = lambda v: quote(str(v), safe="")
    return env


class Pages:
    """The routes' shared state: the configuration and the template environment."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.env = environment()

    @contextmanager
    def store(self) -> Iterator[TaskStore]:
        require_store(self.config.store)
        with TaskStore(self.config.store) as opened:
            yield opened

    def reviewer(self, request: Request) -> str | None:
        name = request.cookies.get(REVIEWER_COOKIE)
        return unquote(name) if name else self.config.reviewer

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        template = self.env.get_template(name)
        html = template.render(reviewer=self.reviewer(request), path=request.url.path, **values)
        return HTMLResponse(html, status_code=status)

    def load(self, store: TaskStore, ref: str) -> StoredTask:
        return load_task(store, resolve_in_store(store, ref))

    # -- pages ---------------------------------------------------------------------------

    async def tasks(self, request: Request) -> Response:
        with self.store() as store:
            done = store.finished_rows()
            items = []
            for record in reversed(store.tasks()):
                key = (record.id, record.state, done.get(record.id, 0))
                if key not in self.config.summaries:
                    report = stream_report(store, record.id).report  # a row at a time
                    self.config.summaries[key] = {
                        "passRate": report.totals.pass_rate,
                        "redFlagRows": report.totals.rows_with_red_flags,
                        "judgeErrors": report.totals.judge_errors,
                    }
                items.append(
                    {
                        "record": record,
                        "name": task_name(record.extra),
                        "tags": task_tags(record.extra),
                        "rows": done.get(record.id, 0),
                        **self.config.summaries[key],
                    }
                )
        return self.render(request, "tasks.html.j2", tasks=items, store=self.config.store.name)

    async def report(self, request: Request) -> Response:
        """The task's report.html, byte for byte what ``report --format html`` writes."""
        with self.store() as store:
            task = stream_report(store, resolve_in_store(store, request.path_params["task"]))
            return HTMLResponse(html_report(store, task, task.report))

    async def compare(self, request: Request) -> Response:
        from rubric_engine.report.run import run_diff

        baseline = request.query_params.get("baseline", "")
        current = request.query_params.get("current", "")
        with self.store() as store:
            choices = [(t.id, task_name(t.extra)) for t in reversed(store.tasks())]
            if not baseline or not current:
                return self.render(request, "compare.html.j2", choices=choices, diff=None)
            base_id = resolve_in_store(store, baseline)
            cur_id = resolve_in_store(store, current)
        diff = run_diff(self.config.store, base_id, cur_id)
        rank = {"REGRESSION": 0, "CHANGED": 1, "IMPROVEMENT": 2}
        items = sorted(diff.items, key=lambda i: (rank[i.type], i.scope != "case"))
        return self.render(
            request,
            "compare.html.j2",
            choices=choices,
            diff=diff,
            items=items,
            baseline=base_id,
            current=cur_id,
        )

    async def reviewer_form(self, request: Request) -> Response:
        return self.render(
            request, "reviewer.html.j2", next=request.query_params.get("next", "/"), error=None
        )

    async def set_reviewer(self, request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        target = str(form.get("next", "/"))
        if not target.startswith("/") or target.startswith("//"):
            target = "/"
        if not name or len(name) > 80:
            return self.render(
                request,
                "reviewer.html.j2",
                status=400,
                next=target,
                error="give your name (1-80 characters): every label records who made it",
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(REVIEWER_COOKIE, quote(name, safe=""), httponly=True, samesite="strict")
        return response


async def _error_page(request: Request, exc: Exception) -> Response:
    pages: Pages = request.app.state.pages
    status = 404 if isinstance(exc, TaskNotFoundError) else 400
    return pages.render(request, "error.html.j2", status=status, message=str(exc))


def create_app(config: ServeConfig) -> Starlette:
    """The Starlette app over ``config.store``.

    Raises:
        StoreError: (at request time) the store file is missing or damaged; shown as a page.
    """
    from rubric_engine.serve.adjudicate_routes import AdjudicationPages

    pages = AdjudicationPages(config)
    routes = [
        Route("/", pages.tasks),
        Route("/reviewer", pages.reviewer_form, methods=["GET"]),
        Route("/reviewer", pages.set_reviewer, methods=["POST"]),
        Route("/compare", pages.compare),
        Route("/tasks/{task}/report", pages.report),
        Route("/tasks/{task}/queue", pages.queue),
        Route("/tasks/{task}/adjudicate", pages.adjudication_list),
        Route("/tasks/{task}/adjudicate/{row_id:path}", pages.adjudicate, methods=["GET", "POST"]),
        Route("/tasks/{task}/review/{row_id:path}", pages.review, methods=["GET", "POST"]),
        Route("/tasks/{task}/rows/{row_id:path}", pages.row),
    ]
    app = Starlette(routes=routes, exception_handlers={RubricEvalError: _error_page})
    app.state.pages = pages
    return app
