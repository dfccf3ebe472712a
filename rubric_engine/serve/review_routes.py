"""The review routes: the queue, a row's review form and a row's page (docs/review.md).

A review page is built from the stored row and the task's own rubric snapshot. In blind mode
the judge's verdict is not passed to the template at all; it is shown on the row's page after
the reviewer has answered. Each answer is written as labels (docs/calibration.md) through
:func:`rubric_engine.labels.store.append_labels` (append-only; an edit supersedes).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rubric_engine.errors import InputError
from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import append_labels, read_labels
from rubric_engine.report.stored import StoredTask
from rubric_engine.review.answers import (
    Answer,
    ReviewContext,
    answer_from_form,
    check_reason,
    differences,
    labels_of_answer,
)
from rubric_engine.review.claims import claim_row, live_claims, release_claim
from rubric_engine.review.queue import (
    RowReviews,
    adjudication_rows,
    build_queue,
    check_strategy,
    row_reviews,
)
from rubric_engine.serve.app import Pages
from rubric_engine.serve.pages import (
    STATUS_KEYS,
    case_requirements_of,
    judge_view,
    prefill,
    prefill_from_form,
    requirement_rows,
    turns,
)
from rubric_engine.store.task_store import TaskStore

#: how many upcoming rows the queue page lists
QUEUE_PAGE_ROWS = 50


def _form_dict(form: FormData) -> dict[str, Any]:
    data: dict[str, Any] = {k: str(v) for k, v in form.items()}
    data["flag"] = [str(v) for v in form.getlist("flag")]
    return data


class ReviewPages(Pages):
    """:class:`~rubric_engine.serve.app.Pages` plus the review and adjudication routes."""

    def _state(self, store: TaskStore, ref: str) -> tuple[StoredTask, list[RowReviews]]:
        task = self.load(store, ref)
        labels = read_labels(store.backend, task_id=task.record.id)
        return task, row_reviews([r.result for r in task.rows], labels, self.config.policy)

    def _options(self, request: Request) -> tuple[str, bool]:
        strategy = check_strategy(request.query_params.get("strategy", "random"))
        blind_param = request.query_params.get("blind")
        blind = self.config.blind if blind_param is None else blind_param == "1"
        return strategy, blind

    def _ask_name(self, request: Request) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/reviewer?{urlencode({'next': target})}", status_code=303)

    def _queue(
        self,
        store: TaskStore,
        task: StoredTask,
        rows: list[RowReviews],
        reviewer: str,
        strategy: str,
    ) -> list[RowReviews]:
        claims = live_claims(store.backend, task.record.id)
        others = frozenset(row for row, who in claims.items() if who != reviewer)
        other_judges = self._other_judges(store, task) if strategy == "disagreement" else {}
        return build_queue(
            rows,
            reviewer,
            check_strategy(strategy),
            self.config.policy,
            claimed_by_others=others,
            other_judges=other_judges,
        )

    def _other_judges(self, store: TaskStore, task: StoredTask) -> dict[str, list[Answer]]:
        """Other judge runs of the same rubric key over the same rows (judge disagreement)."""
        from rubric_engine.report.stored import load_task
        from rubric_engine.review.answers import answer_of_result

        wanted = {r.result.row_id for r in task.rows}
        out: dict[str, list[Answer]] = {}
        for record in store.tasks():
            if record.id == task.record.id or record.rubric_key != task.record.rubric_key:
                continue
            for row in load_task(store, record.id).rows:
                answer = answer_of_result(row.result)
                if row.result.row_id in wanted and answer is not None:
                    out.setdefault(row.result.row_id, []).append(answer)
        return out

    def _next_link(
        self, task_id: str, queue: list[RowReviews], strategy: str, blind: bool
    ) -> str | None:
        if not queue:
            return None
        query = urlencode({"strategy": strategy, "blind": "1" if blind else "0"})
        row = quote(queue[0].result.row_id, safe="")
        return f"/tasks/{quote(task_id, safe='')}/review/{row}?{query}"

    async def queue(self, request: Request) -> Response:
        reviewer = self.reviewer(request)
        if reviewer is None:
            return self._ask_name(request)
        strategy, blind = self._options(request)
        with self.store() as store:
            task, rows = self._state(store, request.path_params["task"])
            queue = self._queue(store, task, rows, reviewer, strategy)
        return self.render(
            request,
            "queue.html.j2",
            task=task.record,
            queue=queue[:QUEUE_PAGE_ROWS],
            waiting=len(queue),
            strategy=strategy,
            blind=blind,
            next_link=self._next_link(task.record.id, queue, strategy, blind),
            mine=sum(reviewer in r.reviews for r in rows),
            disputed=len(adjudication_rows(rows)),
            total=len(rows),
            policy=self.config.policy,
        )

    def _form_page(
        self,
        request: Request,
        task: StoredTask,
        row: RowReviews,
        dialogue: dict[str, Any],
        *,
        blind: bool,
        strategy: str,
        fill: dict[str, Any] | None = None,
        error: str | None = None,
        adjudicate: bool = False,
    ) -> Response:
        case = case_requirements_of(dialogue)
        show_judge = not blind and row.judge is not None
        return self.render(
            request,
            "review.html.j2",
            status=400 if error else 200,
            task=task.record,
            rubric=task.rubric,
            row_id=row.result.row_id,
            turns=turns(dialogue),
            requirements=requirement_rows(task.rubric, case),
            judge=judge_view(row.result, task.rubric, case) if show_judge else None,
            fill=fill if fill is not None else prefill(row.judge if show_judge else None),
            blind=blind,
            strategy=strategy,
            error=error,
            status_keys=STATUS_KEYS,
            adjudicate=adjudicate,
            reviews=row.reviews if adjudicate else {},
        )

    def _find(self, rows: list[RowReviews], row_id: str) -> RowReviews:
        for row in rows:
            if row.result.row_id == row_id:
                return row
        raise InputError(f"row {row_id!r} is not in this task; open it from the task's queue")

    async def review(self, request: Request) -> Response:
        reviewer = self.reviewer(request)
        if reviewer is None:
            return self._ask_name(request)
        row_id = request.path_params["row_id"]
        form = _form_dict(await request.form()) if request.method == "POST" else None
        with self.store() as store:
            task, rows = self._state(store, request.path_params["task"])
            row = self._find(rows, row_id)
            dialogue = store.dialogues(task.record.id, [row_id]).get(row_id, {})
            if form is None:
                strategy, blind = self._options(request)
                holder = claim_row(
                    store.backend, task.record.id, row_id, reviewer, self.config.claim_ttl_s
                )
                if holder != reviewer:
                    return self.render(
                        request,
                        "error.html.j2",
                        status=409,
                        message=f"row {row_id} is being reviewed by {holder}; "
                        "take the next row of the queue",
                    )
                return self._form_page(request, task, row, dialogue, blind=blind, strategy=strategy)
            strategy = check_strategy(form.get("strategy") or "random")
            blind = form.get("blind") == "1"
            try:
                answer = answer_from_form(
                    form,
                    row_id,
                    task.rubric,
                    case_requirements_of(dialogue),
                    len(dialogue.get("messages") or []),
                )
                check_reason(answer, row.judge, saw_judge_verdict=not blind)
            except InputError as exc:
                return self._form_page(
                    request,
                    task,
                    row,
                    dialogue,
                    blind=blind,
                    strategy=strategy,
                    fill=prefill_from_form(form),
                    error=str(exc),
                )
            context = self._context(task, reviewer, saw=not blind)
            append_labels(store.backend, labels_of_answer(answer, context))
            release_claim(store.backend, task.record.id, row_id, reviewer)
        query = urlencode({"answered": "1", "strategy": strategy, "blind": "1" if blind else "0"})
        target = f"/tasks/{quote(task.record.id, safe='')}/rows/{quote(row_id, safe='')}?{query}"
        return RedirectResponse(target, status_code=303)

    def _context(
        self, task: StoredTask, reviewer: str, *, saw: bool, adjudication: bool = False
    ) -> ReviewContext:
        record = task.record
        return ReviewContext(
            reviewer=reviewer,
            task_id=record.id,
            rubric_key=record.rubric_key,
            rubric_version=record.rubric_version,
            rubric_hash=record.rubric_hash,
            saw_judge_verdict=saw,
            source=LabelSource.ADJUDICATION if adjudication else LabelSource.REVIEW,
            role="adjudicator" if adjudication else "reviewer",
        )

    async def row(self, request: Request) -> Response:
        """A row with the judge's verdict and every review of it (after answering, or from the
        comparison page)."""
        reviewer = self.reviewer(request)
        row_id = request.path_params["row_id"]
        strategy, blind = self._options(request)
        with self.store() as store:
            task, rows = self._state(store, request.path_params["task"])
            row = self._find(rows, row_id)
            dialogue = store.dialogues(task.record.id, [row_id]).get(row_id, {})
            queue = self._queue(store, task, rows, reviewer, strategy) if reviewer else []
        case = case_requirements_of(dialogue)
        # blind mode: neither the judge's verdict nor others' reviews (which are compared with
        # it) reach the page before this reviewer has answered the row, even by a typed URL
        hidden = blind and (reviewer is None or reviewer not in row.reviews)
        reviews = (
            []
            if hidden
            else [
                {
                    "reviewer": name,
                    "answer": answer,
                    "changes": differences(row.judge, answer) if row.judge else [],
                }
                for name, answer in row.reviews.items()
            ]
        )
        return self.render(
            request,
            "row.html.j2",
            task=task.record,
            row_id=row_id,
            turns=turns(dialogue),
            judge=None if hidden else judge_view(row.result, task.rubric, case),
            reviews=reviews,
            hidden=hidden,
            answered=request.query_params.get("answered") == "1",
            next_link=self._next_link(task.record.id, queue, strategy, blind),
            strategy=strategy,
            disputed=row.disputed and not row.adjudicated,
        )
