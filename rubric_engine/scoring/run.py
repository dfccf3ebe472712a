"""The one orchestrator of ``score``: preflight → task → judge the rows → finish → report.

A fresh run and a resumed one differ only in how their :class:`Plan` is made (from the
options, or from the stored task); both then go through :func:`_run`. The rows themselves are
judged, normalized and stored by :func:`rubric_engine.pipeline.run_batch`, which owns the
concurrency. :func:`score_async` is the implementation; :func:`score` runs it on a new event
loop for callers without one.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError, StoreError
from rubric_engine.judge.backends import ReplayBackend
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.protocol import Judge
from rubric_engine.pipeline import Budget, JudgeUnavailable, NoJudge, run_batch
from rubric_engine.report import (
    ReportFiles,
    ReportRow,
    StoredTask,
    load_task,
    report_from_task,
    report_row,
    write_reports,
)
from rubric_engine.report.model import Report
from rubric_engine.results import JudgeErrorKind, RowResult
from rubric_engine.scoring.options import ScoreOptions, check_options, effective_model
from rubric_engine.scoring.plan import Plan, fresh_plan, resumed_plan
from rubric_engine.scoring.task import (
    report_command,
    resume_command,
    task_lock,
    task_record,
)
from rubric_engine.store import StoredRow, TaskStore, new_task_id
from rubric_engine.task_state import TaskState

OnStart = Callable[[str, int], None]
OnRow = Callable[[RowResult], None]


@dataclass
class ScoreResult:
    """What a run produced.

    Attributes:
        task_id: the task in the store.
        report: the task's report (what ``report.json`` holds).
        files: where the report files were written.
        cassette_misses: replayed rows without a recorded answer (JUDGE_ERROR rows).
        stopped: why the run stopped before every row was judged (a budget ran out), else
            ``None``.
    """

    task_id: str
    report: Report
    files: ReportFiles
    cassette_misses: list[RowResult] = field(default_factory=list)
    stopped: str | None = None


class JudgeUnavailableError(RubricEvalError):
    """The first rows all failed in transport; the run stopped instead of failing every row."""

    exit_code = ExitCode.NOTHING_SCORED

    def __init__(self, task_id: str, saved: int, total: int, first_error: str, store: Path) -> None:
        which = f"all {total} row(s)" if saved == total else f"the first {saved} of {total} row(s)"
        rest = "" if saved == total else ", so the rest were not tried"
        super().__init__(
            f"stopped task {task_id}: {which} failed to reach the judge{rest}. First error: "
            f"{first_error}. Check --model, --api-base and the API key. The failed rows are "
            f"kept: {report_command(task_id, store)}; once the judge is reachable, "
            f"`{resume_command(task_id, store)}` judges them again"
        )
        self.task_id = task_id


def _judge_if(condition: str | None) -> Callable[[DialogueRow], bool] | None:
    """``--judge-when`` as a predicate over a row (its metadata), or ``None``: every row."""
    if condition is None:
        return None
    from rubric_engine.scoring.judge_when import parse_judge_when

    matches = parse_judge_when(condition)
    return lambda row: matches(row.metadata)


def score(
    options: ScoreOptions, on_start: OnStart | None = None, on_row: OnRow | None = None
) -> ScoreResult:
    """Score a batch (or finish one, ``options.resume``) and write the report files.

    Runs :func:`score_async` on a new event loop. Inside a running loop (a notebook, an async
    app) call ``await score_async(options)`` instead: this function refuses rather than start
    a second loop in the same thread.

    Raises:
        ConfigurationError: called while an event loop is running in this thread; and every
            error of :func:`score_async`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(score_async(options, on_start, on_row))
    raise ConfigurationError(
        "score() was called inside a running event loop (a notebook or an async app); use "
        "`await score_async(options)` there instead"
    )


async def score_async(
    options: ScoreOptions, on_start: OnStart | None = None, on_row: OnRow | None = None
) -> ScoreResult:
    """Score a batch (or finish one, ``options.resume``) and write ``report.json``,
    ``report.md``, ``report.html`` and ``rows.jsonl``.

    Safe inside a running event loop; the judge calls run concurrently on it. The checks
    before the first call, the store and the report files are plain blocking I/O on the
    loop's thread (short, and the store's connection must stay on one thread).

    ``on_start(task_id, rows_to_judge)`` is called once the task exists; ``on_row`` after each
    row is stored. When a budget runs out, the rows judged so far are reported and
    ``ScoreResult.stopped`` says why (the task is STOPPED and can be resumed).

    Raises:
        InputError: a rubric, dataset or option problem (nothing is scored); LifecycleError
            when the rubric is a file without ``draft``, or a RETIRED or unknown version.
        CassetteError: a cassette file is malformed (replay).
        StoreError: the store cannot be opened; the task is running in another process.
        JudgeUnavailableError: the first rows all failed to reach the judge; the run stopped.
        asyncio.CancelledError / KeyboardInterrupt: passed on after the task is marked
            INTERRUPTED; finished rows stay.
    """
    check_options(options)
    if options.resume is not None:
        return await _resume(options, options.resume, on_start, on_row)
    task_id = new_task_id()
    plan = fresh_plan(options, task_id)
    with TaskStore(options.store) as store, task_lock(options.store, task_id):
        store.create_task(
            task_record(
                task_id,
                replace(options, out=plan.out),  # resume writes where this run writes
                plan.rubric,
                plan.template,
                plan.builder.system_text,
                plan.params,
                plan.inputs,
            )
        )
        return await _run(plan, store, task_id, frozenset(), on_start, on_row)


async def _resume(
    options: ScoreOptions, task_id: str, on_start: OnStart | None, on_row: OnRow | None
) -> ScoreResult:
    if not options.store.is_file():
        raise StoreError(f"{options.store}: no task store here; pass --store PATH")
    with TaskStore(options.store) as store, task_lock(options.store, task_id):
        plan, done = resumed_plan(options, store, task_id)
        return await _run(plan, store, task_id, done, on_start, on_row)


async def _run(
    plan: Plan,
    store: TaskStore,
    task_id: str,
    done: frozenset[str],
    on_start: OnStart | None,
    on_row: OnRow | None,
) -> ScoreResult:
    """Judge the rows not in ``done``, finish the task, build and write its report."""
    options = plan.options
    judge: Judge = (
        NoJudge()
        if plan.backend is None
        else InstructorJudge(
            plan.backend, plan.rubric, effective_model(options), plan.params, options.max_reasks
        )
    )
    budget = None
    if options.max_calls is not None or options.max_cost_usd is not None:
        budget = Budget(options.max_calls, options.max_cost_usd)
    total = plan.inputs.total
    if on_start is not None:
        on_start(task_id, total - len(done))
    misses: list[RowResult] = []

    def track(result: RowResult) -> None:
        if result.error is not None and result.error.kind is JudgeErrorKind.CASSETTE_MISS:
            misses.append(result)
        if on_row is not None:
            on_row(result)

    # a fresh run keeps what it stores for its report instead of reading every row back;
    # a resumed one has older rows in the store only, so it reads them all
    kept: list[tuple[int, ReportRow]] | None = None if done else []

    def keep(stored: StoredRow) -> None:
        if kept is not None:
            kept.append((stored.seq, report_row(stored)))

    try:
        await run_batch(
            plan.inputs.drain(),
            plan.builder,
            judge,
            store,
            task_id,
            options.concurrency,
            track,
            stop_after_failures=0 if options.mode == "replay" else 3,
            skip=done,
            budget=budget,
            on_stored=keep,
            judge_if=_judge_if(options.judge_when),
        )
    except JudgeUnavailable as stop:
        store.finish_task(task_id, TaskState.STOPPED, {"stopReason": "the judge was unreachable"})
        raise JudgeUnavailableError(
            task_id, stop.failed, total, stop.first_error, options.store
        ) from stop
    except BaseException:
        store.finish_task(task_id, TaskState.INTERRUPTED, {})
        raise
    stopped = budget.stop_reason if budget is not None else None
    state = TaskState.STOPPED if stopped else TaskState.COMPLETED
    store.finish_task(task_id, state, _extra(plan, store, task_id, stopped))
    if kept is None:
        task = load_task(store, task_id)  # read once for the report and its files
    else:
        kept.sort(key=lambda pair: pair[0])
        task = StoredTask(store.task(task_id), plan.rubric, [row for _, row in kept])
    report = report_from_task(task)
    files = write_reports(store, task_id, report, plan.out, task)
    return ScoreResult(task_id, report, files, misses, stopped)


def _extra(plan: Plan, store: TaskStore, task_id: str, stopped: str | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"stopReason": stopped}
    backend = plan.backend
    if isinstance(backend, ReplayBackend):
        kinds = map(backend.index.kind, store.cassette_keys(task_id))
        extra["cassettes"] = dict(sorted(Counter(k for k in kinds if k).items()))
    elif backend is not None:
        extra["concurrency"] = backend.limiter.stats()
    return extra
