"""The one orchestrator of ``score``: preflight → task → judge the rows → finish → report.

A fresh run and a resumed one differ only in how their :class:`Plan` is made (from the
options, or from the stored task); both then go through :func:`_run`. The rows themselves are
judged, normalized and stored by :func:`rubric_engine.engine.pipeline.run_batch`, which owns the
concurrency. :func:`score_async` is the implementation; :func:`score` runs it on a new event
loop for callers without one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_engine.engine.judge_when import judge_if_for
from rubric_engine.engine.options import (
    ScoreOptions,
    check_options,
    effective_model,
    effective_output_mode,
)
from rubric_engine.engine.pipeline import (
    BatchStepFailed,
    Budget,
    CredentialsRefused,
    JudgeUnavailable,
    NoJudge,
    run_batch,
)
from rubric_engine.engine.plan import AlreadyComplete, Plan, fresh_plan, resumed_plan
from rubric_engine.engine.sampling import Sampling
from rubric_engine.engine.task import report_command, resume_command, task_record
from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError, StoreError
from rubric_engine.judge.backends import LiveBackend, ReplayBackend
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.protocol import Judge
from rubric_engine.judge.server_checks import RubricNotDelivered
from rubric_engine.judge.stored_replies import KeptAnswers
from rubric_engine.report import ReportFiles, write_reports
from rubric_engine.report.accumulate import ReportAccumulator
from rubric_engine.report.model import Report
from rubric_engine.report.outcome import default_pass_score
from rubric_engine.report.scratch_tables import ScratchTables
from rubric_engine.report.stored import StreamedTask, add_stored, stream_report, streamed_task
from rubric_engine.results.model import JudgeErrorKind, RowResult
from rubric_engine.store.location import StoreLocation, store_exists
from rubric_engine.store.samples import HeldUsage
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import StoredRow, TaskStore, new_task_id

OnStart = Callable[[str, int], None]
OnRow = Callable[[RowResult], None]
#: batch mode's progress lines (each batch's state and counts)
OnEvent = Callable[[str], None]


@dataclass(repr=False)
class ScoreResult:
    """What a run produced.

    Attributes:
        task_id: the task in the store.
        report: the task's report (what ``report.json`` holds).
        files: where the report files were written.
        cassette_misses: replayed rows without a recorded answer (JUDGE_ERROR rows).
        stopped: why the run stopped before every row was judged (a budget ran out), else
            ``None``.
        already_complete: ``--resume`` of a task that was already complete: nothing was
            judged, its report files were (re)written.
        dropped_params: sampling parameters the provider rejected, with its message: they
            were not sent after the first rejection (the task's ``extra.droppedParams``).
        sampling_note: adaptive sampling's account of its extra calls (docs/stability.md).
    """

    task_id: str
    report: Report
    files: ReportFiles
    cassette_misses: list[RowResult] = field(default_factory=list)
    stopped: str | None = None
    already_complete: bool = False
    dropped_params: dict[str, str] = field(default_factory=dict)
    #: ``--samples-when unsure``: the unsure rows and the extra calls they cost
    sampling_note: str | None = None

    def __repr__(self) -> str:
        # short: asyncio.run (Python 3.11) formats the repr of its main task, result included,
        # when it restores the SIGINT handler; the report's every low-row id and every missed
        # row made a string of ~100 bytes per row (16 MB at 100k rows) at the end of a run
        return (
            f"ScoreResult(task_id={self.task_id!r}, rows={self.report.totals.rows}, "
            f"files={self.files!r}, cassette_misses={len(self.cassette_misses)}, "
            f"stopped={self.stopped!r}, already_complete={self.already_complete!r})"
        )


class ReportFilesError(ConfigurationError):
    """The rows are judged and stored, but the report files could not be written (exit 9,
    :attr:`ExitCode.REPORT_NOT_WRITTEN`: nothing to re-judge, only files to rebuild)."""

    exit_code = ExitCode.REPORT_NOT_WRITTEN


class JudgeUnavailableError(RubricEvalError):
    """The first rows all failed in transport; the run stopped instead of failing every row."""

    exit_code = ExitCode.NOTHING_SCORED

    def __init__(
        self,
        task_id: str,
        saved: int,
        total: int,
        first_error: str,
        store: StoreLocation,
        calls: int = 0,
        answered: int = 0,
    ) -> None:
        which = f"all {total} row(s)" if saved == total else f"the first {saved} of {total} row(s)"
        rest = "" if saved == total else ", so the rest were not tried"
        how = (
            f"failed in transport: the judge answered {answered} of their {calls} call(s), "
            "then stopped answering"
            if answered
            else "failed to reach the judge"
        )
        super().__init__(
            f"stopped task {task_id}: {which} {how}{rest}. First error: "
            f"{first_error}. Check --model, --api-base and the API key. The failed rows are "
            f"kept: {report_command(task_id, store)}; once the judge is reachable, "
            f"`{resume_command(task_id, store)}` judges them again"
        )
        self.task_id = task_id


class CredentialsRefusedError(RubricEvalError):
    """The provider refused the credentials (HTTP 401/403): the run stopped at once."""

    exit_code = ExitCode.CREDENTIALS_REFUSED

    def __init__(
        self,
        task_id: str,
        status: int,
        message: str,
        store: StoreLocation,
        report: Path | None = None,
    ) -> None:
        written = (
            f" The report of the rows scored before it is in {report.parent}."
            if report is not None
            else ""
        )
        super().__init__(
            f"stopped task {task_id}: the provider refused the credentials (HTTP {status}), "
            f"so no further row was started (the calls in flight were answered and kept). "
            f"{message}.{written} Check the API key (--api-key-env or the provider's usual "
            f"variable) and --api-base; the rows without a result are judged by "
            f"`{resume_command(task_id, store)}`"
        )
        self.task_id = task_id


class BatchApiError(RubricEvalError):
    """A step of the provider's batch API failed for good (``--mode batch``); the task is
    STOPPED and resumable."""

    exit_code = ExitCode.NOTHING_SCORED

    def __init__(self, task_id: str, failed: BatchStepFailed, store: StoreLocation) -> None:
        super().__init__(
            f"stopped task {task_id}: the provider's batch API failed at its {failed.step} "
            f"step after the retries: {failed.message}. Rows already answered are kept "
            f"({report_command(task_id, store)}); once the batch API answers, "
            f"`{resume_command(task_id, store)}` goes on (batches already sent are adopted, "
            "never sent twice)"
        )
        self.task_id = task_id


class RubricNotDeliveredError(RubricEvalError):
    """The server's prompt-token counts show the rubric (system message) never reached it."""

    exit_code = ExitCode.NOTHING_SCORED

    def __init__(self, task_id: str, reason: str, store: StoreLocation) -> None:
        super().__init__(
            f"stopped task {task_id}: {reason}. Rows that finished before the stop, if any, "
            f"are kept ({report_command(task_id, store)}) but were judged without the rubric: "
            "score the inputs again rather than resume this task"
        )
        self.task_id = task_id


def score(
    options: ScoreOptions,
    on_start: OnStart | None = None,
    on_row: OnRow | None = None,
    on_event: OnEvent | None = None,
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
        try:
            return asyncio.run(_interruptible(score_async(options, on_start, on_row, on_event)))
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
    raise ConfigurationError(
        "score() was called inside a running event loop (a notebook or an async app); use "
        "`await score_async(options)` there instead"
    )


async def _interruptible(run: Awaitable[ScoreResult]) -> ScoreResult:
    """``run``, where a Ctrl-C raised inside a synchronous step (a second one during a long
    rule check) ends the run as a cancellation does: the task is marked INTERRUPTED either
    way, and asyncio has no task exception left to log ("Task exception was never
    retrieved", with a traceback) after the interrupt message."""
    try:
        return await run
    except KeyboardInterrupt:
        raise asyncio.CancelledError from None


async def score_async(
    options: ScoreOptions,
    on_start: OnStart | None = None,
    on_row: OnRow | None = None,
    on_event: OnEvent | None = None,
) -> ScoreResult:
    """Score a batch (or finish one, ``options.resume``) and write ``report.json``,
    ``report.md``, ``report.html`` and ``rows.jsonl``.

    Safe inside a running event loop; the judge calls run concurrently on it. The checks
    before the first call, the store and the report files are plain blocking I/O on the
    loop's thread (short, and the store's connection must stay on one thread).

    ``on_start(task_id, rows_to_judge)`` is called once the task exists; ``on_row`` after each
    row is stored; ``on_event`` with each batch's state and counts (``--mode batch``). When a
    budget runs out, the rows judged so far are reported and
    ``ScoreResult.stopped`` says why (the task is STOPPED and can be resumed).

    Raises:
        InputError: a rubric, dataset or option problem (nothing is scored); LifecycleError
            when the rubric is a file without ``draft``, or a RETIRED or unknown version.
        CassetteError: a cassette file is malformed (replay).
        StoreError: the store cannot be opened; the task is running in another process.
        JudgeUnavailableError: the first rows all failed to reach the judge; the run stopped.
        CredentialsRefusedError: a call was answered with HTTP 401/403; the run stopped at
            once (the task is STOPPED and resumable).
        asyncio.CancelledError / KeyboardInterrupt: passed on after the task is marked
            INTERRUPTED; finished rows stay.
    """
    check_options(options)
    if options.resume is not None:
        return await _resume(options, options.resume, on_start, on_row, on_event)
    task_id = new_task_id()
    plan = fresh_plan(options, task_id)
    with TaskStore(options.store) as store, store.task_lock(task_id):
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
        return await _run(plan, store, task_id, frozenset(), on_start, on_row, on_event)


async def _resume(
    options: ScoreOptions,
    task_id: str,
    on_start: OnStart | None,
    on_row: OnRow | None,
    on_event: OnEvent | None = None,
) -> ScoreResult:
    from rubric_engine.store.task_ref import resolve_in_store

    if not store_exists(options.store):
        raise StoreError(f"{options.store}: no task store here; pass --store PATH")
    with TaskStore(options.store) as store:
        task_id = resolve_in_store(store, task_id)  # a name or tag:TAG: its newest task
        with store.task_lock(task_id):
            try:
                plan, done = resumed_plan(options, store, task_id)
            except AlreadyComplete as complete:
                task = stream_report(store, task_id)
                files = _write_files(store, task_id, task.report, complete.out, task, options.store)
                return ScoreResult(task_id, task.report, files, already_complete=True)
            return await _run(plan, store, task_id, done, on_start, on_row, on_event)


def _write_files(
    store: TaskStore,
    task_id: str,
    report: Report,
    out: Path,
    task: StreamedTask,
    at: StoreLocation,
) -> ReportFiles:
    """:func:`write_reports`, and when that fails after the rows were judged, an error that
    keeps the task id and says how to rebuild the files."""
    try:
        return write_reports(store, task_id, report, out, task)
    except (OSError, ConfigurationError) as exc:
        reason = exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)
        raise ReportFilesError(
            f"task {task_id} is stored, but its report files could not be written to {out} "
            f"({reason}). Nothing is lost: `{report_command(task_id, at)} --out DIR` writes "
            "them from the store"
        ) from exc


async def _run(
    plan: Plan,
    store: TaskStore,
    task_id: str,
    done: frozenset[str],
    on_start: OnStart | None,
    on_row: OnRow | None,
    on_event: OnEvent | None = None,
) -> ScoreResult:
    """Judge the rows not in ``done``, finish the task, build and write its report."""
    options = plan.options
    judges = [] if plan.backend is None else plan.judges(_keeping(plan, store, task_id))
    judge: Judge = judges[0][0] if judges else NoJudge()
    budget = None
    if options.max_calls is not None or options.max_cost_usd is not None:
        budget = Budget(options.max_calls, options.max_cost_usd)
        if isinstance(plan.backend, LiveBackend | ReplayBackend):
            plan.backend.budget = budget  # asked before every call, re-asks and retries too
    total = plan.inputs.total
    if on_start is not None:
        on_start(task_id, total - len(done))
    misses: list[RowResult] = []

    def track(result: RowResult) -> None:
        if result.error is not None and result.error.kind is JudgeErrorKind.CASSETTE_MISS:
            misses.append(result)
        if on_row is not None:
            on_row(result)

    # a fresh run adds each row it stores to its report (a stream: counters and bounded
    # heaps, no row list) instead of reading every row back; a resumed one has older rows in
    # the store only, so it streams them all from the store at the end
    kept = None if done else ReportAccumulator(plan.rubric, storage=ScratchTables())

    stored_calls = [0]  # calls of the rows this run stored
    stored_usage = [0, 0, 0.0]  # their prompt and completion tokens and cost
    # answers an earlier run left for rows it did not store: this run puts them into rows
    # without asking again, so they are not this run's calls lost (docs/stability.md "Resume")
    held_before = store.held_usage(task_id) if options.resume is not None else None
    held: list[HeldUsage] = []

    def held_now() -> HeldUsage:
        """What the task holds for its rows not stored, at the end of this run (read once)."""
        if not held:
            held.append(store.held_usage(task_id))
        return held[0]

    def keep(stored: StoredRow) -> None:
        stored_calls[0] += stored.calls
        stored_usage[0] += stored.prompt_tokens
        stored_usage[1] += stored.completion_tokens
        stored_usage[2] += stored.cost_usd or 0.0
        if kept is not None:
            add_stored(kept, stored)

    def counted() -> dict[str, Any]:
        """What the task records of this run's calls beyond its rows: the reasoning tokens
        of every answered call, and the usage of the answered calls of rows cut off before
        they were stored (added to what earlier runs of the task recorded)."""
        backend = plan.backend
        if not isinstance(backend, LiveBackend | ReplayBackend):
            return {}
        before = store.task(task_id).extra
        out: dict[str, Any] = {}
        reasoning = int(before.get("reasoningTokens") or 0) + backend.tally.reasoning_tokens
        if reasoning:
            out["reasoningTokens"] = reasoning
        tally = backend.tally
        # every answered call is in a stored row, held for a row not stored yet, or lost
        start, now = held_before or HeldUsage(), held_now()
        lost = {
            "promptTokens": tally.prompt_tokens
            + start.prompt_tokens
            - stored_usage[0]
            - now.prompt_tokens,
            "completionTokens": tally.completion_tokens
            + start.completion_tokens
            - stored_usage[1]
            - now.completion_tokens,
            "costUsd": round(tally.cost_usd + start.cost_usd - stored_usage[2] - now.cost_usd, 10),
        }
        if any(v > 0 for v in lost.values()):
            old = before.get("usageNotInRows") or {}
            out["usageNotInRows"] = {k: v + (old.get(k) or 0) for k, v in lost.items()}
        if now != HeldUsage() or before.get("usageHeld"):
            out["usageHeld"] = now.to_json()  # replaced by each run: what is held now
        return out

    def cut_off() -> dict[str, Any]:
        """What a run that stopped early records: the judge's settings learned on the way
        (:func:`judge_record`) and ``callsNotInRows``, requests sent for rows that were never
        stored, added up."""
        learned = {**judge_record(plan, judge), **counted()}
        lost = 0
        if isinstance(plan.backend, LiveBackend):
            start = held_before or HeldUsage()
            lost = plan.backend.sent + start.calls - stored_calls[0] - held_now().calls
        if lost <= 0:
            return learned
        before = int(store.task(task_id).extra.get("callsNotInRows") or 0)
        return {**learned, "callsNotInRows": before + lost}

    sampling = Sampling(
        options.samples,
        judges[0][1] if options.panel else options.model,
        store.unfinished_samples(task_id, done)
        # batch mode reads a pass's stored samples a group of rows at a time
        if (options.samples > 1 or options.panel)
        and options.resume is not None
        and options.mode != "batch"
        else {},
        when=options.samples_when,
        pass_score=default_pass_score(plan.rubric),
        panel=judges[1:],
    )
    try:
        if options.mode == "batch":
            stopped, extra = await _in_batches(
                plan, store, task_id, track, keep, on_event, sampling
            )
            state = TaskState.STOPPED if stopped else TaskState.COMPLETED
            store.finish_task(task_id, state, {"stopReason": stopped, "batch": extra})
            batched = _report(plan, store, task_id, kept, misses, stopped)
            batched.sampling_note = sampling.note()
            return batched
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
            judge_if=judge_if_for(options.judge_when),
            sampling=sampling,
        )
    except RubricNotDelivered as stop:
        store.finish_task(
            task_id,
            TaskState.STOPPED,
            {"stopReason": "the rubric did not reach the judge", **cut_off()},
        )
        raise RubricNotDeliveredError(task_id, str(stop), options.store) from stop
    except JudgeUnavailable as stop:
        store.finish_task(
            task_id, TaskState.STOPPED, {"stopReason": "the judge was unreachable", **cut_off()}
        )
        raise JudgeUnavailableError(
            task_id, stop.failed, total, stop.first_error, options.store, stop.calls, stop.answered
        ) from stop
    except BatchStepFailed as failed:
        store.finish_task(
            task_id,
            TaskState.STOPPED,
            {"stopReason": f"the batch API failed ({failed.step})", **cut_off()},
        )
        raise BatchApiError(task_id, failed, options.store) from None
    except CredentialsRefused as refused:
        store.finish_task(
            task_id,
            TaskState.STOPPED,
            {"stopReason": "the provider refused the credentials", **cut_off()},
        )
        try:  # the rows scored before the refusal have their report
            written: Path | None = _report(plan, store, task_id, kept, misses, None).files.json
        except ReportFilesError:
            written = None
        raise CredentialsRefusedError(
            task_id, refused.status, refused.message, options.store, written
        ) from refused
    except StoreError as exc:  # the store cannot be written (a full disk): no state can be saved
        with contextlib.suppress(StoreError):
            store.finish_task(task_id, TaskState.INTERRUPTED, cut_off())
        raise StoreError(
            f"{exc}. Task {task_id} keeps every row committed before; once the store can be "
            f"written again, `{resume_command(task_id, options.store)}` finishes it"
        ) from exc
    except BaseException:
        store.finish_task(task_id, TaskState.INTERRUPTED, cut_off())
        raise
    stopped = budget.stop_reason if budget is not None else None
    state = TaskState.STOPPED if stopped else TaskState.COMPLETED
    store.finish_task(task_id, state, {**_extra(plan, store, task_id, stopped, judge), **counted()})
    result = _report(plan, store, task_id, kept, misses, stopped)
    result.sampling_note = sampling.note()
    return result


async def _in_batches(
    plan: Plan,
    store: TaskStore,
    task_id: str,
    track: OnRow,
    keep: Callable[[StoredRow], None],
    on_event: OnEvent | None,
    sampling: Sampling,
) -> tuple[str | None, dict[str, Any]]:
    """``--mode batch``: the same rows, requests and row results, through provider batches."""
    from rubric_engine.batch.mode import run_in_batches

    options = plan.options
    assert isinstance(plan.backend, LiveBackend)
    outcome = await run_in_batches(
        lambda: enumerate(plan.inputs.stream()),
        plan.builder,
        plan.backend,
        effective_model(options),
        plan.params,
        options.max_reasks,
        options.batch,
        store,
        task_id,
        max_calls=options.max_calls,
        max_cost_usd=options.max_cost_usd,
        concurrency=options.concurrency,
        progress=on_event,
        on_row=track,
        on_stored=keep,
        output_mode=effective_output_mode(options),
        system_as_user=options.system_as_user,
        sampling=sampling,
    )
    return outcome.stop_reason, outcome.summary


def _keeping(plan: Plan, store: TaskStore, task_id: str) -> KeptAnswers | None:
    """Live and record calls: every answered call of a row in flight is kept in the store
    until the row is, and a resumed run is given those answers again before it asks the
    provider (docs/stability.md "Resume"). A replay keeps none (a cassette answer is free)."""
    if not isinstance(plan.backend, LiveBackend):
        return None
    earlier = store.kept_answers(task_id) if plan.options.resume is not None else {}
    return KeptAnswers(plan.backend, store, task_id, earlier)


def _report(
    plan: Plan,
    store: TaskStore,
    task_id: str,
    kept: ReportAccumulator | None,
    misses: list[RowResult],
    stopped: str | None,
) -> ScoreResult:
    if kept is None:
        task = stream_report(store, task_id)  # one pass over the stored rows
    else:
        task = streamed_task(store.task(task_id), plan.rubric, kept)
    report = task.report
    files = _write_files(store, task_id, report, plan.out, task, plan.options.store)
    dropped = dict(plan.backend.dropped) if isinstance(plan.backend, LiveBackend) else {}
    return ScoreResult(task_id, report, files, misses, stopped, dropped_params=dropped)


def _extra(
    plan: Plan, store: TaskStore, task_id: str, stopped: str | None, judge: Judge
) -> dict[str, Any]:
    extra: dict[str, Any] = {"stopReason": stopped, **judge_record(plan, judge)}
    backend = plan.backend
    if isinstance(backend, ReplayBackend):
        extra |= replay_extra(backend, store, task_id)
    elif backend is not None:
        extra["concurrency"] = backend.limiter.stats()
    return extra


def judge_record(plan: Plan, judge: Judge) -> dict[str, Any]:
    """What the run learned about its judge, recorded on the task however the run ends: the
    schema form used (``outputForm``, and one refused) and the sampling parameters the
    provider rejected (``droppedParams``: what was sent differs from the task's judge
    parameters)."""
    out: dict[str, Any] = {}
    if isinstance(judge, InstructorJudge) and judge.output_mode != "json":
        out["outputForm"] = judge.form_record
    if isinstance(plan.backend, LiveBackend) and plan.backend.dropped:
        out["droppedParams"] = dict(sorted(plan.backend.dropped.items()))
    return out


def replay_extra(backend: ReplayBackend, store: TaskStore, task_id: str) -> dict[str, Any]:
    """What a replayed task records about its answers: how many answers each kind of cassette
    entry gave (``cassettes``: every sample of every judge), where the rows' answers came from
    (``answerSources``, by rows) and that the
    latency is the recorded one, not measured (``latency``). Shared by
    ``score`` and the workers of :mod:`rubric_engine.engine.workers`, so their reports agree."""
    counted = backend.index.provenance_rows(store.cassette_keys(task_id))  # one pass
    # the entries of every answer: K a row when sampled, one a judge of a panel
    answers = store.answer_cassette_keys(task_id)
    kinds: Counter[str] = Counter()
    for prov, n in counted if answers is None else backend.index.provenance_rows(answers):
        if kind := str(prov["kind"]):
            kinds[kind] += n
    return {
        "cassettes": dict(sorted(kinds.items())),
        "answerSources": _answer_sources(counted),
        "latency": "recorded",  # replayed latency is the one recorded, not measured
    }


def answer_sources(backend: ReplayBackend, keys: Iterable[str | None]) -> list[dict[str, Any]]:
    """Where a replay's answers came from (docs/judges.md provenance), for the report's header.

    One entry per distinct provenance among the rows' cassette entries, most rows first:
    ``{"kind": "authored", "by": author, "method": method, "rows": n}`` or
    ``{"kind": "recorded", "by": "provider/model", "at": recordedAt, "rows": n}``.
    """
    return _answer_sources(backend.index.provenance_rows(keys))


def _answer_sources(counted: Iterable[tuple[dict[str, Any], int]]) -> list[dict[str, Any]]:
    """:func:`answer_sources` of
    :meth:`~rubric_engine.judge.cassettes.index.CassetteIndex.provenance_rows`
    (provenances in the order they first answer a row, so ties keep that order)."""
    seen: Counter[tuple[tuple[str, str], ...]] = Counter()
    for prov, rows in counted:
        if prov.get("kind") == "recorded":
            source = {
                "kind": "recorded",
                "by": f"{prov.get('provider')}/{prov.get('model')}",
                "at": str(prov.get("recordedAt") or ""),
            }
        else:
            source = {
                "kind": str(prov.get("kind")),
                "by": str(prov.get("author") or ""),
                "method": str(prov.get("method") or ""),
            }
        seen[tuple(source.items())] += rows
    return [{**dict(items), "rows": n} for items, n in seen.most_common()]
