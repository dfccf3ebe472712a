"""The browsing pages: the task list, a task's report and the comparison of two tasks
(docs/review.md "Pages"). A reviewer who works a task blind is shown neither its report nor
a comparison with it: both hold the judge's verdicts.

These pages read whole tasks the first time (the figures cover every row): they run in a
worker thread, so a large report does not hold up the reviewers' pages meanwhile."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from rubric_engine.errors import RubricEvalError
from rubric_engine.report.diff import diff_tasks
from rubric_engine.report.model import Diff
from rubric_engine.report.run import streamed_side
from rubric_engine.report.stored import html_report, stream_report, task_calibration
from rubric_engine.review.accounts import Account
from rubric_engine.review.queue_store import queues
from rubric_engine.serve.app import Pages, Refused
from rubric_engine.store.task_ref import resolve_in_store, task_name, task_tags
from rubric_engine.store.task_store import TaskStore

#: items of a comparison listed per page
COMPARE_PAGE_ITEMS = 100
#: comparisons a server keeps built (their items: one per difference, not per row)
DIFFS_KEPT = 4
#: reports a server keeps built (each a few MB: the drill-down holds its rows' dialogues)
REPORTS_KEPT = 4


def blind_in_task(store: TaskStore, task_id: str, me: Account) -> bool:
    """Whether ``me`` reviews this task blind: a plain reviewer assigned blind in one of its
    queues (leads and admins see the verdict: they settle disputes against it)."""
    if me.role != "reviewer":
        return False
    return any(
        q.settings.is_member(me.name) and q.settings.blind_for(me.name)
        for q in queues(store.backend, task_id)
    )


class BrowsePages(Pages):
    """Task list, report and comparison."""

    def _refuse_blind(self, store: TaskStore, task_id: str, me: Account) -> None:
        if blind_in_task(store, task_id, me):
            raise Refused(
                403,
                f"you review task {task_id} blind: its report and comparisons show the judge's "
                "verdicts, so they stay closed to you; each row's verdict shows once you have "
                "answered it",
            )

    async def tasks(self, request: Request) -> Response:
        return await run_in_threadpool(self._tasks, request)

    def _tasks(self, request: Request) -> Response:
        with self.store() as store:
            me = self.me(request, store)
            done = store.finished_rows()
            items = []
            for record in reversed(store.tasks()):
                key = (record.id, record.state, done.get(record.id, 0))
                figures: dict[str, Any] = {}
                try:
                    figures = self._summary(store, record.id, key)
                except RubricEvalError as exc:  # one unreadable task: the others still show
                    figures = {"problem": str(exc)}
                items.append(
                    {
                        "record": record,
                        "name": task_name(record.extra),
                        "tags": task_tags(record.extra),
                        "rows": done.get(record.id, 0),
                        "queues": [q.name for q in queues(store.backend, record.id)],
                        **figures,
                    }
                )
        return self.render(request, "tasks.html.j2", me, tasks=items, store=str(self.config.store))

    def _summary(self, store: TaskStore, task_id: str, key: tuple[str, str, int]) -> dict[str, Any]:
        """The list page's figures of a task, kept per task state and row count.

        Raises:
            RubricEvalError: the task cannot be read (a row does not match its digest, its
                rows are signed with a key the server does not hold): not kept, so the page
                says so until it is fixed.
        """
        if key not in self.config.summaries:
            report = stream_report(store, task_id).report  # a row at a time
            self.config.summaries[key] = {
                "passRate": report.totals.pass_rate,
                "redFlagRows": report.totals.rows_with_red_flags,
                "judgeErrors": report.totals.judge_errors,
            }
        return self.config.summaries[key]

    async def report(self, request: Request) -> Response:
        return await run_in_threadpool(self._report, request)

    def _report(self, request: Request) -> Response:
        """The task's report.html, as ``report --format html`` writes it, each drill-down row
        linking to its review page. Building it reads every row (the figures cover them all),
        so the page is kept per task state, row count and calibration: a second visit costs a
        lookup; anything that changes the report changes the key."""
        with self.store() as store:
            me = self.me(request, store)
            record = store.task(resolve_in_store(store, request.path_params["task"]))
            self._refuse_blind(store, record.id, me)
            rows = store.backend.execute(
                "SELECT COUNT(*) FROM rows WHERE task_id=?", (record.id,)
            ).fetchone()[0]
            calibration = task_calibration(store, record).model_dump_json()
            key = (record.id, record.state, int(rows), calibration)
            html = self.config.reports.get(key)
            if html is None:
                task = stream_report(store, record.id)
                link = f"/tasks/{record.id}/review/"
                html = html_report(store, task, task.report, review_url=link)
            with self.lock:  # report pages are built in worker threads
                self.config.reports.pop(key, None)
                self.config.reports[key] = html  # the most recent last
                while len(self.config.reports) > REPORTS_KEPT:
                    del self.config.reports[next(iter(self.config.reports))]
            return HTMLResponse(html)

    def _diff(self, store: TaskStore, base_id: str, cur_id: str) -> Diff:
        """The two tasks' diff, streamed from the store (memory holds the reports and the
        items, not the rows) and kept per task state and row count, so the next page of
        items is a lookup."""
        done = store.finished_rows()
        base, cur = store.task(base_id), store.task(cur_id)
        key = (base_id, base.state, done.get(base_id, 0), cur_id, cur.state, done.get(cur_id, 0))
        diff = self.config.diffs.get(key)
        if diff is None:
            diff = diff_tasks(streamed_side(store, base_id), streamed_side(store, cur_id))
        with self.lock:  # comparison pages are built in worker threads
            self.config.diffs.pop(key, None)
            self.config.diffs[key] = diff  # the most recent last
            while len(self.config.diffs) > DIFFS_KEPT:
                del self.config.diffs[next(iter(self.config.diffs))]
        return diff

    async def compare(self, request: Request) -> Response:
        return await run_in_threadpool(self._compare, request)

    def _compare(self, request: Request) -> Response:
        baseline = request.query_params.get("baseline", "")
        current = request.query_params.get("current", "")
        page = request.query_params.get("page", "1")
        page_no = int(page) if page.isdigit() and int(page) > 0 else 1
        with self.store() as store:
            me = self.me(request, store)
            choices = [(t.id, task_name(t.extra)) for t in reversed(store.tasks())]
            if not baseline or not current:
                return self.render(request, "compare.html.j2", me, choices=choices, diff=None)
            base_id = resolve_in_store(store, baseline)
            cur_id = resolve_in_store(store, current)
            for task_id in (base_id, cur_id):
                self._refuse_blind(store, task_id, me)
            diff = self._diff(store, base_id, cur_id)
        rank = {"REGRESSION": 0, "CHANGED": 1, "IMPROVEMENT": 2}
        items = sorted(diff.items, key=lambda i: (rank[i.type], i.scope != "case"))
        pages = max(1, -(-len(items) // COMPARE_PAGE_ITEMS))
        page_no = min(page_no, pages)
        start = (page_no - 1) * COMPARE_PAGE_ITEMS
        return self.render(
            request,
            "compare.html.j2",
            me,
            choices=choices,
            diff=diff,
            items=items[start : start + COMPARE_PAGE_ITEMS],
            item_count=len(items),
            first_item=start + 1,
            page=page_no,
            pages=pages,
            baseline=base_id,
            current=cur_id,
        )
