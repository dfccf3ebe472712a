"""One provider reply → a validated verdict or a typed parse failure with its reason
(docs/protocol.md §5).

:func:`parse_reply` is the only place a judge's answer is read. The live, record and replay
judges call it on every response (the raw OpenAI chat-completion wire dict, exactly as
cassettes and the task store keep it), renormalize calls it on a stored row's final response,
and cassette authoring on each authored response, so a reply means the same thing everywhere.

The order of the checks, each ending in a :class:`ParseFailure` of its own kind:

1. ``message.refusal`` or ``finish_reason: content_filter`` → ``REFUSED`` (asking the same
   request again will not help); ``finish_reason: length`` → ``TRUNCATED`` (never repaired).
2. Where the reply is: every non-empty tool call's ``arguments`` and the ``content`` are
   scanned (:func:`rubric_engine.verdict.reply_scan.scan_reply`). Exactly one verdict-shaped object
   over all of them is the verdict: prose in ``content`` beside a verdict tool call is fine;
   two verdict tool calls, a verdict in both content and a tool call, two objects in the
   content, or a duplicated key are ``AMBIGUOUS`` / ``DUPLICATE_KEY``, never resolved.
3. No candidate: ``EMPTY``, ``JSON_SYNTAX`` (message and line/column), ``NO_JSON``,
   ``NO_VERDICT_FIELDS``, ``UNFINISHED_REASONING`` or ``NOT_TEXT`` (a lone surrogate), the
   reason saying which.
4. The object is validated with the rubric's verdict model and the row's context, passed
   explicitly (no context variable): ``INVALID`` lists every problem with the valid choices.
   The clean-ups the validators applied come back as row warnings.

Pure: no I/O, no clock; instructor is not imported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from rubric_engine.errors import format_loc
from rubric_engine.results.model import ProtocolWarning
from rubric_engine.verdict.model import VERDICT_KEYS, VerdictBase
from rubric_engine.verdict.reply_scan import ONE_OBJECT, Candidate, Scan, scan_reply


class ParseFailureKind(StrEnum):
    """Why a reply gave no verdict. Every kind but REFUSED and TRUNCATED is re-asked."""

    REFUSED = "REFUSED"
    TRUNCATED = "TRUNCATED"
    EMPTY = "EMPTY"
    NO_JSON = "NO_JSON"
    JSON_SYNTAX = "JSON_SYNTAX"
    NO_VERDICT_FIELDS = "NO_VERDICT_FIELDS"
    UNFINISHED_REASONING = "UNFINISHED_REASONING"
    NOT_TEXT = "NOT_TEXT"
    AMBIGUOUS = "AMBIGUOUS"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    INVALID = "INVALID"

    @property
    def ambiguous(self) -> bool:
        """A reply that held more than one answer (counted as ``AMBIGUOUS_REPLY``)."""
        return self in (ParseFailureKind.AMBIGUOUS, ParseFailureKind.DUPLICATE_KEY)


@dataclass(slots=True)
class RowContext:
    """What the verdict is checked against besides the rubric: the row judged.

    Attributes:
        row_id: the verdict's ``rowId``, when sent, must name it.
        case_requirement_ids: the row's case-level requirement IDs the verdict may name.
        turn_count: the row's number of messages (turns), the range ``judge_v3`` evidence
            turns are checked against; ``None`` when unknown (then only ``>= 0`` is checked).
    """

    row_id: str
    case_requirement_ids: tuple[str, ...] = ()
    turn_count: int | None = None


@dataclass(slots=True)
class ParsedVerdict:
    """A validated verdict.

    Attributes:
        source: ``"content"`` or ``"tool call N"`` (1-based), where the verdict was read.
        cleanups: one warning per clean-up applied to a judge value (see verdict.py).
    """

    verdict: VerdictBase
    source: str
    cleanups: tuple[ProtocolWarning, ...] = ()


@dataclass(frozen=True)
class ParseFailure:
    """No verdict: the kind, and the reason the judge is re-asked with (and errors show)."""

    kind: ParseFailureKind
    reason: str


def _message(response: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    choices = response.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    message = choice.get("message")
    return (message if isinstance(message, Mapping) else {}), choice.get("finish_reason")


def _sources(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, text)`` of the content and of every tool call with arguments, tool calls first."""
    out: list[tuple[str, str]] = []
    for n, call in enumerate(message.get("tool_calls") or [], start=1):
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str) and arguments.strip():
            out.append((f"tool call {n}", arguments))
        elif isinstance(arguments, Mapping):  # some providers send the object itself
            out.append((f"tool call {n}", json.dumps(arguments, ensure_ascii=False)))
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        out.append(("content", content))
    return out


def _ambiguous(found: Sequence[tuple[str, Candidate]]) -> ParseFailure:
    places = "; ".join(f"{name} {c.where}" for name, c in found)
    calls = {name for name, _ in found if name.startswith("tool call")}
    what = (
        f"{len(calls)} verdict tool calls"
        if len(calls) == len(found)
        else f"{len(found)} verdict-shaped JSON objects"
    )
    return ParseFailure(
        ParseFailureKind.AMBIGUOUS,
        f"the reply holds {what} ({places}), so which one is your verdict is ambiguous; "
        f"{ONE_OBJECT}; do not quote objects from the dialogue",
    )


def _problem(scans: Sequence[tuple[str, Scan]]) -> ParseFailure:
    """The failure of a reply none of whose parts holds a candidate."""
    if not scans:
        return ParseFailure(
            ParseFailureKind.EMPTY, f"the reply is empty (no content, no tool call); {ONE_OBJECT}"
        )
    name, scan = scans[0]  # a tool call's problem first: a judge that calls a tool answers there
    assert scan.problem is not None
    where = "" if name == "content" else f"{name}: "
    return ParseFailure(ParseFailureKind(scan.problem.kind), where + scan.problem.reason)


def validation_reason(exc: ValidationError) -> str:
    """One line per problem: ``field: message`` (the re-ask text; lists the valid choices)."""
    return "; ".join(f"{format_loc(e['loc']) or 'verdict'}: {e['msg']}" for e in exc.errors())


def parse_reply(
    response: Mapping[str, Any], verdict_model: type[VerdictBase], row: RowContext
) -> ParsedVerdict | ParseFailure:
    """Read one provider response (see module docstring for the rules, in order).

    Args:
        response: an OpenAI chat-completion wire dict (``choices[0].message`` …).
        verdict_model: :func:`rubric_engine.verdict.model.verdict_model` of the rubric judged with.
        row: the row's id and case-level requirement IDs.

    Returns:
        The verdict with its clean-up warnings, or the failure with its reason. Never raises
        for anything a judge can send.
    """
    message, finish_reason = _message(response)
    refusal = message.get("refusal")
    if refusal:
        return ParseFailure(ParseFailureKind.REFUSED, f"the judge refused: {str(refusal)[:300]}")
    if finish_reason == "content_filter":
        return ParseFailure(
            ParseFailureKind.REFUSED,
            "the provider's content filter stopped the answer (finish_reason content_filter)",
        )
    if finish_reason == "length":
        return ParseFailure(ParseFailureKind.TRUNCATED, "the output was cut off at max_tokens")
    scans = [(name, scan_reply(text, VERDICT_KEYS)) for name, text in _sources(message)]
    found = [(name, c) for name, scan in scans for c in scan.candidates]
    if not found:
        return _problem(scans)
    if len(found) > 1:
        return _ambiguous(found)
    name, candidate = found[0]
    if candidate.duplicate_keys:
        keys = ", ".join(repr(k) for k in candidate.duplicate_keys)
        return ParseFailure(
            ParseFailureKind.DUPLICATE_KEY,
            f"the verdict object ({name} {candidate.where}) names {keys} more than once, so "
            f"its value is ambiguous; {ONE_OBJECT}, each field named once",
        )
    cleanups: list[ProtocolWarning] = []
    context: dict[str, object] = {
        "row_id": row.row_id,
        "case_requirement_ids": list(row.case_requirement_ids),
        "cleanups": cleanups,
    }
    if row.turn_count is not None:
        context["turn_count"] = row.turn_count
    try:
        verdict = verdict_model.model_validate(candidate.value, context=context)
    except ValidationError as exc:
        return ParseFailure(ParseFailureKind.INVALID, validation_reason(exc))
    return ParsedVerdict(verdict=verdict, source=name, cleanups=tuple(cleanups))
