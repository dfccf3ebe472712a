"""Adjudication routes: the rows where reviewers disagree, and the form that settles one
(docs/review.md: disagreements are settled before a set is locked).

An adjudication is written as labels with ``source: adjudication`` and ``role: adjudicator``;
calibration takes it over the reviewers' labels. The adjudicator must give a reason and must
not be one of the row's reviewers: their adjudication would supersede their own review.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rubric_engine.errors import InputError
from rubric_engine.labels.store import append_labels
from rubric_engine.review.answers import answer_from_form, differences, labels_of_answer
from rubric_engine.review.queue import adjudication_rows
from rubric_engine.serve.pages import case_requirements_of, prefill, prefill_from_form
from rubric_engine.serve.review_routes import ReviewPages, _form_dict


class AdjudicationPages(ReviewPages):
    """:class:`ReviewPages` plus the adjudication list and form."""

    async def adjudication_list(self, request: Request) -> Response:
        with self.store() as store:
            task, rows = self._state(store, request.path_params["task"])
        disputed = []
        for row in adjudication_rows(rows):
            answers = list(row.reviews.items())
            changes = differences(answers[0][1], answers[1][1])
            disputed.append({"row": row, "reviewers": [n for n, _ in answers], "changes": changes})
        return self.render(request, "adjudicate_list.html.j2", task=task.record, disputed=disputed)

    async def adjudicate(self, request: Request) -> Response:
        reviewer = self.reviewer(request)
        if reviewer is None:
            return self._ask_name(request)
        row_id = request.path_params["row_id"]
        form = _form_dict(await request.form()) if request.method == "POST" else None
        with self.store() as store:
            task, rows = self._state(store, request.path_params["task"])
            row = self._find(rows, row_id)
            dialogue = store.dialogues(task.record.id, [row_id]).get(row_id, {})
            first = next(iter(row.reviews.values()), None)
            if form is None:
                return self._form_page(
                    request,
                    task,
                    row,
                    dialogue,
                    blind=False,
                    strategy="disagreement",
                    fill=prefill(first),
                    adjudicate=True,
                )
            try:
                if reviewer in row.reviews:
                    raise InputError(
                        f"{reviewer} reviewed row {row_id}; a disagreement is settled by "
                        "someone else: switch reviewer (top right) and adjudicate"
                    )
                answer = answer_from_form(
                    form,
                    row_id,
                    task.rubric,
                    case_requirements_of(dialogue),
                    len(dialogue.get("messages") or []),
                )
                if not answer.reason:
                    raise InputError(f"adjudication of row {row_id}: say why in the reason field")
            except InputError as exc:
                return self._form_page(
                    request,
                    task,
                    row,
                    dialogue,
                    blind=False,
                    strategy="disagreement",
                    fill=prefill_from_form(form),
                    error=str(exc),
                    adjudicate=True,
                )
            context = self._context(task, reviewer, saw=True, adjudication=True)
            append_labels(store.backend, labels_of_answer(answer, context))
        target = f"/tasks/{quote(task.record.id, safe='')}/adjudicate"
        return RedirectResponse(target, status_code=303)
