"""The alternative annotator test: can the judge stand in for one of the reviewers? (pure)

Calderon, Reichart & Dror, "The Alternative Annotator Test for LLM-as-a-Judge: How to
Statistically Justify Replacing Human Annotators with LLMs" (ACL 2025); the procedure as
docs/calibration.md ("The alternative annotator test") states it:

1. An *instance* is compared when at least ``min_annotators`` (2) reviewers gave it a value
   and the judge gave one too.
2. Leave one reviewer out at a time. On each of its instances, score how well the judge and
   the left-out reviewer each align with the *remaining* reviewers: the share of them they
   match (``accuracy``, for categories) or the negative root mean squared difference
   (``neg_rmse``, for numbers). The judge "wins" the instance when it aligns at least as well,
   the reviewer when it does; a tie counts for both.
3. Per reviewer, the differences ``d = reviewer_wins − judge_wins`` (−1, 0 or 1) go into a
   one-sided one-sample t-test of H0: mean(d) ≥ ε against H1: mean(d) < ε
   (``scipy.stats.ttest_1samp(d, ε, alternative="less")``). ε is the cost–benefit margin the
   judge is granted (0.2 for expert reviewers, 0.15 skilled, 0.1 crowd workers).
   A reviewer with fewer than ``min_instances`` (30) instances is skipped and named.
4. The p-values of every test reported together (each field, requirement and red-flag type)
   are corrected with Benjamini–Yekutieli at q (0.05), ``scipy.stats.false_discovery_control``.
5. The winning rate ω is the share of tested reviewers whose null hypothesis is rejected; the
   judge passes when ω ≥ 0.5. The advantage probability ρ is the mean over tested reviewers of
   the share of instances the judge wins; it compares judges (higher is better).

Alignment is compared on exact integers (the count of remaining reviewers matched, or the sum
of squared differences), which orders instances exactly as the mean accuracy or the negative
RMSE do, ties included. A tally keeps counts only, so a test over a million instances holds a
few integers per reviewer.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_EPSILON",
    "DEFAULT_FDR_Q",
    "EPSILON_BY_EXPERTISE",
    "MIN_ANNOTATORS",
    "MIN_INSTANCES",
    "AltTestTally",
    "alt_test_results",
    "baseline_results",
]

Scoring = Literal["accuracy", "neg_rmse"]
#: the paper's rule of thumb for ε by who the reviewers are
EPSILON_BY_EXPERTISE = {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}
DEFAULT_EPSILON = EPSILON_BY_EXPERTISE["expert"]
DEFAULT_FDR_Q = 0.05
#: reviewers an instance needs (the left-out one and at least one to compare with)
MIN_ANNOTATORS = 2
#: instances a reviewer needs for the t-test's normality assumption (the paper's minimum)
MIN_INSTANCES = 30


@dataclass
class _Reviewer:
    """One left-out reviewer's counts: instances, judge wins, and the signs of d."""

    instances: int = 0
    judge_wins: int = 0
    reviewer_ahead: int = 0  # d = +1: the reviewer aligned strictly better
    judge_ahead: int = 0  # d = −1: the judge aligned strictly better
    #: sums of the paper's alignment scores (mean accuracy or negative RMSE against the
    #: remaining reviewers) of the left-out reviewer and of the judge: the reviewers-as-baseline
    #: figures (:func:`baseline_results`)
    reviewer_alignment: float = 0.0
    judge_alignment: float = 0.0


def _alignment(loss: float, others: int, scoring: Scoring) -> float:
    """The paper's alignment score from :func:`_loss`: mean accuracy or negative RMSE."""
    if scoring == "accuracy":
        return 1 - loss / others
    return -math.sqrt(loss / others)


def _loss(value: Any, others: Sequence[Any], scoring: Scoring) -> float:
    """Misalignment with the remaining reviewers; lower is better. For ``accuracy`` the count
    of those not matched, for ``neg_rmse`` the sum of squared differences: both order
    instances as the paper's mean accuracy and negative RMSE (same ``others`` on both sides)."""
    if scoring == "accuracy":
        return float(sum(1 for other in others if other != value))
    return float(sum((value - other) ** 2 for other in others))


@dataclass
class AltTestTally:
    """The counts of one alt-test (one field, or one requirement or red-flag type).

    Attributes:
        scoring: ``accuracy`` (categories, yes/no) or ``neg_rmse`` (numbers).
        min_annotators: reviewers an instance needs to be compared.
        instances: instances compared (with enough reviewers and a judge value).
    """

    scoring: Scoring = "accuracy"
    min_annotators: int = MIN_ANNOTATORS
    instances: int = 0
    reviewers: dict[str, _Reviewer] = field(default_factory=dict)

    def add(self, values: Mapping[str, Hashable], judge: Hashable | None) -> None:
        """One instance: each reviewer's value (reviewers without one are absent) and the
        judge's (``None`` = the judge gave none: the instance is not compared)."""
        if judge is None or len(values) < self.min_annotators:
            return
        self.instances += 1
        for name, mine in values.items():
            others = [v for other, v in values.items() if other != name]
            theirs, judges = _loss(mine, others, self.scoring), _loss(judge, others, self.scoring)
            counts = self.reviewers.setdefault(name, _Reviewer())
            counts.instances += 1
            counts.judge_wins += judges <= theirs
            counts.reviewer_ahead += theirs < judges
            counts.judge_ahead += judges < theirs
            counts.reviewer_alignment += _alignment(theirs, len(others), self.scoring)
            counts.judge_alignment += _alignment(judges, len(others), self.scoring)


def _p_value(counts: _Reviewer, epsilon: float) -> float | None:
    """The one-sided t-test's p-value; ``None`` when undefined (every d equal to ε, as all
    ties at ε = 0: the null hypothesis mean(d) ≥ ε holds exactly and is not rejected)."""
    import warnings

    import numpy as np
    from scipy.stats import ttest_1samp

    ties = counts.instances - counts.reviewer_ahead - counts.judge_ahead
    d = np.repeat([1, 0, -1], [counts.reviewer_ahead, ties, counts.judge_ahead])
    with warnings.catch_warnings():  # constant d: scipy warns, the p-value is still exact
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(ttest_1samp(d, epsilon, alternative="less").pvalue)
    return None if math.isnan(p) else p


def _rejected(p_values: Sequence[float | None], q: float) -> list[bool]:
    """Benjamini–Yekutieli at level q over all p-values (valid under any dependence); an
    undefined one counts in the number of tests and is never rejected (as 1 would be)."""
    if not p_values:
        return []
    from scipy.stats import false_discovery_control

    adjusted = false_discovery_control([1.0 if p is None else p for p in p_values], method="by")
    return [bool(a <= q) for a in adjusted]


def alt_test_results(
    tallies: Mapping[str, AltTestTally],
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_FDR_Q,
    min_instances: int = MIN_INSTANCES,
) -> dict[str, dict[str, Any]]:
    """The outcome of every test, one FDR correction over all of them (the paper's advice for
    several domains: correct over every comparison reported).

    Args:
        tallies: test name → its counts, in report order.
        epsilon: the cost–benefit margin ε in [0, 1).
        q: the Benjamini–Yekutieli level.
        min_instances: instances a reviewer needs to be tested (≥ 2: a t-test needs a variance).

    Returns:
        Test name → ``instances``, ``scoring``, ``epsilon``, ``winningRate`` ω and
        ``advantageProbability`` ρ (``None`` when no reviewer could be tested), ``passed``
        (ω ≥ 0.5, ``None`` when untested), ``reviewers`` (each tested one: ``reviewer``,
        ``instances``, ``pValue``, ``rejected``, ``advantageProbability``) and ``skipped``
        (reviewers below ``min_instances``: ``reviewer``, ``instances``).

    Raises:
        ValueError: ``min_instances`` below 2, or ε or q outside their ranges.
    """
    if min_instances < 2:
        raise ValueError(f"min_instances {min_instances} must be at least 2 (a t-test needs two)")
    if not 0 <= epsilon < 1 or not 0 < q < 1:
        raise ValueError(f"epsilon {epsilon} must be in [0, 1) and q {q} in (0, 1)")
    tested: list[tuple[str, str, _Reviewer, float | None]] = []
    for name, tally in tallies.items():
        for reviewer, counts in sorted(tally.reviewers.items()):
            if counts.instances >= min_instances:
                tested.append((name, reviewer, counts, _p_value(counts, epsilon)))
    rejected = _rejected([p for *_, p in tested], q)
    out: dict[str, dict[str, Any]] = {}
    for name, tally in tallies.items():
        rows: list[dict[str, Any]] = [
            {
                "reviewer": reviewer,
                "instances": counts.instances,
                "pValue": p,
                "rejected": rej,
                "advantageProbability": counts.judge_wins / counts.instances,
            }
            for (test, reviewer, counts, p), rej in zip(tested, rejected, strict=True)
            if test == name
        ]
        omega = sum(r["rejected"] for r in rows) / len(rows) if rows else None
        out[name] = {
            "instances": tally.instances,
            "scoring": tally.scoring,
            "epsilon": epsilon,
            "winningRate": omega,
            "advantageProbability": (
                sum(r["advantageProbability"] for r in rows) / len(rows) if rows else None
            ),
            "passed": None if omega is None else omega >= 0.5,
            "reviewers": rows,
            "skipped": [
                {"reviewer": reviewer, "instances": counts.instances}
                for reviewer, counts in sorted(tally.reviewers.items())
                if counts.instances < min_instances
            ],
        }
    return out


def baseline_results(tally: AltTestTally) -> dict[str, Any] | None:
    """The reviewers as the baseline of one test: each reviewer's agreement with the others
    (leave one out: the mean alignment score against the remaining reviewers), the judge's
    against the same reviewers on the same instances, and where the judge ranks.

    Returns:
        ``None`` with fewer than two reviewers compared; else ``reviewers`` (``reviewer``,
        ``instances``, ``agreement``, ``judgeAgreement``), ``judgeAgreement`` (the mean of the
        judge's figures), ``judgeRank`` (1 = above every reviewer; ties rank the judge first),
        ``raters`` (reviewers + the judge) and ``withinReviewers`` (the judge agrees at least
        as well as the least agreeing reviewer: inside the reviewers' own disagreement).
    """
    rows: list[dict[str, Any]] = [
        {
            "reviewer": name,
            "instances": counts.instances,
            "agreement": counts.reviewer_alignment / counts.instances,
            "judgeAgreement": counts.judge_alignment / counts.instances,
        }
        for name, counts in sorted(tally.reviewers.items())
        if counts.instances
    ]
    if len(rows) < 2:
        return None
    judge = sum(r["judgeAgreement"] for r in rows) / len(rows)
    return {
        "scoring": tally.scoring,
        "reviewers": rows,
        "judgeAgreement": judge,
        "judgeRank": 1 + sum(r["agreement"] > judge for r in rows),
        "raters": len(rows) + 1,
        "withinReviewers": judge >= min(r["agreement"] for r in rows),
    }


def tally_of(
    instances: Iterable[tuple[Mapping[str, Hashable], Hashable | None]],
    scoring: Scoring = "accuracy",
) -> AltTestTally:
    """A tally of ``(reviewer values, judge value)`` instances (for callers with lists)."""
    tally = AltTestTally(scoring)
    for values, judge in instances:
        tally.add(values, judge)
    return tally
