"""Adjudication: the rows whose reviewers disagree, the page that lays the dispute out per
requirement and records the lead's decision, and reopening a settled row (docs/review.md
"Adjudication"; experts' disagreements are settled before a set is locked).

A settlement writes adjudication labels (``source: adjudication``, ``role: adjudicator``) for
the requirements the lead decided and the row's intent, score and red flags, plus a ``settle``
event, in one transaction: the row leaves every queue and the list. Only a lead's explicit
reopen (a ``reopen`` event with its reason) brings it back; the decision's labels stay current
until a new settlement supersedes them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rubric_engine.errors import InputError, StoreError
from rubric_engine.labels.model import LabelSource
from rubric_engine.review.adjudication import decision_from_form, dispute
from rubric_engine.review.answers import ReviewContext, answer_of_result, labels_of_answer
from rubric_engine.review.queue_store import disputed_rows
from rubric_engine.review.rows import read_row, record_event, write_labels
from rubric_engine.serve.app import Refused
from rubric_engine.serve.pages import (
    STATUS_KEYS,
    case_requirements_of,
    fill_from_form,
    judge_view,
    turns,
)
from rubric_engine.serve.review_routes import ReviewPages, q

#: disputed rows listed per page
DISPUTES_PER_PAGE = 50


class AdjudicationPages(ReviewPages):
    """The disputed rows, the adjudication form and reopening."""

    async def adjudication_list(self, request: Request) -> Response:
        page = request.query_params.get("page", "1")
        page_no = int(page) if page.isdigit() and int(page) > 0 else 1
        with self.store() as store:
            me = self.lead(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            rows, total = disputed_rows(
                store.backend, record.id, DISPUTES_PER_PAGE, (page_no - 1) * DISPUTES_PER_PAGE
            )
            listed: list[dict[str, Any]] = []
            for row_id in rows:
                try:
                    row = read_row(store, record, row_id)
                except StoreError as exc:  # edited in the store: listed with why, not settled
                    listed.append({"rowId": row_id, "table": None, "problem": str(exc)})
                    continue
                table = dispute(rubric, case_requirements_of(row.dialogue), row.reviews, None)
                listed.append({"rowId": row_id, "table": table})
        return self.render(
            request,
            "adjudicate_list.html.j2",
            me,
            task=record,
            disputed=listed,
            total=total,
            page=page_no,
            pages=max(1, -(-total // DISPUTES_PER_PAGE)),
        )

    def _page(
        self,
        request: Request,
        store: Any,
        me: Any,
        record: Any,
        rubric: Any,
        row: Any,
        fill: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> Response:
        case = case_requirements_of(row.dialogue)
        judge = answer_of_result(row.result)
        table = dispute(rubric, case, row.reviews, judge)
        agreed_fields = {
            name: next(iter(values.values()))
            for name, values in table.fields.items()
            if name not in table.disputed_fields and values
        }
        if fill is None:  # only what every reviewer said; disputed fields start empty
            fill = {
                "intent": agreed_fields.get("intent"),
                "score": agreed_fields.get("score"),
                "flags": list(table.fields["redFlags"].get(table.reviewers[0], ()))  # type: ignore[call-overload]
                if "redFlags" not in table.disputed_fields and table.reviewers
                else [],
                "decisions": {},
                "evidence": {},
                "reasons": {},
                "reason": "",
            }
        return self.render(
            request,
            "adjudicate.html.j2",
            me,
            status=400 if error else 200,
            task=record,
            rubric=rubric,
            status_keys=STATUS_KEYS,
            row_id=row.result.row_id,
            turns=turns(row.dialogue),
            turn_count=len(row.dialogue.get("messages") or []),
            judge=judge_view(row.result, rubric, case),
            table=table,
            fill=fill,
            error=error,
        )

    async def adjudicate(self, request: Request) -> Response:
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.lead(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            row = read_row(store, record, row_id)
            self._may_settle(store, record.id, row_id, me.name, row.reviews)
            return self._page(request, store, me, record, rubric, row)

    def _may_settle(
        self, store: Any, task_id: str, row_id: str, name: str, reviews: dict[str, Any]
    ) -> None:
        """Raises: Refused: the lead reviewed the row, fewer than two reviews, or settled."""
        if name in reviews:
            raise Refused(
                403,
                f"{name} reviewed row {row_id}; a disagreement is settled by someone who did not "
                "review it (another lead or admin)",
            )
        if len(reviews) < 2:
            raise Refused(409, f"row {row_id} has {len(reviews)} review(s): nothing to settle")
        states = {
            s
            for (s,) in store.backend.execute(
                "SELECT state FROM review_items WHERE task_id=? AND row_id=?", (task_id, row_id)
            )
        }
        if "settled" in states:
            raise Refused(409, f"row {row_id} is settled; reopen it first (its row page)")

    async def settle(self, request: Request) -> Response:
        form = await self.posted(request)
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.lead(request, store)
            record, rubric = self.task(store, request.path_params["task"])
            row = read_row(store, record, row_id)
            self._may_settle(store, record.id, row_id, me.name, row.reviews)
            case = case_requirements_of(row.dialogue)
            table = dispute(rubric, case, row.reviews, answer_of_result(row.result))
            try:
                decision = decision_from_form(
                    form, row_id, rubric, case, table, len(row.dialogue.get("messages") or [])
                )
            except InputError as exc:
                fill = fill_from_form(form)
                fill["decisions"] = {
                    k[len("decide.") :]: v for k, v in form.items() if k.startswith("decide.") and v
                }
                return self._page(request, store, me, record, rubric, row, fill, str(exc))
            context = ReviewContext(
                reviewer=me.name,
                task_id=record.id,
                rubric_key=record.rubric_key,
                rubric_version=record.rubric_version,
                rubric_hash=record.rubric_hash,
                saw_judge_verdict=True,
                source=LabelSource.ADJUDICATION,
                role="adjudicator",
            )
            labels = labels_of_answer(decision, context)
            write_labels(store, record.id, row_id, me.name, labels, ("settle", decision.reason))
        return RedirectResponse(f"/tasks/{q(record.id)}/adjudicate", status_code=303)

    async def reopen(self, request: Request) -> Response:
        form = await self.posted(request)
        row_id = request.path_params["row_id"]
        with self.store() as store:
            me = self.lead(request, store)
            record, _ = self.task(store, request.path_params["task"])
            read_row(store, record, row_id)  # the row exists
            states = {
                st
                for (st,) in store.backend.execute(
                    "SELECT state FROM review_items WHERE task_id=? AND row_id=?",
                    (record.id, row_id),
                )
            }
            if "settled" not in states:
                raise Refused(409, f"row {row_id} is not settled: there is nothing to reopen")
            why = (form.get("reason") or "").strip()
            if not why:
                raise Refused(400, "say why the row is reopened (the reason is recorded)")
            record_event(store, record.id, row_id, "reopen", me.name, why)
        target = f"/tasks/{q(record.id)}/rows/{q(row_id)}?" + urlencode({"reopened": "1"})
        return RedirectResponse(target, status_code=303)
