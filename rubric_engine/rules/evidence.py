"""What rule checks look at: one row's answer, tool calls, verifier, timing and cost.

:func:`evidence_from_row` reads the row's messages and its optional ``trace``. Trace fields
read (camelCase or snake_case; the trace shapes of docs/cases.md):

=====================================================  =========================================
trace field                                            used as
=====================================================  =========================================
``toolInvocations[*].{toolName|name, arguments,        the tool calls (when present they replace
success}``                                             the calls found in the messages)
``session.answer`` / ``answer``                        the final answer (else the last assistant
                                                       text of the messages)
``session.totalDurationMs`` / ``totalDurationMs`` /    duration in milliseconds
``durationMs``
``session.selfEvaluation.verifier_evaluation.verdict``  the verifier's verdict (also
/ ``verifierVerdict``                                  ``verifier_evaluation.verdict`` at the top)
``...verifier_evaluation.tool_trace_summary[*]         extra evidence of tools used
.tool_name``
``totalCostUsd`` / ``costUsd`` / ``total_cost_usd``    cost in US dollars
``steps`` (int or list)                                step count (else the number of tool calls)
``retrievedDocs[*].{doc_id|docId|id}`` (or strings)    retrieved document IDs
``structuredOutput``                                   the structured answer for ``json_schema``
``finalState``                                         the final business state
=====================================================  =========================================

Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.results.agent_output import parse_agent_output
from rubric_engine.rubric.model import OutputParsing


@dataclass(frozen=True)
class ToolUse:
    """One tool invocation. ``success`` is ``None`` when the source does not say."""

    name: str
    arguments: Any
    success: bool | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything a check may read about one row; ``None`` means the data does not say."""

    final_answer: str
    assistant_texts: tuple[str, ...]
    user_texts: tuple[str, ...]
    tool_calls: tuple[ToolUse, ...]
    verifier_tools: tuple[str, ...] = ()
    verifier_verdict: str | None = None
    duration_ms: float | None = None
    cost_usd: float | None = None
    steps: int | None = None
    retrieved_doc_ids: tuple[str, ...] | None = None
    structured_output: Any = None
    final_state: dict[str, Any] | None = None

    @property
    def tool_names(self) -> set[str]:
        """Tools seen anywhere: invocations and the verifier's summary."""
        return {c.name for c in self.tool_calls} | set(self.verifier_tools)


def _get(obj: Any, *names: str) -> Any:
    if not isinstance(obj, dict):
        return None
    for name in names:
        if obj.get(name) is not None:
            return obj[name]
    return None


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def as_number(value: Any) -> float | None:
    """A number, or a string holding one (``"6000"``); anything else is absent (see
    :func:`trace_problems`, which refuses such values when the row is read)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


_NUMBER_FIELDS = (
    ("totalDurationMs", "durationMs", "total_duration_ms", "duration_ms"),
    ("totalCostUsd", "costUsd", "total_cost_usd", "cost_usd"),
)


def trace_problems(trace: Any) -> list[tuple[str, str]]:
    """``(field, message)`` for trace values a check would misread, so that a malformed trace
    fails when the row is read instead of making a limit check pass silently."""
    if not isinstance(trace, dict):
        return []
    problems: list[tuple[str, str]] = []
    session = _get(trace, "session")
    for where, obj in (("trace", trace), ("trace.session", session)):
        if not isinstance(obj, dict):
            continue
        for names in _NUMBER_FIELDS:
            for name in names:
                value = obj.get(name)
                if value is not None and as_number(value) is None:
                    problems.append(
                        (f"{where}.{name}", f"must be a number, not {json.dumps(value)[:40]}")
                    )
    steps = _get(trace, "steps", "stepCount", "step_count")
    if steps is not None and not isinstance(steps, list) and as_number(steps) is None:
        problems.append(("trace.steps", f"must be a count or a list, not {json.dumps(steps)[:40]}"))
    invocations = _get(trace, "toolInvocations", "tool_invocations", "tool_calls", "toolCalls")
    if invocations is not None and not isinstance(invocations, list):
        problems.append(("trace.toolInvocations", "must be a list of tool calls"))
    for i, item in enumerate(invocations if isinstance(invocations, list) else []):
        if not isinstance(_get(item, "toolName", "tool_name", "name", "tool"), str):
            problems.append(
                (
                    f"trace.toolInvocations[{i}]",
                    "each tool call is an object with a toolName (or name/tool) string, not "
                    f"{json.dumps(item, ensure_ascii=False)[:60]}",
                )
            )
    return problems


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _message_calls(row: DialogueRow) -> tuple[ToolUse, ...]:
    """The agent's tool calls; a user's own actions (tau2 ``requestor: user``) are not."""
    return tuple(
        ToolUse(call.name, _arguments(call.arguments))
        for message in row.messages
        if message.role == "assistant"
        for call in message.tool_calls
    )


def _trace_calls(invocations: list[Any]) -> tuple[ToolUse, ...]:
    calls = []
    for item in invocations:
        name = _get(item, "toolName", "tool_name", "name", "tool")
        if isinstance(name, str):
            success = _get(item, "success")
            calls.append(
                ToolUse(
                    name,
                    _arguments(_get(item, "arguments", "args", "params", "input")),
                    success if isinstance(success, bool) else None,
                )
            )
    return tuple(calls)


def _doc_ids(raw: Any) -> tuple[str, ...] | None:
    if not isinstance(raw, list):
        return None
    ids = []
    for doc in raw:
        found = doc if isinstance(doc, str) else _get(doc, "doc_id", "docId", "id")
        if isinstance(found, str | int):
            ids.append(str(found))
    return tuple(ids)


def _visible(text: str, parsing: OutputParsing | None) -> str:
    """What the user saw of one assistant text: thinking removed, questions cards kept."""
    if parsing is None:
        return text
    parsed = parse_agent_output(text, parsing)
    return "\n".join(part for part in (parsed.text, *parsed.cards) if part)


def evidence_from_row(row: DialogueRow, parsing: OutputParsing | None = None) -> Evidence:
    """Collect the evidence of one row (see the module table for the trace fields read).

    Args:
        row: the dialogue and its optional trace.
        parsing: the pack's ``outputParsing``; when given, assistant texts lose their thinking
            sections first (docs/protocol.md §12: the user never saw them), questions cards stay.
    """
    trace = row.trace or {}
    session = _get(trace, "session") or {}
    assistant = tuple(
        text
        for m in row.messages
        if m.role == "assistant" and m.content
        for text in [_visible(m.content, parsing)]
        if text
    )
    users = tuple(m.content for m in row.messages if m.role == "user" and m.content)
    answer = _get(session, "answer")
    if not isinstance(answer, str):
        answer = _get(trace, "answer")
    if isinstance(answer, str):
        answer = _visible(answer, parsing)
    else:
        answer = assistant[-1] if assistant else ""
    verifier = _get(_get(session, "selfEvaluation", "self_evaluation"), "verifier_evaluation")
    verifier = verifier or _get(trace, "verifier_evaluation", "verifierEvaluation") or {}
    verdict = _get(verifier, "verdict") or _get(trace, "verifierVerdict", "verifier_verdict")
    summary = _get(verifier, "tool_trace_summary", "toolTraceSummary") or []
    invocations = _get(trace, "toolInvocations", "tool_invocations", "tool_calls", "toolCalls")
    steps = _get(trace, "steps", "stepCount", "step_count")
    return Evidence(
        final_answer=answer,
        assistant_texts=assistant if assistant or not answer else (answer,),
        user_texts=users,
        tool_calls=(
            _trace_calls(invocations) if isinstance(invocations, list) else _message_calls(row)
        ),
        verifier_tools=tuple(
            str(n) for n in (_get(s, "tool_name", "toolName") for s in summary) if n is not None
        )
        if isinstance(summary, list)
        else (),
        verifier_verdict=str(verdict) if verdict is not None else None,
        duration_ms=as_number(
            _first(
                _get(session, "totalDurationMs", "total_duration_ms"),
                _get(trace, "totalDurationMs", "durationMs", "total_duration_ms", "duration_ms"),
            )
        ),
        cost_usd=as_number(_get(trace, "totalCostUsd", "costUsd", "total_cost_usd", "cost_usd")),
        steps=len(steps) if isinstance(steps, list) else _int(as_number(steps)),
        retrieved_doc_ids=_doc_ids(_get(trace, "retrievedDocs", "retrieved_docs")),
        structured_output=_get(trace, "structuredOutput", "structured_output"),
        final_state=_get(trace, "finalState", "final_state"),
    )
