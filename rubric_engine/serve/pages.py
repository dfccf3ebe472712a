"""What the review pages show of one row, built from the stored row and the task's rubric
snapshot (docs/review.md: the dialogue with numbered turns and tool calls, the judge's
intent, score, caps, explanation and referenceBasis with each rule's text). Pure.

The judge's side (:func:`judge_view`) is built separately from the rest, so a blind page simply
never receives it: the verdict cannot leak into its HTML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.labels.model import LabelStatus
from rubric_engine.results.model import RowResult
from rubric_engine.review.answers import Answer
from rubric_engine.rubric.case_level import row_case_requirements
from rubric_engine.rubric.model import EvalRubric, HardRequirement

__all__ = ["case_requirements_of", "judge_view", "prefill", "requirement_rows", "turns"]

#: status keys of the review form, in the order of the keyboard help
STATUS_KEYS = {
    "f": LabelStatus.FOLLOWED,
    "p": LabelStatus.PARTIAL,
    "v": LabelStatus.VIOLATED,
    "n": LabelStatus.NOT_APPLICABLE,
    "u": LabelStatus.UNSURE,
}


def case_requirements_of(dialogue: Mapping[str, Any]) -> tuple[HardRequirement, ...]:
    """The row's case-level requirements, derived the way scoring derived them."""
    if not dialogue.get("messages"):
        return ()
    return row_case_requirements(DialogueRow.model_validate(dict(dialogue))).all


def turns(dialogue: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dialogue's messages numbered from 0 (the label model's ``evidenceTurns`` index),
    with each tool call as ``name(arguments)`` text."""
    out = []
    for n, message in enumerate(dialogue.get("messages") or []):
        calls = []
        for call in message.get("toolCalls") or []:
            args = call.get("arguments")
            calls.append({"name": call.get("name"), "arguments": args})
        out.append(
            {
                "n": n,
                "role": message.get("role"),
                "name": message.get("name"),
                "content": message.get("content") or "",
                "toolCalls": calls,
                "toolCallId": message.get("toolCallId"),
            }
        )
    return out


def requirement_rows(rubric: EvalRubric, case: Sequence[HardRequirement]) -> list[dict[str, Any]]:
    """Every requirement the form may ask about: common ones and case-level ones (``intent``
    ``None``: shown for every intent), then each intent's (shown when that intent is chosen)."""
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
    """The judge's verdict as the page shows it (never given to a blind page).

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


def prefill(answer: Answer | None) -> dict[str, Any]:
    """What the form starts with: an answer's values, or nothing chosen (a blind page, or a row
    without a verdict). Unlisted requirements start FOLLOWED (unobservable ones
    NOT_APPLICABLE, set by the template)."""
    if answer is None:
        return {
            "intent": None,
            "score": None,
            "flags": [],
            "statuses": {},
            "evidence": {},
            "reason": "",
        }
    return {
        "intent": answer.intent_key,
        "score": answer.score,
        "flags": sorted(answer.red_flag_types),
        "statuses": {rid: str(s) for rid, s in answer.statuses.items()},
        "evidence": {rid: ", ".join(map(str, t)) for rid, t in answer.evidence.items()},
        "reason": answer.reason or "",
    }


def prefill_from_form(form: Mapping[str, Any]) -> dict[str, Any]:
    """The form's own values, to show it again with an error and nothing lost."""
    return {
        "intent": form.get("intent") or None,
        "score": int(s) if (s := str(form.get("score") or "")).isdigit() else None,
        "flags": list(form.get("flag") or ()),
        "statuses": {k[len("status.") :]: v for k, v in form.items() if k.startswith("status.")},
        "evidence": {
            k[len("evidence.") :]: v for k, v in form.items() if k.startswith("evidence.")
        },
        "reason": form.get("reason") or "",
    }
