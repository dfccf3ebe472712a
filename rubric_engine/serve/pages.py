"""What the review pages show of one row, built from the stored row and the task's rubric
snapshot (docs/review.md "The review page"). Pure.

The dialogue comes first, as a reviewer reads it: turns numbered from 0 (the label model's
``evidenceTurns`` index), each tool call with its arguments laid out and the tool's result
nested under the call that asked for it, long turns folded. The judge's side
(:func:`judge_view`) is built separately, so a page that must not show it never receives it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.labels.model import LabelStatus
from rubric_engine.results.model import RowResult
from rubric_engine.review.answers import NOT_CHECKED, Answer
from rubric_engine.rubric.case_level import row_case_requirements
from rubric_engine.rubric.model import EvalRubric, HardRequirement

__all__ = [
    "STATUS_KEYS",
    "case_requirements_of",
    "fill_from_form",
    "judge_view",
    "requirement_rows",
    "turns",
]

#: status keys of the review form, in the order of the keyboard help
STATUS_KEYS = {
    "f": LabelStatus.FOLLOWED,
    "p": LabelStatus.PARTIAL,
    "v": LabelStatus.VIOLATED,
    "n": LabelStatus.NOT_APPLICABLE,
    "u": LabelStatus.UNSURE,
}
#: a turn longer than this (characters or lines) starts folded
FOLD_CHARS = 1200
FOLD_LINES = 24


def case_requirements_of(dialogue: Mapping[str, Any]) -> tuple[HardRequirement, ...]:
    """The row's case-level requirements, derived the way scoring derived them."""
    if not dialogue.get("messages"):
        return ()
    return row_case_requirements(DialogueRow.model_validate(dict(dialogue))).all


def _laid_out(value: Any) -> str:
    """Tool arguments or a tool result as indented JSON when they are JSON, else as given."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if not isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=2)


def _text(n: int, message: Mapping[str, Any], tool: bool) -> dict[str, Any]:
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    shown = _laid_out(content) if tool and content else content
    folded = len(shown) > FOLD_CHARS or shown.count("\n") > FOLD_LINES
    return {
        "n": n,
        "role": message.get("role"),
        "name": message.get("name"),
        "content": shown,
        "folded": folded,
        "preview": shown[:240].replace("\n", " ") if folded else "",
    }


def turns(dialogue: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dialogue's top-level turns, each numbered by its message index.

    An assistant turn lists its tool calls (``calls``: name, arguments laid out, and the
    ``result`` turn that answers the call, by ``toolCallId``); a tool message that answers a
    call is shown only there, nested. A tool message answering no call stays a turn of its own.
    """
    messages = list(dialogue.get("messages") or [])
    answering: dict[str, int] = {}
    for n, message in enumerate(messages):
        call_id = message.get("toolCallId")
        if message.get("role") == "tool" and call_id and call_id not in answering:
            answering[str(call_id)] = n
    nested: set[int] = set()
    out = []
    for n, message in enumerate(messages):
        if n in nested:
            continue
        turn = _text(n, message, message.get("role") == "tool")
        turn["calls"] = []
        for call in message.get("toolCalls") or []:
            result_at = answering.get(str(call.get("id")))
            result = None
            if result_at is not None and result_at > n:
                nested.add(result_at)
                result = _text(result_at, messages[result_at], True)
            turn["calls"].append(
                {
                    "name": call.get("name"),
                    "arguments": _laid_out(call.get("arguments")),
                    "result": result,
                }
            )
        turn["toolCallId"] = message.get("toolCallId") if message.get("role") == "tool" else None
        out.append(turn)
    return out


def requirement_rows(
    rubric: EvalRubric, case: Sequence[HardRequirement], judge: Answer | None = None
) -> list[dict[str, Any]]:
    """Every requirement the form may ask about: common and case-level ones (``intent``
    ``None``: shown for every intent), then each intent's (shown when that intent is chosen);
    ``judge`` is the judge's status where the page may show it."""
    rows = []

    def add(req: HardRequirement, intent: str | None) -> None:
        rows.append(
            {
                "id": req.id,
                "intent": intent,
                "text": req.text,
                "category": req.category,
                "critical": req.critical,
                "redFlagType": req.red_flag_type,
                "observable": req.observable_in_data,
                "cap": req.violation_score,
                "judge": str(judge.statuses[req.id])
                if judge and req.id in judge.statuses
                else None,
                "judgeTurns": list(judge.evidence.get(req.id, ())) if judge else [],
            }
        )

    for req in rubric.common_requirements:
        add(req, None)
    for req in case:
        add(req, None)
    for intent in rubric.intents:
        for req in intent.requirements:
            add(req, intent.key)
    return rows


def judge_view(
    result: RowResult, rubric: EvalRubric, case: Sequence[HardRequirement]
) -> dict[str, Any]:
    """The judge's verdict as the page shows it (never given to a page that must not show it).

    ``evidenceByTurn`` maps a turn (the 0-based index the dialogue is numbered with, the one
    ``judge_v3`` cites) to the requirement IDs whose evidence names it: the dialogue marks
    those turns apart from the ones the reviewer cites.
    """
    reqs = {**rubric.requirements_by_id, **{r.id: r for r in case}}
    by_turn: dict[int, list[str]] = {}
    for entry in result.reference_basis:
        for turn in entry.evidence_turns or ():
            by_turn.setdefault(turn, []).append(entry.requirement_id)
    return {
        "status": str(result.status),
        "intentKey": result.intent_key,
        "judgeScore": result.judge_score,
        "finalScore": result.final_score,
        "redFlagTypes": list(result.red_flag_types),
        "cappedBy": [
            {"id": rid, "cap": reqs[rid].violation_score if rid in reqs else None}
            for rid in result.capped_by
        ],
        "explanation": result.score_explanation,
        "basis": [
            {
                "id": b.requirement_id,
                "status": str(b.status),
                "source": str(b.source),
                "text": reqs[b.requirement_id].text if b.requirement_id in reqs else "",
                "critical": bool(b.requirement_id in reqs and reqs[b.requirement_id].critical),
                "evidenceTurns": list(b.evidence_turns or ()),
            }
            for b in result.reference_basis
        ],
        "evidenceByTurn": by_turn,
        "error": result.error.to_json_dict() if result.error else None,
        "warnings": [w.to_json_dict() for w in result.warnings],
    }


def fill_from_answer(answer: Answer) -> dict[str, Any]:
    """A form filled with an earlier answer of the same reviewer (an edit)."""
    return {
        "intent": answer.intent_key,
        "score": answer.score,
        "flags": sorted(answer.red_flag_types),
        "statuses": {rid: str(s) for rid, s in answer.statuses.items()},
        "evidence": {rid: ", ".join(map(str, t)) for rid, t in answer.evidence.items()},
        "reasons": dict(answer.reasons),
        "reason": answer.reason or "",
    }


def fill_from_form(form: Mapping[str, Any]) -> dict[str, Any]:
    """A form's own values (a submitted form shown again with its error, or a draft):
    nothing lost, nothing added."""

    def prefixed(prefix: str) -> dict[str, str]:
        return {k[len(prefix) :]: str(v) for k, v in form.items() if k.startswith(prefix) and v}

    return {
        "intent": form.get("intent") or None,
        "score": int(s) if (s := str(form.get("score") or "")).isdigit() else None,
        "flags": list(form.get("flag") or ()),
        "statuses": prefixed("status."),
        "evidence": prefixed("evidence."),
        "reasons": prefixed("reason."),
        "reason": form.get("reason") or "",
    }


EMPTY_FILL: dict[str, Any] = fill_from_form({})
#: shown in the form for a requirement the reviewer marked as not checked
NOT_CHECKED_VALUE = NOT_CHECKED
