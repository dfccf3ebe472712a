"""Which rows a reviewer is shown next: queues are drawn by strategy (docs/review.md). Pure.

A row needs ``reviewers_per_row`` reviewers, one more when it is in the second-review sample
(a second expert re-checks a share of the set, default 20%) or when a reviewer
disagreed with the judge (an override is re-checked before it counts). A reviewer is offered
the rows that still need reviewers, that they have not answered and that nobody else holds a
live claim on; rows already answered by someone come first (they close out), then the
strategy's order:

- ``disagreement``: rows where reviewers disagree with the judge or each other, or where other
  judge runs of the same rows disagree with this one;
- ``red-flag``: rows the judge or a reviewer gave a red flag;
- ``low-score``: scored rows, lowest final score first;
- ``rare``: rows whose unmet requirements are the least often unmet in the task, rarest first;
- ``random``: every row, shuffled by a seeded hash within each intent and drawn from the
  intents in turn (stratified), so a small queue covers every intent.

Rows where two reviewers disagree and no adjudication came after them are listed by
:func:`adjudication_rows`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from rubric_engine.errors import ConfigurationError
from rubric_engine.labels.model import UNMET, Label, LabelSource
from rubric_engine.results.model import RowResult
from rubric_engine.review.answers import (
    Answer,
    answer_of_result,
    answers_of_labels,
    differences,
)

Strategy = Literal["disagreement", "red-flag", "low-score", "rare", "random"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
#: a second expert re-checks a 20% sample of the set before it is locked (docs/review.md)
DEFAULT_SECOND_REVIEW_SHARE = 0.2

__all__ = [
    "DEFAULT_SECOND_REVIEW_SHARE",
    "STRATEGIES",
    "QueuePolicy",
    "RowReviews",
    "adjudication_rows",
    "build_queue",
    "check_strategy",
    "row_reviews",
]


def check_strategy(name: str) -> Strategy:
    """Raises: ConfigurationError: not one of :data:`STRATEGIES` (they are listed)."""
    if name not in STRATEGIES:
        raise ConfigurationError(
            f"queue strategy {name!r} is not valid; use one of {', '.join(STRATEGIES)}"
        )
    return name  # type: ignore[return-value]


@dataclass(frozen=True)
class QueuePolicy:
    """How many reviewers a row needs and how the sample is drawn.

    Attributes:
        reviewers_per_row: N ≥ 1 reviewers for every row.
        second_review_share: 0–1, the share of rows (drawn by a seeded hash of the rowId)
            that get one more reviewer.
        seed: makes the sample and the ``random`` order repeatable; another seed, another draw.
    """

    reviewers_per_row: int = 1
    second_review_share: float = DEFAULT_SECOND_REVIEW_SHARE
    seed: int = 0

    def __post_init__(self) -> None:
        if self.reviewers_per_row < 1:
            raise ConfigurationError("--reviewers-per-row must be at least 1")
        if not 0 <= self.second_review_share <= 1:
            raise ConfigurationError("--second-review must be a share from 0 to 1, e.g. 0.2")


def _draw(seed: int, text: str) -> float:
    """A repeatable number in [0, 1) for ``text`` (no random state)."""
    digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class RowReviews:
    """Everything known about one row's reviews."""

    result: RowResult
    judge: Answer | None
    #: reviewer → their current review answer (adjudications excluded), in first-seen order
    reviews: dict[str, Answer] = field(default_factory=dict)
    in_sample: bool = False
    #: a reviewer's answer differs from the judge's
    overridden: bool = False
    #: two reviewers' answers differ
    disputed: bool = False
    #: an adjudication label came after every review label of the row
    adjudicated: bool = False

    def needed(self, policy: QueuePolicy) -> int:
        """How many reviewers this row needs."""
        extra = 1 if self.in_sample or self.overridden else 0
        return policy.reviewers_per_row + extra


def row_reviews(
    results: Sequence[RowResult], labels: Sequence[Label], policy: QueuePolicy
) -> list[RowReviews]:
    """Each row with its reviews, in input order.

    Args:
        results: the task's rows.
        labels: the current labels of the task's rows, in insertion order.
    """
    reviews = answers_of_labels(lab for lab in labels if lab.source is not LabelSource.ADJUDICATION)
    last_review: dict[str, int] = {}
    last_adjudication: dict[str, int] = {}
    for i, lab in enumerate(labels):
        target = last_adjudication if lab.source is LabelSource.ADJUDICATION else last_review
        target[lab.row_id] = i
    by_row: dict[str, dict[str, Answer]] = {}
    for (row_id, reviewer), answer in reviews.items():
        by_row.setdefault(row_id, {})[reviewer] = answer
    out = []
    for result in results:
        judge = answer_of_result(result)
        mine = by_row.get(result.row_id, {})
        answers = list(mine.values())
        out.append(
            RowReviews(
                result,
                judge,
                mine,
                in_sample=_draw(policy.seed, "second:" + result.row_id)
                < policy.second_review_share,
                overridden=judge is not None and any(differences(judge, a) for a in answers),
                disputed=any(
                    differences(a, b) for i, a in enumerate(answers) for b in answers[i + 1 :]
                ),
                adjudicated=last_adjudication.get(result.row_id, -1)
                > last_review.get(result.row_id, -1),
            )
        )
    return out


def _judges_disagree(row: RowReviews, others: Mapping[str, Sequence[Answer]]) -> bool:
    if row.judge is None:
        return bool(others.get(row.result.row_id))
    return any(differences(row.judge, other) for other in others.get(row.result.row_id, ()))


def _ordered(
    rows: list[RowReviews],
    strategy: Strategy,
    policy: QueuePolicy,
    other_judges: Mapping[str, Sequence[Answer]],
) -> list[RowReviews]:
    if strategy == "disagreement":
        return [r for r in rows if r.overridden or r.disputed or _judges_disagree(r, other_judges)]
    if strategy == "red-flag":
        return [
            r
            for r in rows
            if r.result.red_flag_types or any(a.red_flag_types for a in r.reviews.values())
        ]
    if strategy == "low-score":
        scored = [r for r in rows if r.result.final_score is not None]
        return sorted(scored, key=lambda r: r.result.final_score or 0)
    if strategy == "rare":
        unmet = Counter(
            b.requirement_id
            for r in rows
            for b in r.result.reference_basis
            if str(b.status) in UNMET
        )

        def rarest(r: RowReviews) -> int:
            return min(
                (
                    unmet[b.requirement_id]
                    for b in r.result.reference_basis
                    if str(b.status) in UNMET
                ),
                default=0,
            )

        return sorted((r for r in rows if rarest(r)), key=rarest)
    # random, stratified by intent: a seeded shuffle per intent, then one from each in turn
    strata: dict[str, list[RowReviews]] = {}
    for r in rows:
        strata.setdefault(r.result.intent_key or "(no intent)", []).append(r)
    for key in strata:
        strata[key].sort(key=lambda r: _draw(policy.seed, "order:" + r.result.row_id))
    out: list[RowReviews] = []
    for depth in range(max((len(s) for s in strata.values()), default=0)):
        out += [s[depth] for _, s in sorted(strata.items()) if depth < len(s)]
    return out


def build_queue(
    rows: Sequence[RowReviews],
    reviewer: str,
    strategy: Strategy,
    policy: QueuePolicy,
    *,
    claimed_by_others: frozenset[str] = frozenset(),
    other_judges: Mapping[str, Sequence[Answer]] | None = None,
) -> list[RowReviews]:
    """The rows ``reviewer`` should review next, first one first.

    Args:
        rows: from :func:`row_reviews`.
        claimed_by_others: rowIds another reviewer holds a live claim on.
        other_judges: rowId → other judge runs' answers for the same row (``disagreement``).

    Returns:
        Rows the reviewer has not answered, that need more reviewers and are not claimed by
        someone else: rows somebody already answered first, then the strategy's order.
    """
    open_rows = [
        r
        for r in rows
        if reviewer not in r.reviews
        and len(r.reviews) < r.needed(policy)
        and r.result.row_id not in claimed_by_others
    ]
    ordered = _ordered(open_rows, strategy, policy, other_judges or {})
    return sorted(ordered, key=lambda r: not r.reviews)  # stable: strategy order within


def adjudication_rows(rows: Sequence[RowReviews]) -> list[RowReviews]:
    """Rows where reviewers disagree and no adjudication has settled them since, in input
    order (docs/review.md: disagreements are settled before a set is locked)."""
    return [r for r in rows if r.disputed and not r.adjudicated]
