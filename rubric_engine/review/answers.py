"""A reviewer's answer for one row, read from a review form or from labels, and turned into
labels (docs/review.md "Labels written"; the label model is docs/calibration.md's). Pure: no
I/O, no clock.

An :class:`Answer` is one judgment of a row in the terms the review page asks for: a status per
requirement the reviewer checked (a requirement marked "not checked" has none and gets no
label), the intent, the red-flag types and the final score, with a reason for the row and a
reason per requirement where given. The judge's verdict
(:func:`answer_of_result`) and each reviewer's current labels (:func:`answers_of_labels`) become
answers, so "the reviewer overrode the judge" and "two reviewers disagree" are one comparison
(:func:`differences`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rubric_engine.errors import InputError
from rubric_engine.labels.model import Label, LabelSource, LabelStatus
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric, HardRequirement

__all__ = [
    "NOT_CHECKED",
    "Answer",
    "ReviewContext",
    "answer_from_form",
    "answer_of_result",
    "answers_of_labels",
    "applicable",
    "check_reason",
    "cited_turns",
    "differences",
    "form_value",
    "labels_of_answer",
    "row_fields",
]


@dataclass(frozen=True)
class Answer:
    """One judgment of one row.

    Attributes:
        statuses: requirement ID → status, for the requirements the answer covers.
        red_flag_types: the row's red-flag types (a set: order and duplicates do not matter).
        score: the row's final score (after caps), an integer on the pack's scale, or ``None``.
    """

    row_id: str
    intent_key: str | None
    statuses: Mapping[str, LabelStatus] = field(default_factory=dict)
    red_flag_types: frozenset[str] = frozenset()
    score: int | None = None
    reason: str | None = None
    #: requirement ID → the turns (0-based message indexes) the reviewer cites for its status
    evidence: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: requirement ID → why the reviewer gave that status (only where they said)
    reasons: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReviewContext:
    """What a label needs besides the answer: who, under which rubric and task, how."""

    reviewer: str
    task_id: str
    rubric_key: str
    rubric_version: int
    rubric_hash: str
    #: the page showed the judge's verdict before the reviewer answered (``False`` = blind)
    saw_judge_verdict: bool
    source: LabelSource = LabelSource.REVIEW
    role: str = "reviewer"


def answer_of_result(result: RowResult) -> Answer | None:
    """The judge's answer for a stored row; ``None`` for a row without a verdict (JUDGE_ERROR)."""
    if result.status is RowStatus.JUDGE_ERROR:
        return None
    return Answer(
        result.row_id,
        result.intent_key,
        {b.requirement_id: LabelStatus(str(b.status)) for b in result.reference_basis},
        frozenset(result.red_flag_types),
        result.final_score,
        evidence={
            b.requirement_id: tuple(b.evidence_turns)
            for b in result.reference_basis
            if b.evidence_turns
        },
    )


def answers_of_labels(labels: Iterable[Label]) -> dict[tuple[str, str], Answer]:
    """Each (rowId, reviewer)'s answer from their current labels, in first-seen order.

    Args:
        labels: current labels (superseded ones left out), of one task's rows.
    """
    grouped: dict[tuple[str, str], list[Label]] = {}
    for lab in labels:
        grouped.setdefault((lab.row_id, lab.reviewer), []).append(lab)
    out: dict[tuple[str, str], Answer] = {}
    for key, labs in grouped.items():
        statuses = {
            lab.requirement_id: lab.status
            for lab in labs
            if lab.requirement_id is not None and lab.status is not None
        }
        row_level = [lab for lab in labs if lab.requirement_id is None] or labs
        last = row_level[-1]
        evidence = {
            lab.requirement_id: lab.evidence_turns
            for lab in labs
            if lab.requirement_id is not None and lab.evidence_turns
        }
        reasons = {
            lab.requirement_id: lab.reason
            for lab in labs
            if lab.requirement_id is not None and lab.reason
        }
        out[key] = Answer(
            key[0],
            last.intent_key,
            statuses,
            frozenset(last.red_flag_types or ()),
            None if last.score is None else int(last.score),
            last.reason if last.requirement_id is None else None,
            evidence,
            reasons,
        )
    return out


def differences(first: Answer, second: Answer) -> list[str]:
    """What two answers disagree on, as short texts (empty = they agree).

    Requirements only one answer covers (another intent's) are not compared; a different
    intent is itself a difference.
    """
    found = []
    if first.intent_key != second.intent_key:
        found.append(f"intent {first.intent_key} → {second.intent_key}")
    if first.score != second.score:
        found.append(f"score {first.score} → {second.score}")
    if first.red_flag_types != second.red_flag_types:
        a = ", ".join(sorted(first.red_flag_types)) or "none"
        b = ", ".join(sorted(second.red_flag_types)) or "none"
        found.append(f"red flags {a} → {b}")
    for rid, status in first.statuses.items():
        other = second.statuses.get(rid)
        if other is not None and other is not status:
            found.append(f"{rid} {status} → {other}")
    return found


def applicable(
    rubric: EvalRubric, intent_key: str | None, case: Sequence[HardRequirement]
) -> tuple[HardRequirement, ...]:
    """Common requirements, the intent's, then the row's case-level ones (docs/protocol.md §6)."""
    pack = (
        rubric.common_requirements
        if intent_key is None
        else rubric.applicable_requirements(intent_key)
    )
    return (*pack, *case)


#: the form's value for a requirement the reviewer explicitly did not check: no label
NOT_CHECKED = "NOT_CHECKED"


def cited_turns(text: str, turn_count: int) -> tuple[int, ...] | None:
    """``"3, 7"`` → ``(3, 7)``; ``None`` when a part is not a turn of the dialogue."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not all(p.isdigit() and int(p) < turn_count for p in parts):
        return None
    return tuple(dict.fromkeys(int(p) for p in parts))


def form_value(form: Mapping[str, str | Sequence[str]], name: str) -> str:
    value = form.get(name, "")
    return (value if isinstance(value, str) else (value[-1] if value else "")).strip()


def row_fields(
    form: Mapping[str, str | Sequence[str]], rubric: EvalRubric, problems: list[str]
) -> tuple[str | None, int | None, set[str]]:
    """The form's intent, score and red-flag types; each problem is appended."""
    intent = form_value(form, "intent")
    intent_key = intent if intent in rubric.intents_by_key else None
    if intent_key is None:
        problems.append(f"intent {intent!r}: choose one of {', '.join(rubric.intents_by_key)}")
    scale = rubric.score_scale
    score_text = form_value(form, "score")
    score: int | None = None
    if score_text.lstrip("-").isdigit() and scale.min <= int(score_text) <= scale.max:
        score = int(score_text)
    else:
        problems.append(f"score {score_text!r}: give an integer from {scale.min} to {scale.max}")
    raw_flags = form.get("flag", ())
    flags = {raw_flags} if isinstance(raw_flags, str) else set(raw_flags)
    unknown_flags = sorted(flags - set(rubric.red_flag_types))
    if unknown_flags:
        problems.append(
            f"red flag(s) {', '.join(unknown_flags)}: valid types are "
            f"{', '.join(rubric.red_flag_types)}"
        )
    return intent_key, score, flags


def answer_from_form(
    form: Mapping[str, str | Sequence[str]],
    row_id: str,
    rubric: EvalRubric,
    case: Sequence[HardRequirement],
    turn_count: int = 0,
) -> Answer:
    """Read a submitted review form. Nothing is presumed: every question must be answered.

    Fields: ``intent`` (an intent key), ``score`` (an integer on the scale), ``flag`` (zero or
    more red-flag types), ``status.<REQUIREMENT_ID>`` for each observable requirement that
    applies under the chosen intent — a :class:`LabelStatus`, or :data:`NOT_CHECKED` (the
    reviewer did not check it: no label) —, ``evidence.<REQUIREMENT_ID>`` (optional turn
    numbers from 0 to ``turn_count - 1``, e.g. ``"3, 7"``), ``reason.<REQUIREMENT_ID>`` (why
    that status, optional), ``reason`` (about the row, optional). A red line marked VIOLATED
    adds its red-flag type, the way the normalizer backfills the judge's (docs/protocol.md §8).
    A requirement with ``observableInData: false`` is not asked (no label: there is nothing in
    the data to check).

    Raises:
        InputError: every problem of the form at once — unanswered requirements listed by ID
            —, each naming the field and the valid choices.
    """
    problems: list[str] = []
    intent_key, score, flags = row_fields(form, rubric, problems)
    statuses: dict[str, LabelStatus] = {}
    evidence: dict[str, tuple[int, ...]] = {}
    reasons: dict[str, str] = {}
    unanswered: list[str] = []
    choices = ", ".join([*(s.value for s in LabelStatus), NOT_CHECKED])
    for req in applicable(rubric, intent_key, case):
        if not req.observable_in_data:
            continue
        given = form_value(form, f"status.{req.id}").upper()
        if given == NOT_CHECKED:
            continue
        if not given:
            unanswered.append(req.id)
            continue
        if given not in LabelStatus.__members__:
            problems.append(f"status.{req.id} {given!r}: choose one of {choices}")
            continue
        statuses[req.id] = LabelStatus(given)
        if statuses[req.id] is LabelStatus.VIOLATED and req.critical and req.red_flag_type:
            flags.add(req.red_flag_type)
        cited = cited_turns(form_value(form, f"evidence.{req.id}"), turn_count)
        if cited is None:
            problems.append(
                f"evidence.{req.id} {form_value(form, f'evidence.{req.id}')!r}: give turn numbers "
                f"from 0 to {turn_count - 1}, e.g. 3, 7"
            )
        elif cited:
            evidence[req.id] = cited
        if why := form_value(form, f"reason.{req.id}"):
            reasons[req.id] = why
    if unanswered:
        problems.insert(
            0,
            f"{len(unanswered)} requirement(s) not answered: {', '.join(unanswered)}; give "
            "each a status, or mark it not checked (x)",
        )
    if problems:
        raise InputError(f"review of row {row_id}: " + "; ".join(problems))
    reason = form_value(form, "reason") or None
    return Answer(row_id, intent_key, statuses, frozenset(flags), score, reason, evidence, reasons)


def labels_of_answer(answer: Answer, context: ReviewContext) -> list[Label]:
    """The labels one answer writes: a row label (intent, red flags, score, the row's reason)
    then one label per checked requirement with its own reason and evidence turns, each with
    the reviewer, rubric and blind flag. Times and ``supersedes`` are filled by
    :func:`rubric_engine.labels.store.append_labels`."""
    common = {
        "row_id": answer.row_id,
        "reviewer": context.reviewer,
        "role": context.role,
        "rubric_key": context.rubric_key,
        "rubric_version": context.rubric_version,
        "rubric_hash": context.rubric_hash,
        "saw_judge_verdict": context.saw_judge_verdict,
        "source": context.source,
        "task_id": context.task_id,
    }
    row = Label(
        intent_key=answer.intent_key,
        red_flag_types=tuple(sorted(answer.red_flag_types)),
        score=answer.score,
        reason=answer.reason,
        **common,
    )
    reqs = [
        Label(
            requirement_id=rid,
            status=status,
            evidence_turns=answer.evidence.get(rid, ()),
            reason=answer.reasons.get(rid),
            **common,
        )
        for rid, status in answer.statuses.items()
    ]
    return [row, *reqs]


def check_reason(
    answer: Answer,
    judge: Answer | None,
    saw_judge_verdict: bool,
    red_lines: Mapping[str, str] | None = None,
) -> None:
    """A change to a verdict the reviewer saw needs a reason where it was made: a requirement
    whose status differs from the judge's needs its own reason; a different intent or score
    needs the row's reason, and so does a different red-flag set unless each type that differs
    belongs to a red line whose change is explained.

    Args:
        red_lines: requirement ID → red-flag type, for the pack's red lines.

    Raises:
        InputError: a change without its reason; names each one.
    """
    if not saw_judge_verdict or judge is None:
        return
    changed = {
        rid: status
        for rid, status in answer.statuses.items()
        if rid in judge.statuses and judge.statuses[rid] is not status
    }
    missing = [
        f"{rid} {judge.statuses[rid]} → {status} (its reason)"
        for rid, status in changed.items()
        if not answer.reasons.get(rid)
    ]
    if not answer.reason:
        if answer.intent_key != judge.intent_key:
            missing.append(f"intent {judge.intent_key} → {answer.intent_key} (the row's reason)")
        if answer.score != judge.score:
            missing.append(f"score {judge.score} → {answer.score} (the row's reason)")
        explained = {
            flag
            for rid, flag in (red_lines or {}).items()
            if rid in changed and answer.reasons.get(rid)
        }
        if (answer.red_flag_types ^ judge.red_flag_types) - explained:
            a = ", ".join(sorted(judge.red_flag_types)) or "none"
            b = ", ".join(sorted(answer.red_flag_types)) or "none"
            missing.append(f"red flags {a} → {b} (the row's reason)")
    if missing:
        raise InputError(
            f"review of row {answer.row_id}: you changed what the judge said; say why: "
            + "; ".join(missing)
        )
