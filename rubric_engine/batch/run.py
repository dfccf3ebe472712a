"""Batch mode's orchestrator: passes over the rows, batches between them (docs/batch.md).

A **pass** replays every unfinished row through the judge with the results its batches have
brought back (:class:`~rubric_engine.batch.backend.BatchBackend`): a row the judge finishes is
turned into its row result by the same function live mode uses and stored; a row that needs
another request (its first ask, a re-ask, an expired or errored one) yields a batch input line.
Lines go to a **sink** in files under the provider's request and byte limits: the provider
(:class:`ProviderSink`: upload, create, recorded in the ledger before and after each step) or
files for the user's own engine (:class:`FileSink`, ``batch export``). Between passes,
:meth:`BatchRun.settle` polls every open batch until it ends and stores its results.

A run killed at any point is resumed by the same loop: the ledger says which batches exist,
their results are in the store, and a request already in a batch is never planned again.

A sampled row (``score --samples K``, docs/stability.md) is judged one sample at a time in a
pass, each sample with requests of its own (the sample in their ``custom_id``): a sample the
judge finishes is stored as the row's sample at once and taken as stored on every later pass
(never asked again, not even a ``--batch-fallback live`` answer), and the row, their
aggregate, is stored once all its samples are in.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, BinaryIO, cast

from rubric_engine.batch.backend import BatchBackend, Slot
from rubric_engine.batch.client import BatchClient
from rubric_engine.batch.ledger import FINAL_STATUSES, Ledger, PlannedRequest, answered
from rubric_engine.batch.lines import LineResult, custom_id, read_output_line, request_line
from rubric_engine.batch.settings import MAX_BYTES, MAX_REQUESTS
from rubric_engine.batch.sinks import ProviderSink, Sink
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.pipeline import (
    CredentialsRefused,
    PreparedRow,
    RequestBuilder,
    refused_credentials,
    row_result,
    stored_row,
)
from rubric_engine.engine.sampling import (
    Sampling,
    aggregate_row,
    as_sample,
    reusable,
    sampled_row,
)
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.output_modes import OutputMode
from rubric_engine.judge.protocol import Judge, JudgeOutcome
from rubric_engine.results.model import RowResult
from rubric_engine.store.samples import StoredSample
from rubric_engine.store.task_store import StoredRow, TaskStore

Progress = Callable[[str], None]
#: a row's requests in the ledger: ``(attempt, result or None while waiting)``
Requests = list[tuple[int, dict[str, Any] | None]]
#: a request line to send: ``(custom_id, attempt, encoded line)``
Line = tuple[str, int, bytes]
#: output lines parsed and stored together (one statement's worth)
STORE_CHUNK = 1000


def _nonblank(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of each line that is not blank."""
    return ((n, raw) for n, raw in enumerate(lines, start=1) if raw.strip())


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    found = iter(items)
    while chunk := list(islice(found, size)):
        yield chunk


def batch_judge(
    backend: BatchBackend,
    builder: RequestBuilder,
    model: str,
    params: dict[str, Any],
    max_reasks: int,
    output_mode: str = "json",
    system_as_user: bool = False,
) -> InstructorJudge:
    """The judge of a batch run (``--mode batch``, ``batch export``) over ``backend``: the
    task's output mode and prompt shape (``system_as_user``), as a live run of the task
    would ask, with evidence turns when the builder's prompt asks for them."""
    return InstructorJudge(
        backend,
        builder.rubric,
        model,
        params,
        max_reasks,
        output_mode=cast(OutputMode, output_mode),
        system_as_user=system_as_user,
        evidence=builder.asks_evidence,
    )


@dataclass
class BatchLimits:
    """How big one batch may be, how often to poll, how much to spend.

    Attributes:
        max_requests / max_bytes: per input file (OpenAI: 50,000 and 200 MB).
        poll_interval_s: seconds between sweeps over the open batches.
        max_calls: ``--max-calls``: requests submitted (re-asks, retries included) plus live
            fallback calls, checked before each line joins a batch.
        max_cost_usd: ``--max-cost``: spent plus the estimated price of what is submitted.
    """

    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    poll_interval_s: float = 30.0
    max_calls: int | None = None
    max_cost_usd: float | None = None


def oversized_warning(oversized: Sequence[tuple[str, int]], max_bytes: int) -> str:
    """The warning for requests over the per-file byte limit (``(rowId, bytes)`` each)."""
    rows = ", ".join(row_id for row_id, _ in oversized[:5]) + (" …" if len(oversized) > 5 else "")
    largest = max(size for _, size in oversized)
    return (
        f"warning: {len(oversized)} request(s) are larger than the {max_bytes:,}-byte file limit "
        f"(largest {largest:,} bytes; row(s) {rows}); a request cannot be split, so each was "
        "written to a file of its own, which a provider holding that limit refuses: raise "
        "--batch-max-bytes"
    )


@dataclass
class BatchRun:
    """One task's batch run. ``rows`` gives ``(seq, row)`` in input order on every call."""

    rows: Callable[[], Iterator[tuple[int, DialogueRow]]]
    builder: RequestBuilder
    judge: Judge  #: the live judge, over ``backend``
    backend: BatchBackend
    store: TaskStore
    task_id: str
    limits: BatchLimits = field(default_factory=BatchLimits)
    client: BatchClient | None = None
    price: Callable[[int, int], float | None] | None = None  #: (prompt, completion tokens) → USD
    max_tokens: int = 1024
    concurrency: int = 8
    progress: Progress | None = None
    on_row: Callable[[RowResult], None] | None = None
    on_stored: Callable[[StoredRow], None] | None = None
    #: ``score --samples K`` (docs/stability.md): each judged row asked K times (``None`` or
    #: one sample: a single ask, whose requests and ids are a run's before samples existed)
    sampling: Sampling | None = None
    ledger: Ledger = field(init=False)
    stop_reason: str | None = None
    #: ``(rowId, bytes)`` of each request larger than ``limits.max_bytes``: written to a file
    #: of its own (it cannot be split), which a provider with that limit would refuse
    oversized: list[tuple[str, int]] = field(default_factory=list)
    _spent: float = 0.0
    _committed: int = 0
    _before_run: int = 0

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.store)
        # budgets count this run's requests, as live budgets count this run's calls
        self._before_run = self.ledger.planned_count(self.task_id)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Resume what the ledger holds, then pass and settle until no row needs a batch."""
        assert self.client is not None
        await self.reconcile()
        sink = ProviderSink(self, self.client)
        while True:
            await self.settle()
            submitted = await self.run_pass(sink)
            if not submitted:
                return

    async def reconcile(self) -> None:
        """Bring the ledger's unfinished jobs to SUBMITTED (or drop what never left)."""
        for job in self.ledger.jobs(self.task_id):
            if job.state == "PLANNED":
                self.ledger.drop(self.task_id, job.job_no)
            elif job.state in ("UPLOADED", "SUBMITTING"):
                assert job.input_file_id is not None
                await self.submit(job.job_no, job.input_file_id, adopt=job.state == "SUBMITTING")

    async def submit(self, job_no: int, file_id: str, adopt: bool) -> None:
        """Create the job's batch; after a crash mid-create, adopt the one that exists."""
        assert self.client is not None
        self.ledger.update(self.task_id, job_no, "SUBMITTING")
        found = await self.client.find(file_id) if adopt else None
        if found is None:
            metadata = {"rubric_eval_task": self.task_id, "rubric_eval_job": str(job_no)}
            found = await self.client.create(file_id, metadata)
        self.ledger.update(
            self.task_id,
            job_no,
            "SUBMITTED",
            batch_id=found.batch_id,
            provider_status=found.status,
            counts=found.counts,
        )
        self.say(f"batch {job_no} ({found.batch_id}): {found.status}, {found.counts['total']} req")

    async def settle(self) -> None:
        """Poll every open batch until all have ended and their results are stored."""
        assert self.client is not None
        while True:
            open_jobs = [
                j for j in self.ledger.jobs(self.task_id) if j.state in ("SUBMITTED", "ENDED")
            ]
            if not open_jobs:
                return
            for job in open_jobs:
                if job.state == "SUBMITTED":
                    assert job.batch_id is not None
                    status = await self.client.retrieve(job.batch_id)
                    if status.status != job.provider_status or status.counts != job.counts:
                        self.say(
                            f"batch {job.job_no} ({job.batch_id}): {status.status}, "
                            f"{status.counts['completed']}/{status.counts['total']} done, "
                            f"{status.counts['failed']} failed"
                        )
                    if status.status not in FINAL_STATUSES:
                        if status.status != job.provider_status or status.counts != job.counts:
                            self.ledger.update(
                                self.task_id,
                                job.job_no,
                                "SUBMITTED",
                                provider_status=status.status,
                                counts=status.counts,
                            )
                        continue
                    self.ledger.update(
                        self.task_id,
                        job.job_no,
                        "ENDED",
                        provider_status=status.status,
                        counts=status.counts,
                        output_file_id=status.output_file_id,
                        error_file_id=status.error_file_id,
                    )
                    failure = status.errors
                else:
                    failure = None
                await self.download(job.job_no, failure)
            if any(j.state == "SUBMITTED" for j in self.ledger.jobs(self.task_id)):
                await asyncio.sleep(self.limits.poll_interval_s)

    async def download(self, job_no: int, failure: str | None) -> None:
        """Read an ended job's output and error files into the ledger (``DOWNLOADED``)."""
        assert self.client is not None
        job = next(j for j in self.ledger.jobs(self.task_id) if j.job_no == job_no)
        lines: list[bytes] = []
        for file_id in (job.output_file_id, job.error_file_id):
            if file_id:
                lines.extend((await self.client.content(file_id)).splitlines())
        why = f"batch {job.provider_status}" + (f" ({failure})" if failure else "")
        self.store_results(job_no, lines, f"{why}: no result for this request", "DOWNLOADED")

    def store_results(self, job_no: int, lines: Iterable[bytes], missing: str, state: str) -> int:
        """Match output lines to the job's requests and store them, a chunk of lines at a
        time (a job's output runs to tens of thousands of answers); each planned request
        without a line gets the error ``missing``; returns lines used. Committed once, at
        the end, with the job's new ``state``."""
        planned = set(self.ledger.job_requests(self.task_id, job_no))
        used = set()
        try:
            for chunk in chunks(_nonblank(lines), STORE_CHUNK):
                results = []
                for n, raw in chunk:
                    got = read_output_line(json.loads(raw), f"batch {job_no} result line {n}")
                    if got.custom_id not in planned:
                        continue  # another task's or job's line; never matched by guess
                    results.append((got.custom_id, self.result_of(got)))
                    used.add(got.custom_id)
                self.ledger.set_results(self.task_id, results)
            self.ledger.close_job(self.task_id, job_no, missing, state)
        except BaseException:
            self.store.backend.rollback()  # none of the job's results, as before any was read
            raise
        self.store.commit()
        return len(used)

    def result_of(self, got: LineResult) -> dict[str, Any]:
        """What the ledger keeps of one output line: the response and its price, or the error
        (a reply may quote a credential: never stored, docs/security.md)."""
        from rubric_engine.judge.secrets import redact, scrub

        if got.response is None:
            return {"error": redact(got.error or "")}
        usage = got.response.get("usage") or {}
        cost = (
            self.price(
                int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            )
            if self.price
            else None
        )
        return {"response": scrub(got.response), "costUsd": cost}

    # -- a pass --------------------------------------------------------------------------------

    async def run_pass(self, sink: Sink | None) -> int:
        """Replay every unfinished row; store finished ones; send needed requests to ``sink``.

        Returns the number of requests sent (0: nothing left that a batch can answer); with
        ``sink=None`` nothing is planned or sent, and the count is of requests needed.

        The rows are read in input order beside the task's stored rows (read in seq order
        too, a page at a time), so a finished row is skipped without a set of every rowId;
        each other row's requests are read from the ledger as it comes.
        """
        self._committed = (
            self.ledger.planned_count(self.task_id) - self._before_run + self.backend.live_calls
        )
        round_no = 1 + max((j.round for j in self.ledger.jobs(self.task_id)), default=0)
        chunk: list[PlannedRequest] = []
        # a job's file is spooled to disk: 50,000 requests can be hundreds of MB
        data: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
        size = 0
        sent = 0
        oversized_before = len(self.oversized)

        async def flush() -> None:
            nonlocal chunk, size, sent
            if not chunk:
                return
            if sink is not None:
                job_no = self.ledger.plan(self.task_id, round_no, chunk, size)
                data.seek(0)
                await sink.flush(job_no, data)
            sent += len(chunk)
            chunk, size = [], 0
            data.seek(0)
            data.truncate()

        group: list[tuple[int, DialogueRow, Any]] = []
        sampled = self.sampling is not None and self.sampling.samples > 1

        async def judge_group() -> None:
            nonlocal size
            if sampled:
                kept = self.store.samples_of(self.task_id, [row.row_id for _, row, _ in group])
                found = await asyncio.gather(
                    *(
                        self._judge_sampled(seq, row, asked, kept.get(row.row_id, []))
                        for seq, row, asked in group
                    )
                )
            else:
                found = await asyncio.gather(
                    *(self._judge(seq, row, asked) for seq, row, asked in group)
                )
            for (_seq, row, _asked), lines in zip(group, found, strict=True):
                for cid, attempt, encoded in lines:
                    await add(row, cid, attempt, encoded)
            group.clear()

        async def add(row: DialogueRow, cid: str, attempt: int, encoded: bytes) -> None:
            nonlocal size
            if not self._affordable(encoded, len(chunk)):
                return
            if len(encoded) > self.limits.max_bytes:
                self.oversized.append((row.row_id, len(encoded)))
            if chunk and (
                len(chunk) >= self.limits.max_requests
                or size + len(encoded) > self.limits.max_bytes
            ):
                await flush()
            chunk.append(PlannedRequest(cid, row.row_id, attempt))
            data.write(encoded)
            size += len(encoded)

        try:
            for seq, row in self._unfinished():
                asked: Any
                if sampled:
                    asked = self.ledger.sample_requests(self.task_id, row.row_id)
                    waiting = any(r is None for own in asked.values() for _, r in own)
                else:
                    asked = self.ledger.row_requests(self.task_id, row.row_id)
                    waiting = any(result is None for _, result in asked)
                if waiting:
                    continue  # a request of the row awaits its batch
                group.append((seq, row, asked))
                if len(group) >= self.concurrency:
                    await judge_group()
            await judge_group()
            await flush()
        finally:
            data.close()
        if len(self.oversized) > oversized_before and sink is not None:
            self.say(oversized_warning(self.oversized[oversized_before:], self.limits.max_bytes))
        self.store.commit()
        return sent

    def _unfinished(self) -> Iterator[tuple[int, DialogueRow]]:
        """The rows (in input order) that have no stored result, found by walking the stored
        rows' seqs beside them."""
        stored = (seq for seq, _ in self.store.select_rows(self.task_id, ""))
        next_stored = next(stored, None)
        for seq, row in self.rows():
            while next_stored is not None and next_stored < seq:
                next_stored = next(stored, None)
            if next_stored != seq:
                yield seq, row

    async def _judge(self, seq: int, row: DialogueRow, asked: Requests) -> list[Line]:
        """One row's pass: store it when the judge finishes, else its next request line."""
        prepared = self.builder.prepare(seq, row)
        outcome, line = await self._ask(prepared, 1, asked)
        if outcome is None:
            return [line] if line is not None else []
        result = row_result(self.builder.compiled, prepared, outcome)
        self._store(stored_row(prepared, outcome, result), [outcome])
        return []

    async def _judge_sampled(
        self,
        seq: int,
        row: DialogueRow,
        asked: dict[int, Requests],
        kept: list[StoredSample],
    ) -> list[Line]:
        """One sampled row's pass (``score --samples K``, docs/stability.md "Batch mode"):
        each sample is a slot of its own, with its own requests (the sample in their
        ``custom_id``); a sample the judge finishes is stored at once and never asked again.
        With ``--samples-when unsure`` sample 2 waits for sample 1's answer and samples 3..K
        for the first two, as live decides; otherwise every sample is asked in the same batch.
        The row is stored, the aggregate of its samples, once every sample it asks is in (or
        one failed: no further one can change that it is that sample's error)."""
        sampling = self.sampling
        assert sampling is not None
        prepared = self.builder.prepare(seq, row)
        own = {s.sample: s for s in kept if s.judge == 1}
        slots: list[StoredSample | None] = []
        lines: list[Line] = []
        outcomes: list[JudgeOutcome] = []
        for number in range(1, sampling.samples + 1):
            if number > 1 and not self._asks_another(slots):
                break
            sample = own.get(number)
            if sample is None or not reusable(sample):
                outcome, line = await self._ask(prepared, number, asked.get(number, []))
                if outcome is None:
                    slots.append(None)
                    lines += [line] if line is not None else []
                    continue
                outcomes.append(outcome)
                one = stored_row(
                    prepared, outcome, row_result(self.builder.compiled, prepared, outcome)
                )
                sample = as_sample(one, number, sampling.model)
                self.store.add_sample(self.task_id, sample)
                sampling.extra += number > 1
            slots.append(sample)
        samples = _finished(slots)
        if samples is None:
            return lines
        result = aggregate_row(self.builder.compiled, prepared.case.all, samples)
        dialogue = prepared.row.model_dump(mode="json", by_alias=True)
        sampling.tally(samples)
        self._store(sampled_row(seq, dialogue, result, samples), outcomes)
        return []

    def _asks_another(self, slots: Sequence[StoredSample | None]) -> bool:
        """Whether a row whose samples so far are ``slots`` (``None``: awaiting a batch) asks
        the next: always up to K; adaptively, sample 2 and 3 once the ones before are in and
        :meth:`~rubric_engine.engine.sampling.Sampling.wanted` wants it, the rest with 3."""
        sampling = self.sampling
        assert sampling is not None
        if sampling.when == "always" or len(slots) >= 3:
            return True
        done = [s for s in slots if s is not None and reusable(s)]
        return len(done) == len(slots) and sampling.wanted(done)

    async def _ask(
        self, prepared: PreparedRow, sample: int, asked: Requests
    ) -> tuple[JudgeOutcome | None, Line | None]:
        """Judge one slot of a row from its batch results: ``(outcome, None)`` when the judge
        finishes, else ``(None, its next request line)`` (``None`` when that request is
        already in a job)."""
        backend, row_id = self.backend, prepared.row.row_id
        slot: Slot = (row_id, 1, sample)
        backend.results[slot] = answered(asked)
        try:
            request = prepared.request if sample == 1 else replace(prepared.request, sample=sample)
            outcome = await self.judge.judge(request)
            if not backend.unresolved(slot):
                return outcome, None
            pending = backend.pending.get(slot)
            if pending is None or any(a == pending.attempt for a, _ in asked):
                return None, None  # waiting, or already in a job
            cid = custom_id(prepared.seq, pending.attempt, row_id, self.task_id, sample)
            return None, (cid, pending.attempt, request_line(cid, pending.kwargs))
        finally:
            backend.results.pop(slot, None)
            backend.pending.pop(slot, None)
            backend.waiting.discard(slot)

    def _store(self, stored: StoredRow, outcomes: Sequence[JudgeOutcome]) -> None:
        """Store a finished row; a 401/403 of a ``--batch-fallback live`` call then stops the
        run (the row is kept, a TRANSPORT error judged again on resume)."""
        self.store.add_row(self.task_id, stored)
        if self.on_stored is not None:
            self.on_stored(stored)
        if self.on_row is not None:
            self.on_row(stored.result)
        for outcome in outcomes:
            refused = refused_credentials(outcome)
            if refused is not None and outcome.error is not None:
                raise CredentialsRefused(refused, outcome.error.message)

    def _affordable(self, line: bytes, queued: int) -> bool:
        """Budgets apply before submitting: would this line pass ``--max-calls``/``--max-cost``?"""
        limits = self.limits
        if self.stop_reason is not None:
            return False
        if limits.max_calls is not None and self._committed + queued + 1 > limits.max_calls:
            self.stop_reason = (
                f"--max-calls {limits.max_calls} reached ({self._committed + queued} request(s) "
                "submitted or planned)"
            )
            return False
        if limits.max_cost_usd is not None and self.price is not None:
            estimate = self.price(len(line) // 4, self.max_tokens) or 0.0
            if self._spent + estimate > limits.max_cost_usd:
                self.stop_reason = (
                    f"--max-cost {limits.max_cost_usd:g} USD reached ({self._spent:.4f} USD "
                    "submitted, priced at batch rates with max_tokens as the output bound)"
                )
                return False
            self._spent += estimate
        return True


def _finished(slots: Sequence[StoredSample | None]) -> list[StoredSample] | None:
    """A sampled row's samples once it is finished, else ``None``: every sample it asks is
    in, or one that failed has every sample before it in (the row is then that sample's
    error, docs/stability.md rule 1; the samples after it that are in stay with it)."""
    for found in slots:
        if found is None:
            return None
        if not reusable(found):
            break
    return [s for s in slots if s is not None]
