"""The judge as a small protocol of the core; live, replay and test judges implement it.

The pipeline hands a :class:`JudgeRequest` to anything with ``async judge(request)`` and gets a
:class:`JudgeOutcome` back: a validated verdict, or a
:class:`~rubric_engine.results.model.JudgeError`
value — never an exception for a per-row failure. Live, record, replay and test judges
implement it at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rubric_engine.results.model import JudgeError, ProtocolWarning
from rubric_engine.verdict.model import VerdictBase


@dataclass(slots=True)
class JudgeRequest:
    """One call's worth of input.

    Attributes:
        row_id: the row judged.
        messages: chat messages ``[{"role", "content"}, …]``; system first.
        case_requirement_ids: the row's case-level IDs the verdict may name.
        rubric_hash: the snapshot's content hash (part of the cassette key).
        prompt_hash: the template's hash (part of the cassette key).
        turn_count: the row's number of messages: the range of ``judge_v3`` evidence turns
            (not part of the cassette key: the messages already show every turn).
        judge: which judge of a panel asks, from 1 (docs/stability.md); its model is in the
            request itself.
        sample: which ask of the row this is, from 1: part of the cassette key from 2 on
            (sample 1's key is a single ask's).
    """

    row_id: str
    messages: tuple[dict[str, str], ...]
    case_requirement_ids: tuple[str, ...]
    rubric_hash: str
    prompt_hash: str
    turn_count: int | None = None
    judge: int = 1
    sample: int = 1


@dataclass(slots=True)
class Attempt:
    """One request the provider (or cassette) answered, or one that failed in transport.

    Attributes:
        response: the raw provider response in OpenAI chat-completion wire format, or ``None``.
        error: transport error text when there is no response.
        latency_ms: wall time of the call in milliseconds.
        prompt_tokens / completion_tokens: from the response's ``usage``; 0 when absent.
        cache_read_tokens / cache_creation_tokens: of ``prompt_tokens``, those the provider
            read from / wrote to its prompt cache (:mod:`rubric_engine.judge.usage`).
        cost_usd: provider cost when the model's price is known, else ``None``.
        status: the HTTP status a server sent with a failed attempt, else ``None`` (a
            refused connection, a timeout, or an answer).
    """

    response: dict[str, Any] | None
    error: str | None = None
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    status: int | None = None
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


@dataclass(slots=True)
class JudgeOutcome:
    """The result of judging one row: exactly one of ``verdict`` and ``error`` is set.

    Attributes:
        reasks: why each re-ask happened (validation messages), in order.
        attempts: every provider call made for this row, failed ones included (cost counts them).
        cassette_key: the canonical request key (set in every mode).
        parse_warnings: row warnings from reading the replies, for the row result to carry
            after the ``JUDGE_REASKED`` ones: an ``AMBIGUOUS_REPLY`` per ambiguous reply, then
            one per clean-up applied to the accepted verdict's values (verdict.py's table).
    """

    verdict: VerdictBase | None
    error: JudgeError | None
    attempts: list[Attempt] = field(default_factory=list)
    reasks: list[str] = field(default_factory=list)
    cassette_key: str | None = None
    parse_warnings: list[ProtocolWarning] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(a.prompt_tokens for a in self.attempts)

    @property
    def completion_tokens(self) -> int:
        return sum(a.completion_tokens for a in self.attempts)

    @property
    def cache_read_tokens(self) -> int:
        return sum(a.cache_read_tokens for a in self.attempts)

    @property
    def cache_creation_tokens(self) -> int:
        return sum(a.cache_creation_tokens for a in self.attempts)

    @property
    def latency_ms(self) -> float:
        return sum(a.latency_ms for a in self.attempts)

    @property
    def cost_usd(self) -> float | None:
        costs = [a.cost_usd for a in self.attempts if a.cost_usd is not None]
        return sum(costs) if costs else None


class Judge(Protocol):
    """Anything that can judge one row."""

    async def judge(self, request: JudgeRequest) -> JudgeOutcome:
        """Judge one row; per-row failures come back as ``JudgeOutcome.error``."""
        ...


class CallBudget(Protocol):
    """A run's ``--max-calls`` / ``--max-cost``, asked before every call on the wire (first
    asks, re-asks, transport retries alike), so that no call is made past the limit."""

    def take_call(self) -> bool:
        """Whether one more call may go out now; ``True`` counts it as made."""
        ...

    def settle_call(self, cost_usd: float | None) -> None:
        """A call taken by :meth:`take_call` ended; ``cost_usd`` is its price, if known."""
        ...


class BudgetSpent(Exception):
    """A call was not made: the run's budget has no room for it (:class:`CallBudget`).

    It ends the row's judging without a result: the row is not stored (neither a score nor a
    ``JUDGE_ERROR``), and ``--resume`` judges it, with the answers it already had."""
