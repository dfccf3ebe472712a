"""What leads and admins manage in the app: queues (make one, change who works it and how),
a queue's agreement figures, and the team's accounts (docs/review.md "The lead's workflow").

The agreement panel shows the figures `rubric-eval calibrate TASK` prints — computed by
:func:`rubric_engine.calibration.run.calibrate_task` over the queue's rows, not saved — with
the requirements least agreed on first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rubric_engine.errors import ConfigurationError, InputError, RubricEvalError
from rubric_engine.review.accounts import accounts, add_reviewer, issue_token, revoke
from rubric_engine.review.queue import QueueSettings, check_strategy
from rubric_engine.review.queue_store import create_queue, get_queue, queues, update_queue
from rubric_engine.serve.adjudicate_routes import AdjudicationPages
from rubric_engine.serve.app import Refused
from rubric_engine.store.backend import Backend


def _int(form: dict[str, Any], name: str, default: int) -> int:
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    if not text.lstrip("-").isdigit():
        raise InputError(f"{name} {text!r}: give a whole number")
    return int(text)


def _share(form: dict[str, Any], name: str, default: float) -> float:
    """A share typed in a form (``0.2``); its range is the queue settings' own check."""
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{name} {text!r}: give a share from 0 to 1, e.g. 0.2") from None


def _members(db: Backend, form: dict[str, Any]) -> dict[str, bool]:
    """``member`` values (``NAME``, ``NAME:blind``, ``NAME:sighted``) → reviewer → blind."""
    active = {a.name for a in accounts(db) if a.active}
    blind = form.get("blind") == "1"
    out: dict[str, bool] = {}
    for text in form.get("member") or ():
        for part in str(text).replace(",", " ").split():
            name, _, how = part.partition(":")
            if name not in active:
                raise InputError(
                    f"member {name!r} is no active account (active: {', '.join(sorted(active))})"
                )
            out[name] = blind if not how else how == "blind"
    return out


class TeamPages(AdjudicationPages):
    """Queue management, the agreement panel and the team page."""

    async def create_queue_route(self, request: Request) -> Response:
        form = await self.posted(request)
        with self.store() as store:
            me = self.lead(request, store)
            record, _ = self.task(store, request.path_params["task"])
            try:
                share = _share(form, "second_review", 0.2)
                settings = QueueSettings(
                    name=str(form.get("name") or "main").strip(),
                    strategy=check_strategy(str(form.get("strategy") or "random")),
                    reviewers_per_row=_int(form, "reviewers_per_row", 1),
                    second_review=share,
                    seed=_int(form, "seed", 0),
                    blind=form.get("blind") == "1",
                    claim_ttl_s=_int(form, "claim_ttl", 600),
                    members=_members(store.backend, form),
                )
                made = create_queue(store, record.id, settings, me.name)
            except (RubricEvalError, ValueError) as exc:
                listed = [
                    {"queue": qu, "progress": None} for qu in queues(store.backend, record.id)
                ]
                return self.render(
                    request,
                    "queues.html.j2",
                    me,
                    status=400,
                    task=record,
                    queues=listed,
                    error=str(exc),
                )
        target = f"/tasks/{quote(record.id, safe='')}/queues/{quote(made.name, safe='')}"
        return RedirectResponse(target, status_code=303)

    async def queue_settings(self, request: Request) -> Response:
        form = await self.posted(request)
        with self.store() as store:
            self.lead(request, store)
            record, _ = self.task(store, request.path_params["task"])
            queue = get_queue(store.backend, record.id, request.path_params["queue"])
            try:
                changed = replace(
                    queue.settings,
                    reviewers_per_row=_int(form, "reviewers_per_row", 1),
                    blind=form.get("blind") == "1",
                    claim_ttl_s=_int(form, "claim_ttl", 600),
                    members=_members(store.backend, form),
                )
            except (ConfigurationError, InputError) as exc:
                raise Refused(400, str(exc)) from exc
            update_queue(store.backend, queue, changed)
        target = f"/tasks/{quote(record.id, safe='')}/queues/{quote(queue.name, safe='')}"
        return RedirectResponse(target, status_code=303)

    async def agreement(self, request: Request) -> Response:
        return await run_in_threadpool(self._agreement, request)

    def _agreement(self, request: Request) -> Response:
        from rubric_engine.calibration.render import render_calibration_text
        from rubric_engine.calibration.run import calibrate_task

        with self.store() as store:
            me = self.lead(request, store)
            record, _ = self.task(store, request.path_params["task"])
            queue = get_queue(store.backend, record.id, request.path_params["queue"])
            rows = [
                r
                for (r,) in store.backend.execute(
                    "SELECT row_id FROM review_items WHERE task_id=? AND queue=?",
                    (record.id, queue.name),
                )
            ]
            try:
                result: dict[str, Any] | None = calibrate_task(
                    store, record.id, rows=rows, save=False
                )
                problem = None
            except InputError as exc:  # no label on the queue's rows yet
                result, problem = None, str(exc)
        requirements = []
        if result is not None:
            requirements = sorted(
                (r for r in result["requirements"] if r["n"]),
                key=lambda r: (r["kappa"] is None, r["kappa"] if r["kappa"] is not None else 0),
            )
        return self.render(
            request,
            "agreement.html.j2",
            me,
            task=record,
            queue=queue,
            result=result,
            text=render_calibration_text(result) if result else "",
            requirements=requirements,
            problem=problem,
        )

    async def team(self, request: Request) -> Response:
        with self.store() as store:
            me = self.me(request, store)
            if me.role != "admin":
                raise Refused(403, "the team page is for admins")
            found = accounts(store.backend)
        return self.render(request, "team.html.j2", me, accounts=found, link=None, error=None)

    async def team_change(self, request: Request) -> Response:
        form = await self.posted(request)
        action, name = form.get("action", ""), str(form.get("name") or "").strip()
        link = error = None
        with self.store() as store:
            me = self.me(request, store)
            if me.role != "admin":
                raise Refused(403, "the team page is for admins")
            try:
                if action == "add":
                    _, token = add_reviewer(store.backend, name, form.get("role") or "reviewer")
                elif action == "link":
                    token = issue_token(store.backend, name)
                elif action == "revoke":
                    if name == me.name:
                        raise InputError("you cannot revoke your own account here")
                    revoke(store.backend, name)
                    token = None
                else:
                    raise InputError(f"unknown action {action!r}")
                if token:
                    link = f"{request.base_url}signin?token={token}"
            except RubricEvalError as exc:
                error = str(exc)
            found = accounts(store.backend)
        return self.render(
            request,
            "team.html.j2",
            me,
            status=400 if error else 200,
            accounts=found,
            link=(name, link) if link else None,
            error=error,
        )
