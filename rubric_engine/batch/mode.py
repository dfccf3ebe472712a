"""``score --mode batch``: the wiring between the score orchestrator and a batch run.

The orchestrator (``rubric_engine.engine``) checks everything and creates (or reopens) the
task as for a live run; then, instead of judging rows concurrently, it calls
:func:`run_in_batches`, which builds the batch backend around the live judge and runs the
pass/settle loop of :class:`~rubric_engine.batch.run.BatchRun` until every row has a result
(or a budget stops it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rubric_engine.batch.backend import BatchBackend
from rubric_engine.batch.client import BatchClient
from rubric_engine.batch.ledger import Ledger
from rubric_engine.batch.pricing import pricer
from rubric_engine.batch.run import BatchLimits, BatchRun, batch_judge
from rubric_engine.batch.settings import BatchSettings
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.engine.sampling import Sampling
from rubric_engine.judge.backends import LiveBackend, RecordBackend
from rubric_engine.results.model import RowResult
from rubric_engine.store.commit_timer import committing
from rubric_engine.store.task_store import StoredRow, TaskStore


@dataclass
class BatchOutcome:
    """What the task records about its batches (``extra.batch``)."""

    stop_reason: str | None
    summary: dict[str, Any]


async def run_in_batches(
    rows: Callable[[], Iterator[tuple[int, DialogueRow]]],
    builder: RequestBuilder,
    live: LiveBackend,
    model: str,
    params: dict[str, Any],
    max_reasks: int,
    settings: BatchSettings,
    store: TaskStore,
    task_id: str,
    max_calls: int | None = None,
    max_cost_usd: float | None = None,
    concurrency: int = 8,
    progress: Callable[[str], None] | None = None,
    on_row: Callable[[RowResult], None] | None = None,
    on_stored: Callable[[StoredRow], None] | None = None,
    output_mode: str = "json",
    system_as_user: bool = False,
    sampling: Sampling | None = None,
) -> BatchOutcome:
    """Judge the task's unfinished rows through the provider's batch API.

    ``live`` is the live backend the run would otherwise use: its settings reach the batch
    endpoints, it answers ``--batch-fallback live`` requests, and, when it is a
    :class:`RecordBackend`, finished rows are written to its cassette. ``output_mode`` and
    ``system_as_user`` are the task's (``--output-mode``, ``--system-as-user``): each line
    asks what a live call of the task would. ``sampling`` (``--samples K``): each row's
    samples are requests of their own, the row their aggregate (docs/stability.md).
    """
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    recorder = live if settings.record and isinstance(live, RecordBackend) else None
    backend = BatchBackend(
        {},
        max_attempts=live.settings.retry.max_attempts,
        fallback=live if settings.fallback == "live" else None,
        recorder=recorder,
    )
    price, basis = pricer(model)
    run = BatchRun(
        rows=rows,
        builder=builder,
        judge=batch_judge(backend, builder, model, params, max_reasks, output_mode, system_as_user),
        backend=backend,
        store=store,
        task_id=task_id,
        limits=BatchLimits(
            max_requests=settings.max_requests,
            max_bytes=settings.max_bytes,
            poll_interval_s=settings.poll_interval_s,
            max_calls=max_calls,
            max_cost_usd=max_cost_usd,
        ),
        client=BatchClient(provider, live.settings),
        price=price,
        max_tokens=int(params.get("max_tokens") or 1024),
        concurrency=concurrency,
        progress=progress,
        on_row=on_row,
        on_stored=on_stored,
        sampling=sampling,
    )
    async with committing(store):  # rows stored while batches are polled stay durable
        await run.run()
    return BatchOutcome(run.stop_reason, summary(run.ledger, task_id, basis, backend, run))


def summary(
    ledger: Ledger, task_id: str, basis: str, backend: BatchBackend, run: BatchRun
) -> dict[str, Any]:
    jobs = ledger.jobs(task_id)
    statuses: dict[str, int] = {}
    for job in jobs:
        key = job.provider_status or job.state
        statuses[key] = statuses.get(key, 0) + 1
    return {
        "jobs": len(jobs),
        "requests": sum(j.request_count for j in jobs),
        "rounds": max((j.round for j in jobs), default=0),
        "statuses": dict(sorted(statuses.items())),
        "costBasis": basis,
        "liveFallbackCalls": backend.live_calls,
        "apiCalls": run.client.calls if run.client else 0,
    }
