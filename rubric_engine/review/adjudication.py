"""What a lead sees and decides when reviewers disagree (docs/review.md "Adjudication"). Pure:
no I/O, no clock.

:func:`dispute` lays the reviewers' answers side by side per requirement — each reviewer's
status, evidence turns and reason, the judge's status, whether the reviewers differ — and per
row field (intent, score, red flags). :func:`decision_from_form` reads the lead's decision: a
status for every requirement the reviewers differ on (and for any other the lead changes), the
row's intent, score and red flags, and a reason. Only decided requirements get adjudication
labels; where the reviewers agree, their labels stand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rubric_engine.errors import InputError
from rubric_engine.labels.model import LabelStatus
from rubric_engine.review.answers import (
    Answer,
    applicable,
    cited_turns,
    form_value,
    row_fields,
)
from rubric_engine.rubric.model import EvalRubric, HardRequirement

__all__ = ["Dispute", "RequirementDispute", "decision_from_form", "dispute"]


@dataclass(frozen=True)
class RequirementDispute:
    """One requirement across the reviewers of a row."""

    id: str
    text: str
    critical: bool
    #: reviewer → (status or ``None`` when they did not check it, evidence turns, reason)
    answers: Mapping[str, tuple[LabelStatus | None, tuple[int, ...], str | None]]
    judge: LabelStatus | None
    #: two reviewers gave different statuses
    disputed: bool
    #: the status every reviewer who checked it gave, when they agree
    agreed: LabelStatus | None


@dataclass(frozen=True)
class Dispute:
    """A row's reviews side by side."""

    reviewers: tuple[str, ...]
    requirements: tuple[RequirementDispute, ...]
    #: field (``intent``, ``score``, ``redFlags``) → reviewer → the value they gave
    fields: Mapping[str, Mapping[str, object]]
    #: the row fields the reviewers differ on
    disputed_fields: frozenset[str]
    #: field → the judge's value (empty without a judge)
    judge_fields: Mapping[str, object]

    @property
    def disputed_requirements(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.requirements if r.disputed)


def _requirements(
    rubric: EvalRubric, case: Sequence[HardRequirement]
) -> dict[str, HardRequirement]:
    reqs = {**rubric.requirements_by_id}
    reqs.update({r.id: r for r in case})
    return reqs


def dispute(
    rubric: EvalRubric,
    case: Sequence[HardRequirement],
    reviews: Mapping[str, Answer],
    judge: Answer | None,
) -> Dispute:
    """The reviews of one row side by side, requirements in the pack's order."""
    reqs = _requirements(rubric, case)
    seen = [rid for rid in reqs if any(rid in a.statuses for a in reviews.values())]
    seen += sorted({rid for a in reviews.values() for rid in a.statuses} - set(seen))
    rows = []
    for rid in seen:
        answers = {
            who: (a.statuses.get(rid), a.evidence.get(rid, ()), a.reasons.get(rid))
            for who, a in reviews.items()
        }
        given = {status for status, _, _ in answers.values() if status is not None}
        req = reqs.get(rid)
        rows.append(
            RequirementDispute(
                rid,
                req.text if req else "",
                bool(req and req.critical),
                answers,
                judge.statuses.get(rid) if judge else None,
                len(given) > 1,
                next(iter(given)) if len(given) == 1 else None,
            )
        )
    fields: dict[str, dict[str, object]] = {
        "intent": {who: a.intent_key for who, a in reviews.items()},
        "score": {who: a.score for who, a in reviews.items()},
        "redFlags": {who: tuple(sorted(a.red_flag_types)) for who, a in reviews.items()},
    }
    differ = frozenset(name for name, values in fields.items() if len(set(values.values())) > 1)
    judged: dict[str, object] = (
        {
            "intent": judge.intent_key,
            "score": judge.score,
            "redFlags": tuple(sorted(judge.red_flag_types)),
        }
        if judge
        else {}
    )
    return Dispute(tuple(reviews), tuple(rows), fields, differ, judged)


def decision_from_form(
    form: Mapping[str, str | Sequence[str]],
    row_id: str,
    rubric: EvalRubric,
    case: Sequence[HardRequirement],
    table: Dispute,
    turn_count: int,
) -> Answer:
    """Read the lead's decision.

    Fields: ``intent``, ``score``, ``flag`` (as the review form); ``decide.<ID>`` — a
    :class:`LabelStatus` — required for each disputed requirement, optional elsewhere (empty:
    the reviewers' agreed status stands, no label); ``evidence.<ID>``, ``reason.<ID>``
    optional; ``reason`` required.

    Raises:
        InputError: every problem at once (undecided requirements listed by ID).
    """
    problems: list[str] = []
    intent_key, score, flags = row_fields(form, rubric, problems)
    allowed = {r.id for r in applicable(rubric, intent_key, case)} if intent_key else set()
    statuses: dict[str, LabelStatus] = {}
    evidence: dict[str, tuple[int, ...]] = {}
    reasons: dict[str, str] = {}
    undecided = []
    red_lines = {r.id: r.red_flag_type for r in _requirements(rubric, case).values() if r.critical}
    for row in table.requirements:
        given = form_value(form, f"decide.{row.id}").upper()
        if not given:
            if row.disputed:
                undecided.append(row.id)
            continue
        if given not in LabelStatus.__members__:
            problems.append(f"decide.{row.id} {given!r}: choose one of {', '.join(LabelStatus)}")
            continue
        if allowed and row.id not in allowed:
            continue  # another intent's requirement: the chosen intent does not ask it
        statuses[row.id] = LabelStatus(given)
        if statuses[row.id] is LabelStatus.VIOLATED and red_lines.get(row.id):
            flags.add(str(red_lines[row.id]))
        cited = cited_turns(form_value(form, f"evidence.{row.id}"), turn_count)
        if cited is None:
            problems.append(f"evidence.{row.id}: give turn numbers from 0 to {turn_count - 1}")
        elif cited:
            evidence[row.id] = cited
        if why := form_value(form, f"reason.{row.id}"):
            reasons[row.id] = why
    if undecided:
        problems.insert(0, f"decide each disputed requirement: {', '.join(undecided)}")
    reason = form_value(form, "reason")
    if not reason:
        problems.append("say why in the reason field (every settlement records it)")
    if problems:
        raise InputError(f"adjudication of row {row_id}: " + "; ".join(problems))
    return Answer(row_id, intent_key, statuses, frozenset(flags), score, reason, evidence, reasons)
