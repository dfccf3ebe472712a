"""Batch results as a judge backend: the live parse → validate → re-ask path, fed by batches.

The judge (:class:`~rubric_engine.judge.instructor_judge.InstructorJudge`) asks its backend
for one response per request. This backend answers a row's requests, in order, from the
results its batches brought back (stored in the ledger), exactly as replay answers from a
cassette. When the judge asks for a request that has no result yet — the first ask, a re-ask
of an invalid answer, a truncated answer asked again with more room, a request whose batch
expired or errored — the backend notes that request as **pending** and the row's outcome of
this pass is discarded; the pending request goes into the next batch. So a row ends only as
the live judge would end it on the same answers: SCORED, or JUDGE_ERROR when re-asks (or
transport attempts, :class:`~rubric_engine.judge.retry.RetryPolicy.max_attempts` per
request) run out. Nothing is ever scored from a bad answer.

With ``fallback`` (``--batch-fallback live``), a request that its batch did not answer
(expired, failed, errored) is sent live at once instead of waiting for another batch.
With ``recorder``, each finished row is appended to a cassette under the live key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubric_engine.judge.backends import CallContext, LiveBackend, RecordBackend, chat_completion
from rubric_engine.judge.protocol import Attempt, JudgeOutcome


class AwaitingBatch(Exception):
    """The judge asked for a response no batch has brought back yet (a pending request)."""


class BatchRequestFailed(Exception):
    """A request failed in every batch it was sent in (the transport attempts ran out)."""


@dataclass(frozen=True)
class Pending:
    """A request the next batch must carry: the row's ``attempt``-th, with the judge's kwargs."""

    row_id: str
    attempt: int
    kwargs: dict[str, Any]


class BatchBackend:
    """Serves stored batch results to the judge; see the module docstring.

    Args:
        results: rowId → that row's results in attempt order, each ``{"response": {...},
            "costUsd": x}`` or ``{"error": "..."}``; ``None`` marks a request still waiting.
        max_attempts: transport attempts per request (first try included).
        fallback: a live backend for requests no batch answered.
        recorder: writes each finished row's responses to a cassette (record mode).
    """

    def __init__(
        self,
        results: dict[str, list[dict[str, Any] | None]],
        max_attempts: int,
        fallback: LiveBackend | None = None,
        recorder: RecordBackend | None = None,
    ) -> None:
        self.results = results
        self.max_attempts = max_attempts
        self.fallback = fallback
        self.recorder = recorder
        self.pending: dict[str, Pending] = {}
        self.waiting: set[str] = set()
        self._live: set[int] = set()  # calls that went live: later requests go live too
        self.live_calls = 0

    async def complete(self, kwargs: dict[str, Any], call: CallContext) -> Any:
        call.keyed(kwargs)
        row_id = call.request.row_id
        if id(call) in self._live:
            return await self._go_live(kwargs, call)
        known = self.results.get(row_id, [])
        failures: list[str] = []
        while len(call.attempts) < len(known):
            result = known[len(call.attempts)]
            if result is None:
                self.waiting.add(row_id)
                raise AwaitingBatch(row_id)
            if "response" in result:
                raw = result["response"]
                usage = raw.get("usage") or {}
                call.responses.append(raw)
                call.attempts.append(
                    Attempt(
                        response=raw,
                        prompt_tokens=int(usage.get("prompt_tokens") or 0),
                        completion_tokens=int(usage.get("completion_tokens") or 0),
                        cost_usd=result.get("costUsd"),
                    )
                )
                return chat_completion(raw)
            error = f"batch request failed: {result.get('error')}"
            call.attempts.append(Attempt(response=None, error=error))
            failures.append(error)
            if len(failures) >= self.max_attempts:
                raise BatchRequestFailed(error)
        if failures and self.fallback is not None:
            self._live.add(id(call))
            return await self._go_live(kwargs, call)
        self.pending[row_id] = Pending(row_id, len(call.attempts), kwargs)
        raise AwaitingBatch(row_id)

    async def _go_live(self, kwargs: dict[str, Any], call: CallContext) -> Any:
        assert self.fallback is not None
        self.live_calls += 1
        return await self.fallback.complete(kwargs, call)

    def unresolved(self, row_id: str) -> bool:
        """True when the row's outcome of this pass must be discarded (it awaits a batch)."""
        return row_id in self.pending or row_id in self.waiting

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None:
        self._live.discard(id(call))
        if self.recorder is not None and not self.unresolved(call.request.row_id):
            self.recorder.finish(call, outcome)
