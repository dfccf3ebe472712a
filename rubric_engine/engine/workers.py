"""Many workers on one task (docs/stores.md): ``score --workers-only`` queues, ``work`` judges.

``queue_task`` makes the plan ``score`` makes (:func:`~rubric_engine.engine.plan.fresh_plan`,
the same checks; the queueing machine's credentials are not needed), creates the task
(state QUEUED) and stores each input row as a work item; it judges nothing. ``work`` (run on
as many machines as wanted) rebuilds the task's judge from the task itself, as ``--resume``
does, and streams claimed rows through the ordinary pipeline (:func:`pipeline.run_batch`,
:class:`pipeline.RequestBuilder`): the only difference is where a finished row goes — through
:class:`FencedWriter` into :meth:`WorkQueue.complete`, which refuses the write of a worker that
lost its lease. The worker that stores the last row marks the task COMPLETED; anyone can then
build its report (``rubric-eval report TASK --store URL``).

Limits: ``--concurrency`` is per worker (each runs its own adaptive limiter, which backs off
on the provider's 429s by itself), so N workers make at most N × concurrency calls at once;
choose it as the provider limit divided by the number of workers. A shared limiter through the
store would add a database round trip to every call for little gain, so it is not done.
Budgets (``--max-calls``/``--max-cost``) are per task: recorded with the task and enforced at
each claim across all workers (:mod:`rubric_engine.store.work_budget`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.judge_when import judge_if_for
from rubric_engine.engine.options import (
    DEFAULTS,
    Mode,
    ScoreOptions,
    check_options,
    check_transport,
)
from rubric_engine.engine.pipeline import (
    CredentialsRefused,
    JudgeUnavailable,
    RequestBuilder,
    run_batch,
)
from rubric_engine.engine.plan import (
    build_judge,
    context_limit,
    fresh_plan,
    judge_backend,
    output_mode_of,
    stored_judge,
)
from rubric_engine.engine.run import replay_extra
from rubric_engine.engine.sampling import Sampling
from rubric_engine.engine.task import QUEUED_FOR_WORKERS, samples_of, task_record
from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError, StoreError
from rubric_engine.judge.backends import ReplayBackend
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.report.outcome import default_pass_score
from rubric_engine.results.model import JudgeErrorKind
from rubric_engine.store.digest import RowDigests
from rubric_engine.store.location import StoreLocation
from rubric_engine.store.task_ref import resolve_in_store
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import (
    StoredRow,
    StoredSample,
    TaskRecord,
    TaskStore,
    new_task_id,
    row_write,
)
from rubric_engine.store.work_budget import TaskBudget, allowance, spend, stop_reason
from rubric_engine.store.work_queue import Claim, WorkQueue, enqueue, need_postgres, work_stats


@dataclass(frozen=True)
class QueuedTask:
    task_id: str
    rows: int


def queue_task(options: ScoreOptions) -> QueuedTask:
    """``score --workers-only``: validate, create the task, queue its rows; judge nothing.

    Raises:
        ConfigurationError: ``--resume``, ``--judge none``, ``--mode record`` or ``batch`` with
            --workers-only; ``--max-cost`` in replay or for a model without a known price.
        StoreError: the store is not PostgreSQL.
        InputError, LifecycleError, CassetteError: as :func:`rubric_engine.engine.score`.
    """
    check_options(options)
    refused = [
        flag
        for flag, given in (
            ("--resume", options.resume is not None),
            ("--judge none", options.judge == "none"),
            ("--mode record", options.mode == "record"),
            ("--mode batch", options.mode == "batch"),
            ("a panel (--judge MODEL more than once)", bool(options.panel)),
        )
        if given
    ]
    if refused:
        raise ConfigurationError(
            f"--workers-only cannot be combined with {', '.join(refused)}: workers judge a new "
            "task's rows, live or from cassettes; drop them (record cassettes with one "
            "`score --mode record` run)"
        )
    with TaskStore(options.store) as store:
        need_postgres(store, "--workers-only")
        task_id = new_task_id()
        # the checks and the task record of `score`, judged elsewhere
        plan = fresh_plan(options, task_id, judged_here=False)
        record = task_record(
            task_id,
            replace(options, out=plan.out),
            plan.rubric,
            plan.template,
            plan.builder.system_text,
            plan.params,
            plan.inputs,
        )
        extra = {**record.extra, QUEUED_FOR_WORKERS: True}
        budget = TaskBudget(options.max_calls, options.max_cost_usd)
        if budget != TaskBudget():  # shared by every worker of the task, through the store
            extra["budget"] = budget.to_extra()
        store.create_task(replace(record, state=TaskState.QUEUED, extra=extra))
        rows = (
            (seq, row.row_id, row.model_dump(mode="json", by_alias=True))
            for seq, row in enumerate(plan.inputs.drain())
        )
        return QueuedTask(task_id, enqueue(store, task_id, rows))


@dataclass
class WorkSettings:
    """``rubric-eval work`` options; ``None`` takes what the task recorded."""

    concurrency: int = 8
    batch: int = 8  #: rows per claim
    lease_s: float = 30.0
    worker: str | None = None  #: default ``host:pid:xxxx``
    api_base: str | None = None
    api_key_env: str | None = None
    cassettes: Path | None = None
    timeout_s: float | None = None
    #: ``direct`` or ``litellm`` (``score --transport``); ``None``: ``$RUBRIC_EVAL_TRANSPORT``,
    #: else direct. Never stored: either sends the same requests.
    transport: str | None = None
    #: seconds to wait between looks at rows other workers hold, before their leases end
    poll_s: float = 1.0


@dataclass
class WorkSummary:
    task_id: str
    worker: str
    stored: int  #: rows this worker stored
    lost: int  #: rows it judged but another worker had taken over (its write was refused)
    completed: bool  #: the task is COMPLETED (by this worker or another)
    #: the task's state afterwards: COMPLETED, STOPPED (its budget is used up) or RUNNING
    state: str = "RUNNING"
    stop_reason: str | None = None
    claim_ms: list[float] = field(default_factory=list)  #: each claim's round trip


#: a row whose judge could not be reached is handed back this many times before its
#: TRANSPORT JUDGE_ERROR is stored as its result (the row's claim count, i.e. its token)
TRANSPORT_CLAIMS = 3


class WorkerJudgeUnavailable(RubricEvalError):
    """A worker's first rows all failed to reach the judge; it stopped and handed them back."""

    exit_code = ExitCode.NOTHING_SCORED


class WorkerCredentialsRefused(RubricEvalError):
    """The provider refused this worker's credentials (HTTP 401/403); it stopped at once and
    handed its rows back (another worker with working credentials can take them)."""

    exit_code = ExitCode.CREDENTIALS_REFUSED


class FencedWriter:
    """The pipeline's row sink for a worker: each row goes through the fenced write.

    A row that failed in transport (after the retry policy) is handed back for another try,
    unless it has been claimed :data:`TRANSPORT_CLAIMS` times: one worker with a wrong
    ``--api-base`` must not turn the whole task into JUDGE_ERROR rows.
    """

    def __init__(self, queue: WorkQueue, batch: int, digests: RowDigests | None = None) -> None:
        self.queue = queue
        self.batch = batch
        self.digests = digests
        self.held: dict[str, Claim] = {}
        self.stored = 0
        self.lost = 0
        self.handed_back = 0

    def rows(self) -> Iterator[DialogueRow]:
        """Claimed rows, claiming ``batch`` more whenever the pipeline wants the next one;
        ends when nothing is claimable right now."""
        while claims := self.queue.claim(self.batch):
            rows = [DialogueRow.model_validate(claim.dialogue) for claim in claims]
            # held from the claim on, so a stop hands back rows not yet given to the pipeline
            self.held.update((row.row_id, claim) for row, claim in zip(rows, claims, strict=True))
            yield from rows

    def add_row(self, task_id: str, row: StoredRow) -> None:
        claim = self.held.pop(row.result.row_id)
        error = row.result.error
        transport = error is not None and error.kind is JudgeErrorKind.TRANSPORT
        if transport and claim.token < TRANSPORT_CLAIMS:
            self.queue.release([claim])
            self.handed_back += 1
            return
        stored = replace(row, seq=claim.seq)  # the pipeline numbers the rows it was given
        if self.queue.complete(claim, *row_write(task_id, stored, self.digests)):
            self.stored += 1
        else:
            self.lost += 1

    def add_sample(self, task_id: str, sample: StoredSample) -> None:
        """A worker writes a row's samples with the row, in its fenced write."""

    def keep_answer(
        self, task_id: str, row_id: str, where: tuple[int, int, int], tries: list[Any]
    ) -> None:
        """A worker keeps no answers of a row in flight: a row it does not finish is claimed
        again whole (docs/stability.md "Batch mode and workers")."""

    def commit(self) -> None:
        """Each row is committed by its fenced write."""


def work(location: StoreLocation, task_id: str, settings: WorkSettings) -> WorkSummary:
    """Judge rows of a queued task until none is left; mark it COMPLETED when all are stored.

    Raises:
        StoreError: not a PostgreSQL store; the task was not queued for workers.
        TaskNotFoundError: no such task.
        ConfigurationError: the prompt template changed since the task was queued; the
            cassette folder or credentials are missing on this machine.
    """
    worker = settings.worker or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"
    with TaskStore(location) as store:
        need_postgres(store, "rubric-eval work")
        task_id = resolve_in_store(store, task_id)  # a name or tag:TAG: its newest task
        task = store.task(task_id)
        total = work_stats(store, task_id)["rows"]
        if total != task.row_count:
            raise StoreError(
                f"task {task_id} was not queued for workers ({total} of {task.row_count} rows "
                "are work items); queue one with `rubric-eval score … --workers-only`"
            )
        judge, builder, replay = _judge_for(task, location, settings)
        store.backend.execute(
            "UPDATE tasks SET state='RUNNING' WHERE id=? AND state='QUEUED'", (task_id,)
        )
        store.commit()
        budget = TaskBudget.from_extra(task.extra)
        queue = WorkQueue(store, task_id, worker, settings.lease_s, budget)
        writer = FencedWriter(queue, settings.batch, store.digests(task_id))

        # as in score's live runs: stop when the first rows all fail to reach the judge
        stop_after = 0 if replay is not None else 3
        # --judge-when recorded by `score --workers-only`: the same rows are judged as in score
        judge_if = judge_if_for((task.extra.get("run") or {}).get("judgeWhen"))
        # a row's samples are judged within its claim and written with it (docs/stability.md)
        samples, when = samples_of(task.extra)
        sampling = Sampling(
            samples, task.model, when=when, pass_score=default_pass_score(builder.rubric)
        )

        async def loop() -> None:
            while True:
                await run_batch(
                    writer.rows(), builder, judge, writer, task_id, settings.concurrency,
                    stop_after_failures=stop_after, judge_if=judge_if, sampling=sampling,
                )  # fmt: skip
                if queue.remaining() == 0 or queue.exhausted:
                    return
                await asyncio.sleep(settings.poll_s)  # other workers hold the rest

        try:
            with queue.heartbeat():
                asyncio.run(loop())
        except CredentialsRefused as refused:
            raise WorkerCredentialsRefused(
                f"worker {worker}: the provider refused the credentials (HTTP {refused.status}), "
                f"so no further row was sent ({refused}); it stopped and handed its rows back. "
                "Check the API key on this machine (--api-key-env or the provider's variable), "
                "then run `rubric-eval work` again"
            ) from refused
        except JudgeUnavailable as stop:
            raise WorkerJudgeUnavailable(
                f"worker {worker}: its first {stop.failed} row(s) all failed to reach the judge "
                f"({stop.first_error}); it stopped and handed its rows back. Check --api-base "
                "and the API key on this machine, then run `rubric-eval work` again"
            ) from stop
        finally:
            queue.release(writer.held.values())  # stopped early: hand back unjudged rows
        _finish(store, task_id, task.row_count, replay, budget)
        after = store.task(task_id)
    return WorkSummary(
        task_id,
        worker,
        writer.stored,
        writer.lost,
        completed=after.state == TaskState.COMPLETED,
        state=after.state,
        stop_reason=after.extra.get("stopReason"),
        claim_ms=queue.claim_ms,
    )


def _judge_for(
    task: TaskRecord, location: StoreLocation, settings: WorkSettings
) -> tuple[InstructorJudge, RequestBuilder, ReplayBackend | None]:
    """The task's judge on this machine, made as ``--resume`` makes it (the same checks, the
    task's output mode and prompt shape)."""
    rubric, template, params = stored_judge(
        task, "run workers with the rubric-eval version that queued it"
    )
    run = task.extra.get("run") or {}
    options = ScoreOptions(
        mode=cast(Mode, task.judge_mode),
        model=task.model,
        cassettes=settings.cassettes or Path(run.get("cassettes", "cassettes")),
        api_base=settings.api_base or run.get("apiBase"),
        api_key_env=settings.api_key_env or run.get("apiKeyEnv"),
        timeout_s=float(settings.timeout_s or run.get("timeoutS") or DEFAULTS.timeout_s),
        prompt_cache=run.get("promptCache", True) is not False,
        max_reasks=int(task.judge_params["maxReasks"]),
        output_mode=output_mode_of(task.judge_params),
        system_as_user=bool(task.judge_params.get("systemAsUser")),
        concurrency=settings.concurrency,
        store=location,
        transport=settings.transport,
    )
    check_transport(options)  # as score checks it, a replay task's worker too
    backend = judge_backend(options, rubric)
    limit = None if options.mode == "replay" else context_limit(options)
    assert options.output_mode is not None
    builder = RequestBuilder(rubric, template)
    judge = build_judge(
        backend, rubric, options, params, options.output_mode, limit, builder.asks_evidence
    )
    return (
        judge,
        builder,
        (backend if isinstance(backend, ReplayBackend) else None),
    )


def _finish(
    store: TaskStore,
    task_id: str,
    total: int,
    replay: ReplayBackend | None,
    budget: TaskBudget | None,
) -> None:
    """Mark the task COMPLETED once every row is stored, or STOPPED once its budget is used up
    and no live claim is left (whoever gets here first does it)."""
    with store.backend.exclusive(f"rubric-eval finish {task_id}"):
        stats = work_stats(store, task_id)
        state = store.task(task_id).state
        if state in (TaskState.COMPLETED, TaskState.STOPPED):
            return
        extra: dict[str, Any] = {"stopReason": None, "workers": stats}
        if replay is not None:
            extra |= replay_extra(replay, store, task_id)
        if stats["done"] >= total:
            store.finish_task(task_id, TaskState.COMPLETED, extra)
            return
        if budget is None:
            return
        spent = spend(store.connection, task_id)
        limit = allowance(budget, spent, 1)[1]
        if limit is None:  # within budget, or other workers still hold rows
            return
        reason = stop_reason(budget, spent, limit)
        store.finish_task(task_id, TaskState.STOPPED, {**extra, "stopReason": reason})
