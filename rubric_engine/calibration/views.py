"""One side's view of each row, from a task's judge results or from labels (pure).

A :class:`RowView` holds what calibration compares: per requirement a status, and the row's
intent, red-flag types and score. From labels, several reviewers of one row become one
reference view: an ``adjudication`` label wins; otherwise the first reviewer in the given
order (or in file order) who labelled that requirement. A reviewer's red flags are the types
they stated plus those of the red lines (critical requirements) they marked VIOLATED, the way
the normalizer backfills the judge's (docs/protocol.md §8).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rubric_engine.labels.model import Label, LabelSource, LabelStatus
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

__all__ = [
    "RowUnit",
    "RowView",
    "by_reviewer",
    "natural_key",
    "unit_of_labels",
    "view_of_labels",
    "view_of_result",
]


@dataclass(frozen=True)
class RowView:
    """One source's judgment of one row.

    Attributes:
        statuses: requirement ID → status (requirements the source did not judge are absent).
        red_flag_types: ``None`` = the source said nothing about red flags for this row.
    """

    row_id: str
    statuses: Mapping[str, LabelStatus] = field(default_factory=dict)
    intent_key: str | None = None
    red_flag_types: frozenset[str] | None = None
    score: float | None = None
    #: the red-flag types this view speaks for (``None`` = every type): a reviewer who stated no
    #: flags speaks only for the types of the red lines they labelled
    flag_scope: frozenset[str] | None = None


@dataclass(frozen=True)
class RowUnit:
    """Everything calibration compares on one labelled row.

    Attributes:
        reference: the reviewers' labels merged into one view (an adjudication wins).
        judge: the judge's view; ``None`` = no verdict to compare (a JUDGE_ERROR row, or a row
            the judge's file does not label).
        reviewers: each reviewer's own view, adjudications left out (agreement among
            reviewers, the alternative annotator test, the reviewers as the baseline).
        adjudicators: each adjudicator's view (adjudication labels), for the α that counts
            them as raters, reported on its own line.
        answer_chars: characters of the agent's replies, when the dialogue is known.
    """

    row_id: str
    reference: RowView
    judge: RowView | None
    reviewers: Mapping[str, RowView] = field(default_factory=dict)
    adjudicators: Mapping[str, RowView] = field(default_factory=dict)
    answer_chars: int | None = None


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the numbers inside IDs by value: ``R2`` before ``R10``."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part
    )


def view_of_result(result: RowResult) -> RowView | None:
    """The judge's view of a stored row; ``None`` for a JUDGE_ERROR row (no judgment)."""
    if result.status is RowStatus.JUDGE_ERROR:
        return None
    return RowView(
        result.row_id,
        {b.requirement_id: LabelStatus(str(b.status)) for b in result.reference_basis},
        result.intent_key,
        frozenset(result.red_flag_types),
        None if result.final_score is None else float(result.final_score),
    )


def _red_lines(rubric: EvalRubric | None) -> dict[str, str]:
    if rubric is None:
        return {}
    return {
        rid: req.red_flag_type
        for rid, req in rubric.requirements_by_id.items()
        if req.critical and req.red_flag_type
    }


def view_of_labels(
    labels: Iterable[Label], rubric: EvalRubric | None = None, order: Sequence[str] = ()
) -> dict[str, RowView]:
    """Merge labels into one view per row (see the module docstring for the rule).

    Args:
        labels: current labels (superseded ones already left out).
        rubric: to derive red flags from VIOLATED red lines; without it only stated flags count.
        order: reviewer precedence; reviewers not listed come after, in first-seen order.
    """
    every = list(labels)
    seen = list(dict.fromkeys([*order, *(lab.reviewer for lab in every)]))
    rank = {name: i for i, name in enumerate(seen)}
    every.sort(key=lambda lab: (lab.source is not LabelSource.ADJUDICATION, rank[lab.reviewer]))
    red_lines = _red_lines(rubric)
    rows: dict[str, dict[str, object]] = {}
    for lab in every:
        row = rows.setdefault(lab.row_id, {"statuses": {}, "flags": None, "derived": set()})
        statuses: dict[str, LabelStatus] = row["statuses"]  # type: ignore[assignment]
        if lab.requirement_id is not None and lab.status is not None:
            statuses.setdefault(lab.requirement_id, lab.status)
        for name, value in (
            ("intent", lab.intent_key),
            ("score", lab.score),
            ("flags", lab.red_flag_types),
        ):
            if value is not None and row.get(name) is None:
                row[name] = value
    out: dict[str, RowView] = {}
    for row_id, row in rows.items():
        statuses = row["statuses"]  # type: ignore[assignment]
        derived = {
            red_lines[rid]
            for rid, status in statuses.items()
            if status is LabelStatus.VIOLATED and rid in red_lines
        }
        stated: tuple[str, ...] | None = row.get("flags")  # type: ignore[assignment]
        flags = None if stated is None and not red_lines else {*(stated or ()), *derived}
        scope = (
            None
            if stated is not None
            else frozenset(red_lines[rid] for rid in statuses if rid in red_lines)
        )
        out[row_id] = RowView(
            row_id,
            dict(statuses),
            row.get("intent"),  # type: ignore[arg-type]
            None if flags is None else frozenset(flags),
            row.get("score"),  # type: ignore[arg-type]
            scope,
        )
    return out


def by_reviewer(
    labels: Iterable[Label], rubric: EvalRubric | None = None
) -> dict[str, dict[str, RowView]]:
    """One view per row for each reviewer separately (for agreement among reviewers)."""
    grouped: dict[str, list[Label]] = {}
    for lab in labels:
        grouped.setdefault(lab.reviewer, []).append(lab)
    return {name: view_of_labels(labs, rubric) for name, labs in grouped.items()}


def unit_of_labels(
    row_id: str,
    labels: Sequence[Label],
    judge: RowView | None,
    rubric: EvalRubric | None = None,
    order: Sequence[str] = (),
    answer_chars: int | None = None,
) -> RowUnit:
    """The unit of one row from all its current labels (several reviewers, adjudications)."""
    reviewed = [lab for lab in labels if lab.source is not LabelSource.ADJUDICATION]
    decided = [lab for lab in labels if lab.source is LabelSource.ADJUDICATION]
    return RowUnit(
        row_id,
        view_of_labels(labels, rubric, order)[row_id],
        judge,
        {name: views[row_id] for name, views in by_reviewer(reviewed, rubric).items()},
        {name: views[row_id] for name, views in by_reviewer(decided, rubric).items()},
        answer_chars,
    )
