"""Batch results as a judge backend: the live parse → validate → re-ask path, fed by batches.

The judge (:class:`~rubric_engine.judge.instructor_judge.InstructorJudge`) asks its backend
for one answer per request and reads it with :func:`~rubric_engine.verdict.parse.parse_reply`.
This backend answers a row's requests, in order, from the results its batches brought back
(stored in the ledger), exactly as replay answers from a cassette. When the judge asks for a
request that has no result yet — the first ask, a re-ask of an invalid answer, a truncated
answer asked again with more room, a request whose batch expired or errored — the backend
notes that request as **pending** and the row's outcome of this pass is discarded; the
pending request goes into the next batch. So a row ends only as the live judge would end it
on the same answers: SCORED, or JUDGE_ERROR when re-asks (or transport attempts,
:attr:`~rubric_engine.judge.retry.RetryPolicy.max_attempts` per request) run out. Nothing is
ever scored from a bad answer.

A row's results are a list in attempt order, each a response or an error (an expired,
failed or errored batch line). The ``served``-th request of a row (``served`` = responses
the judge has had) starts right after the row's ``served``-th response. A sampled row
(``score --samples K``) has such a list per sample: everything here is kept by **slot**,
``(rowId, judge, sample)`` (:func:`slot_of`), and a single ask is the slot ``(rowId, 1, 1)``.

With ``fallback`` (``--batch-fallback live``), a request that its batch did not answer is
sent live at once instead of waiting for another batch, and so is every later request of
that row. With ``recorder``, each finished row is appended to a cassette under the live key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubric_engine.judge.backends import Answer, CallKey, LiveBackend, RecordBackend
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.results.model import JudgeErrorKind

#: the failure an unanswered request reports to the judge; the outcome is discarded
AWAITING = (JudgeErrorKind.TRANSPORT, "awaiting a batch result")

Result = dict[str, Any] | None
#: ``(rowId, judge, sample)``: one ask of a row, with its own requests and results
Slot = tuple[str, int, int]


def slot_of(request: JudgeRequest) -> Slot:
    """The slot a judge request asks for."""
    return (request.row_id, request.judge, request.sample)


@dataclass(frozen=True)
class Pending:
    """A request the next batch must carry: the slot's ``attempt``-th, with the judge's kwargs."""

    row_id: str
    attempt: int
    kwargs: dict[str, Any]


def _start(results: list[Result], served: int) -> tuple[int, int]:
    """(index after the row's ``served``-th response, responses found up to there)."""
    seen = 0
    for n, result in enumerate(results):
        if seen == served:
            return n, seen
        if result is not None and "response" in result:
            seen += 1
    return len(results), seen


class BatchBackend:
    """Serves stored batch results to the judge; see the module docstring.

    Args:
        results: slot (:data:`Slot`) → its results in attempt order, each ``{"response":
            {...}, "costUsd": x}`` or ``{"error": "..."}``; ``None`` marks a request still
            waiting. Set by the batch run for the rows of a pass.
        max_attempts: transport attempts per request (first try included).
        fallback: a live backend for requests no batch answered.
        recorder: writes each finished row's responses to a cassette (record mode).
    """

    def __init__(
        self,
        results: dict[Slot, list[Result]],
        max_attempts: int,
        fallback: LiveBackend | None = None,
        recorder: RecordBackend | None = None,
    ) -> None:
        self.results = results
        self.max_attempts = max_attempts
        self.fallback = fallback
        self.recorder = recorder
        self.pending: dict[Slot, Pending] = {}
        self.waiting: set[Slot] = set()
        self.live_calls = 0

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),  # batch results are never retried by status
    ) -> Answer:
        row_id, slot = request.row_id, slot_of(request)
        known = self.results.get(slot, [])
        position, found = _start(known, served)
        if found < served:  # the row's earlier answers came live (fallback): stay live
            return await self._live(kwargs, request, key, served, ())
        failed: list[Attempt] = []
        for result in known[position:]:
            if result is None:
                self.waiting.add(slot)
                return Answer(failure=AWAITING)
            if "response" in result:
                raw = result["response"]
                usage = raw.get("usage") or {}
                answered = Attempt(
                    response=raw,
                    prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0),
                    cost_usd=result.get("costUsd"),
                )
                return Answer(attempts=(*failed, answered))
            error = f"batch request failed: {result.get('error')}"
            failed.append(Attempt(response=None, error=error))
            if len(failed) >= self.max_attempts:
                return Answer(tuple(failed), (JudgeErrorKind.TRANSPORT, error))
        if failed and self.fallback is not None:
            return await self._live(kwargs, request, key, served, tuple(failed))
        self.pending[slot] = Pending(row_id, position + len(failed), kwargs)
        return Answer(failure=AWAITING)

    async def _live(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        failed: tuple[Attempt, ...],
    ) -> Answer:
        assert self.fallback is not None
        self.live_calls += 1
        answer = await self.fallback.complete(kwargs, request, key, served)
        return Answer((*failed, *answer.attempts), answer.failure)

    def unresolved(self, slot: Slot) -> bool:
        """True when the slot's outcome of this pass must be discarded (it awaits a batch)."""
        return slot in self.pending or slot in self.waiting

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        if self.recorder is not None and not self.unresolved(slot_of(request)):
            self.recorder.finish(request, key, outcome)
