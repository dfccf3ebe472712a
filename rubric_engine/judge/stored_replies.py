"""Judge backends that answer from the store instead of a provider.

* :class:`StoredReplies` answers a row's calls from the raw attempts stored with it, in order:
  ``rubric-eval verify`` runs the judge's own decision loop (parse, re-ask, truncation) over
  them, so a stored result is checked against what its replies actually say (docs/verify.md).
* :class:`KeptAnswers` wraps the live backend of a run: every answered call of a row in flight
  is kept in the store as it arrives, and a resumed run gets those answers back, in order,
  before anything is sent (docs/stability.md "Resume").

Neither keeps a verdict or decides anything: the judge reads the answers as it reads a
provider's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from rubric_engine.judge.backends import Answer, Backend, CallKey
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.judge.usage import usage_of
from rubric_engine.results.model import JudgeError, JudgeErrorKind


class AnswerSink(Protocol):
    """Where :class:`KeptAnswers` keeps answers (the task store's
    :meth:`~rubric_engine.store.task_store.TaskStore.keep_answer`)."""

    def keep_answer(
        self, task_id: str, row_id: str, where: tuple[int, int, int], tries: list[Any]
    ) -> None: ...


def stored_attempt(raw: dict[str, Any]) -> Attempt:
    """A row's stored attempt (``{"response", "error", "latencyMs"}``) as the judge's
    :class:`Attempt`, its token counts read from the response's usage."""
    response = raw.get("response")
    usage = usage_of(response) if isinstance(response, dict) else None
    latency = raw.get("latencyMs")
    return Attempt(
        response=response if isinstance(response, dict) else None,
        error=raw.get("error"),
        latency_ms=float(latency) if isinstance(latency, (int, float)) else 0.0,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        cache_read_tokens=usage.cache_read_tokens if usage else 0,
        cache_creation_tokens=usage.cache_creation_tokens if usage else 0,
    )


class StoredReplies:
    """Answers one row at a time from its stored attempts (:meth:`load` a row first).

    Each call takes the stored attempts up to and including the next one that has a response
    (the failed tries before it were that call's retries). When the stored attempts run out
    the row ended there without an answer: the call fails with the row's stored error (its
    text came from the environment, a provider's message or a cassette miss, and is taken as
    it was), or as a cassette miss when there is none.
    """

    def __init__(self) -> None:
        self._attempts: list[dict[str, Any]] = []
        self._at = 0
        self._error: JudgeError | None = None

    def load(self, attempts: Iterable[dict[str, Any]], error: JudgeError | None) -> None:
        """The row to answer next: its stored attempts, and its stored error (if any)."""
        self._attempts = [a for a in attempts if isinstance(a, dict)]
        self._at = 0
        self._error = error

    @property
    def unread(self) -> int:
        """Stored attempts the judge did not ask for (a row that ended before using them)."""
        return len(self._attempts) - self._at

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        tries: list[Attempt] = []
        while self._at < len(self._attempts):
            attempt = stored_attempt(self._attempts[self._at])
            self._at += 1
            tries.append(attempt)
            if attempt.response is not None:
                return Answer(tuple(tries))
        if self._error is not None:
            return Answer(tuple(tries), (self._error.kind, self._error.message))
        return Answer(tuple(tries), (JudgeErrorKind.CASSETTE_MISS, "no stored reply for this call"))

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        return None


def answer_tries(answer: Answer) -> list[dict[str, Any]]:
    """An answered call's tries as :class:`KeptAnswers` keeps them (every field of each)."""
    return [
        {
            "response": a.response,
            "error": a.error,
            "latencyMs": a.latency_ms,
            "promptTokens": a.prompt_tokens,
            "completionTokens": a.completion_tokens,
            "costUsd": a.cost_usd,
            "status": a.status,
            "cacheReadTokens": a.cache_read_tokens,
            "cacheCreationTokens": a.cache_creation_tokens,
        }
        for a in answer.attempts
    ]


def kept_answer(tries: list[dict[str, Any]]) -> Answer:
    """A kept call back as the :class:`Answer` it was."""
    return Answer(
        tuple(
            Attempt(
                response=t.get("response"),
                error=t.get("error"),
                latency_ms=float(t.get("latencyMs") or 0.0),
                prompt_tokens=int(t.get("promptTokens") or 0),
                completion_tokens=int(t.get("completionTokens") or 0),
                cost_usd=t.get("costUsd"),
                status=t.get("status"),
                cache_read_tokens=int(t.get("cacheReadTokens") or 0),
                cache_creation_tokens=int(t.get("cacheCreationTokens") or 0),
            )
            for t in tries
        )
    )


#: (rowId, judge, sample) -> the answered calls kept for it, in order
Kept = dict[tuple[str, int, int], list[list[dict[str, Any]]]]


class KeptAnswers:
    """A run's live backend, with every answered call of a row kept until the row is stored.

    Args:
        inner: the live (or record) backend that calls the provider.
        sink: where kept answers go.
        kept: answers kept by an earlier run of the task (``--resume``), served first.

    Attributes:
        reused: calls answered from ``kept`` (not sent again).
    """

    def __init__(
        self, inner: Backend, sink: AnswerSink, task_id: str, kept: Kept | None = None
    ) -> None:
        self.inner = inner
        self.sink = sink
        self.task_id = task_id
        self.kept = kept or {}
        self.reused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the live backend's counters and settings

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        where = (request.row_id, request.judge, request.sample)
        earlier = self.kept.get(where, [])
        if served < len(earlier):
            self.reused += 1
            return kept_answer(earlier[served])
        answer = await self.inner.complete(kwargs, request, key, served, final_status)
        if answer.response is not None:
            where3 = (request.judge, request.sample, served)
            self.sink.keep_answer(self.task_id, request.row_id, where3, answer_tries(answer))
        return answer

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        self.inner.finish(request, key, outcome)
