"""The review routes: a task's queues, a queue's page, the review form (submit, skip, draft)
and a row's page (docs/review.md "The review page").

Each page reads only what it shows: the task record, the queue's counts and next rows through
``review_items``' indexes, one row's result, dialogue and labels. Whether the judge's verdict
is shown is decided here, from the reviewer's assignment: a blind reviewer sees it on a row
only once they have answered that row, whatever the URL says, and the labels record exactly
that (``sawJudgeVerdict``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from rubric_engine.errors import InputError
from rubric_engine.labels.model import LabelSource
from rubric_engine.results.model import RowResult
from rubric_engine.review.accounts import Account
from rubric_engine.review.answers import (
    ReviewContext,
    answer_from_form,
    answer_of_result,
    check_reason,
    labels_of_answer,
)
from rubric_engine.review.claims import claim_row, live_claims
from rubric_engine.review.queue_store import (
    Queue,
    get_queue,
    next_rows,
    progress,
    queue_of_row,
    queues,
)
from rubric_engine.review.rows import RowData, load_draft, read_row, record_event, save_draft
from rubric_engine.review.rows import write_labels as write_answer
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.serve.app import Refused
from rubric_engine.serve.browse_routes import BrowsePages, blind_in_task
from rubric_engine.serve.pages import (
    EMPTY_FILL,
    STATUS_KEYS,
    case_requirements_of,
    fill_from_answer,
    fill_from_form,
    judge_view,
    requirement_rows,
    turns,
)
from rubric_engine.store.task_store import TaskRecord, TaskStore, parse_result

#: how many upcoming rows the queue page lists
QUEUE_PAGE_ROWS = 50


def q(value: str) -> str:
    return quote(value, safe="")


def review_url(task_id: str, row_id: str, queue: str) -> str:
    return f"/tasks/{q(task_id)}/review/{q(row_id)}?{urlencode({'queue': queue})}"


class ReviewPages(BrowsePages):
    """Queues, the review form and the row page."""

    def _queue_for(
        self, store: TaskStore, record: TaskRecord, me: Account, name: str | None, row_id: str
    ) -> Queue:
        """The queue a review happens in: the named one, else the first holding the row that
        ``me`` works (a lead may open any queue). Raises: Refused: not a member (403), or no
        such queue (409)."""
        if name:
            queue = get_queue(store.backend, record.id, name)
            if not queue.settings.is_member(me.name) and not me.leads:
                raise Refused(403, f"{me.name} is not assigned to queue {name} of {record.id}")
            return queue
        found = queue_of_row(store.backend, record.id, row_id, me.name)
        if found is None:
            hint = " Make one on the task's queues page." if me.leads else ""
            raise Refused(
                409, f"row {row_id} of task {record.id} is in no review queue you work.{hint}"
            )
        return found

    def _others(self, store: TaskStore, task_id: str, me: Account) -> frozenset[str]:
        claims = live_claims(store.backend, task_id)
        return frozenset(row for row, who in claims.items() if who != me.name)

    def _next(self, store: TaskStore, queue: Queue, me: Account) -> str | None:
        found = next_rows(store.backend, queue, me.name, 1, self._others(store, queue.task_id, me))
        return review_url(queue.task_id, found[0], queue.name) if found else None

    # -- queues --------------------------------------------------------------------------

    async def queues_page(self, request: Request) -> Response:
        with self.store() as store:
            me = self.me(request, store)
            record, _ = self.task(store, request.path_params["task"])
            others = self._others(store, record.id, me)
            listed = [
                {"queue": qu, "progress": progress(store.backend, qu, me.name, others)}
                for qu in queues(store.backend, record.id)
                if me.leads or qu.settings.is_member(me.name)
            ]
        return self.render(request, "queues.html.j2", me, task=record, queues=listed, error=None)

    async def queue_page(self, request: Request) -> Response:
        with self.store() as store:
            me = self.me(request, store)
            record, _ = self.task(store, request.path_params["task"])
            queue = self._queue_for(store, record, me, request.path_params["queue"], "")
            others = self._others(store, record.id, me)
            upcoming = next_rows(store.backend, queue, me.name, QUEUE_PAGE_ROWS, others)
            blind = blind_in_task(store, record.id, me)
            shown = self._row_summaries(store, record, upcoming, with_verdict=not blind)
            counts = progress(store.backend, queue, me.name, others)
        return self.render(
            request,
            "queue.html.j2",
            me,
            task=record,
            queue=queue,
            rows=shown,
            progress=counts,
            blind=blind,
            next_link=review_url(record.id, upcoming[0], queue.name) if upcoming else None,
        )

    def _row_summaries(
        self, store: TaskStore, record: TaskRecord, row_ids: list[str], with_verdict: bool
    ) -> list[dict[str, Any]]:
        """The listed rows' judge figures (when shown) and reviewers, two keyed queries."""
        if not row_ids:
            return []
        marks = ",".join("?" * len(row_ids))
        results: dict[str, RowResult] = {}
        untrusted: set[str] = set()  # rows whose digest does not match: no figures shown
        if with_verdict:
            for row_id, (columns, why) in store.rows_of(record.id, row_ids).items():
                if why is None:
                    results[row_id] = parse_result(columns[5], record.id, row_id)
                else:
                    untrusted.add(row_id)
        reviewers: dict[str, set[str]] = {}
        for row_id, who in store.backend.execute(
            f"SELECT row_id, reviewer FROM labels WHERE rubric_key=? AND row_id IN ({marks}) "
            "AND task_id=? AND source<>'adjudication'",
            (record.rubric_key, *row_ids, record.id),
        ):
            reviewers.setdefault(row_id, set()).add(who)
        return [
            {
                "rowId": r,
                "result": results.get(r),
                "untrusted": r in untrusted,
                "reviewers": sorted(reviewers.get(r, ())),
            }
            for r in row_ids
        ]

    # -- the review form -----------------------------------------------------------------

    def _form(
        self,
        request: Request,
        store: TaskStore,
        me: Account,
        record: TaskRecord,
        rubric: EvalRubric,
        queue: Queue,
        row: RowData,
        fill: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> Response:
        shown = not blind_in_task(store, record.id, me) or me.name in row.reviews
        case = case_requirements_of(row.dialogue)
        judge = answer_of_result(row.result) if shown else None
        if fill is None:
            draft = load_draft(store, record.id, row.result.row_id, me.name)
            mine = row.reviews.get(me.name)
            fill = (
                fill_from_form(draft)
                if draft
                else fill_from_answer(mine)
                if mine
                else dict(EMPTY_FILL)
            )
        counts = progress(store.backend, queue, me.name, self._others(store, record.id, me))
        return self.render(
            request,
            "review.html.j2",
            me,
            status=400 if error else 200,
            task=record,
            rubric=rubric,
            queue=queue,
            progress=counts,
            row_id=row.result.row_id,
            turns=turns(row.dialogue),
            turn_count=len(row.dialogue.get("messages") or []),
            requirements=requirement_rows(rubric, case, judge),
            judge=judge_view(row.result, rubric, case) if shown else None,
            fill=fill,
            blind=not shown,
            edit=me.name in row.reviews,
            error=error,
            status_keys=STATUS_KEYS,
            opened=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    async def review(self, request: Request) -> Response:
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.me(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            queue = self._queue_for(store, record, me, request.query_params.get("queue"), row_id)
            row = read_row(store, record, row_id)
            self._open(store, record, queue, row_id)
            holder = claim_row(
                store.backend, record.id, row_id, me.name, queue.settings.claim_ttl_s
            )
            if holder != me.name:
                raise Refused(409, f"row {row_id} is being reviewed by {holder}; take the next row")
            return self._form(request, store, me, record, rubric, queue, row)

    def _open(self, store: TaskStore, record: TaskRecord, queue: Queue, row_id: str) -> None:
        """Raises: Refused: the row is not in the queue, or a lead settled it (409)."""
        found = store.backend.execute(
            "SELECT state FROM review_items WHERE task_id=? AND queue=? AND row_id=?",
            (record.id, queue.name, row_id),
        ).fetchone()
        if found is None:
            raise Refused(409, f"row {row_id} is not in queue {queue.name}")
        if found[0] == "settled":
            raise Refused(
                409,
                f"row {row_id} was settled by a lead: it takes no more reviews unless a lead "
                "reopens it (its row page shows the decision)",
            )

    async def submit(self, request: Request) -> Response:
        form = await self.posted(request)
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.me(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            queue = self._queue_for(store, record, me, form.get("queue"), row_id)
            self._open(store, record, queue, row_id)
            holder = live_claims(store.backend, record.id).get(row_id)
            if holder is not None and holder != me.name:
                raise Refused(409, f"row {row_id} is held by {holder}; nothing was stored")
            row = read_row(store, record, row_id)
            shown = not blind_in_task(store, record.id, me) or me.name in row.reviews
            case = case_requirements_of(row.dialogue)
            red_lines = {
                r.id: r.red_flag_type
                for r in (*rubric.requirements_by_id.values(), *case)
                if r.critical and r.red_flag_type
            }
            try:
                answer = answer_from_form(
                    form, row_id, rubric, case, len(row.dialogue.get("messages") or [])
                )
                check_reason(answer, answer_of_result(row.result), shown, red_lines)
            except InputError as exc:
                return self._form(
                    request, store, me, record, rubric, queue, row, fill_from_form(form), str(exc)
                )
            context = ReviewContext(
                reviewer=me.name,
                task_id=record.id,
                rubric_key=record.rubric_key,
                rubric_version=record.rubric_version,
                rubric_hash=record.rubric_hash,
                saw_judge_verdict=shown,
                source=LabelSource.REVIEW,
                role="reviewer",
            )
            write_answer(store, record.id, row_id, me.name, labels_of_answer(answer, context))
        target = f"/tasks/{q(record.id)}/rows/{q(row_id)}?" + urlencode(
            {"queue": queue.name, "answered": "1"}
        )
        return RedirectResponse(target, status_code=303)

    async def skip(self, request: Request) -> Response:
        form = await self.posted(request)
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.me(request, store)
            record, _ = self.task(store, request.path_params["task"])
            queue = self._queue_for(store, record, me, form.get("queue"), row_id)
            record_event(store, record.id, row_id, "skip", me.name, form.get("note") or None)
            target = self._next(store, queue, me)
        fallback = f"/tasks/{q(record.id)}/queues/{q(queue.name)}"
        return RedirectResponse(target or fallback, status_code=303)

    async def draft(self, request: Request) -> Response:
        """Keep the form as it stands. A draft sent after the reviewer answered the row (a
        save still on its way when they submitted) is dropped: it would hold the row again."""
        form = await self.posted(request)
        row_id = request.path_params["row_id"]
        kept = {k: v for k, v in form.items() if k not in ("csrf", "member", "opened") and v}
        with self.store() as store:
            me = self.me(request, store)
            record, _ = self.task(store, request.path_params["task"])
            queue = self._queue_for(store, record, me, form.get("queue"), row_id)
            self._open(store, record, queue, row_id)
            if self._left_since(store, record.id, row_id, me.name, str(form.get("opened", ""))):
                return JSONResponse({"saved": False, "why": "answered or skipped since"}, 409)
            holder = claim_row(  # working on a row keeps it reserved
                store.backend, record.id, row_id, me.name, queue.settings.claim_ttl_s
            )
            if holder != me.name:
                raise Refused(409, f"row {row_id} is held by {holder}; the draft was not kept")
            save_draft(store, record.id, row_id, me.name, kept)
        return JSONResponse({"saved": True})

    def _left_since(
        self, store: TaskStore, task_id: str, row_id: str, reviewer: str, opened: str
    ) -> bool:
        """Whether the reviewer answered or skipped the row since the form was opened."""
        found = [
            store.backend.execute(sql, (task_id, reviewer, row_id)).fetchone()[0]
            for sql in (
                "SELECT MAX(labelled_at) FROM labels WHERE task_id=? AND reviewer=? AND row_id=?",
                "SELECT MAX(at) FROM review_events WHERE task_id=? AND reviewer=? AND row_id=? "
                "AND kind='skip'",
            )
        ]
        return any(when is not None and when >= opened for when in found)

    # -- the row page --------------------------------------------------------------------

    async def row(self, request: Request) -> Response:
        """A row with the judge's verdict and every review of it (after answering, from the
        report or the comparison page); a blind reviewer sees neither before answering it."""
        from rubric_engine.review.adjudication import dispute
        from rubric_engine.review.rows import events

        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.me(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            row = read_row(store, record, row_id)
            hidden = blind_in_task(store, record.id, me) and me.name not in row.reviews
            name = request.query_params.get("queue")
            queue = self._queue_for(store, record, me, name, row_id) if name else None
            queue = queue or queue_of_row(store.backend, record.id, row_id, me.name)
            next_link = self._next(store, queue, me) if queue else None
            states = dict(
                store.backend.execute(
                    "SELECT queue, state FROM review_items WHERE task_id=? AND row_id=?",
                    (record.id, row_id),
                ).fetchall()
            )
            history = events(store, record.id, row_id)
        case = case_requirements_of(row.dialogue)
        judge = None if hidden else answer_of_result(row.result)
        table = None if hidden else dispute(rubric, case, row.reviews, judge)
        return self.render(
            request,
            "row.html.j2",
            me,
            task=record,
            row_id=row_id,
            turns=turns(row.dialogue),
            turn_count=len(row.dialogue.get("messages") or []),
            judge=None if hidden else judge_view(row.result, rubric, case),
            table=table,
            adjudications=None if hidden else row.adjudications,
            hidden=hidden,
            answered=request.query_params.get("answered") == "1",
            next_link=next_link,
            queue=queue,
            states=states,
            events=history,
        )
