"""What reports read of one stored row besides its result: judge usage and agent facts.

Pure: :func:`row_facts` reads a stored dialogue (camelCase JSON of ``DialogueRow``) that the
store edge hands over; nothing here opens the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rubric_engine.rules.evidence import as_number


@dataclass(frozen=True)
class RowUsage:
    """Per-row judge usage as stored. ``cache_read_tokens`` / ``cache_creation_tokens`` are
    the part of ``prompt_tokens`` the provider read from / wrote to its prompt cache
    (:mod:`rubric_engine.judge.usage`)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


class Usage(Protocol):
    """What :class:`RowUsage` holds, read as attributes: a :class:`RowUsage`, or a stored
    row itself (:class:`~rubric_engine.store.task_store.StoredRow` has these fields), so a row just
    stored is counted without copying its usage into a new object."""

    @property
    def calls(self) -> int: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def latency_ms(self) -> float: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_creation_tokens(self) -> int: ...


@dataclass(frozen=True)
class RowFacts:
    """What the agent did in a row, read from the stored dialogue (docs/reports.md, ``agent``).

    Attributes:
        tool_calls: tool calls the agent made (assistant ``tool_calls``; else the trace's
            ``toolInvocations``), 0 when none.
        duration_ms: the agent's own run time from the trace, ``None`` when not recorded.
        metadata: the row's metadata (scenario, risk_level, tags …) for ``--by`` slices.
        case_texts: the row's case-level requirements (``CASE_…`` IDs) and their texts, so the
            report can show what each one asks; empty for rows without any.
        messages: the dialogue's number of messages (evidence turns are 0-based indexes of
            them); ``None`` when not read.
    """

    tool_calls: int = 0
    duration_ms: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    case_texts: dict[str, str] = field(default_factory=dict)
    messages: int | None = None


def row_facts(dialogue: dict[str, Any]) -> RowFacts:
    """Read :class:`RowFacts` from a stored dialogue (camelCase JSON of ``DialogueRow``).

    Duration is the first number among ``trace.durationMs``, ``trace.totalDurationMs`` and
    ``trace.session.totalDurationMs`` (a diagnosis case's trace fixture, docs/cases.md).
    """
    calls = 0
    messages = dialogue.get("messages") or ()
    for m in messages:  # a loop, not a generator: this runs for every row
        if m.get("toolCalls"):
            calls += len(m["toolCalls"])
    trace: dict[str, Any] = dialogue.get("trace") or {}
    duration = None
    if trace:  # most rows have none: nothing below to read
        if not calls and isinstance(trace.get("toolInvocations"), list):
            calls = len(trace["toolInvocations"])
        session: dict[str, Any] = trace["session"] if isinstance(trace.get("session"), dict) else {}
        for value in (
            trace.get("durationMs"),
            trace.get("totalDurationMs"),
            session.get("totalDurationMs"),
        ):
            if as_number(value) is not None:  # numbers, or strings holding one, as checks do
                duration = as_number(value)
                break
    metadata = dict(dialogue.get("metadata") or {})
    return RowFacts(calls, duration, metadata, _case_texts(dialogue), len(messages))


def _case_texts(dialogue: dict[str, Any]) -> dict[str, str]:
    if not (
        dialogue.get("expected")
        or dialogue.get("expectedBehavior")
        or dialogue.get("negativeBehavior")
    ):
        return {}
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.rubric.case_level import case_requirements
    from rubric_engine.rules.run import case_rule_requirements

    row = DialogueRow.model_validate(dialogue)
    found = case_requirements(row.expected_behavior, row.negative_behavior)
    return {r.id: r.text for r in (*found, *case_rule_requirements(row.expected))}
