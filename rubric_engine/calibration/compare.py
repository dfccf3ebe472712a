"""Compare a judge's row views with reference views held in dicts: the calibration result
(pure given the seed). The counting is :class:`~.tally.CalibrationTally`'s; this is its entry
for callers that hold both sides in memory (two label files, two tasks, the review app).

A (row, requirement) pair is compared when both sides give it FOLLOWED, PARTIAL or VIOLATED;
"unmet" (PARTIAL or VIOLATED) is the positive class. NOT_APPLICABLE or UNSURE on either side,
and requirements only one side judged, are outside every denominator and counted under
``excluded``. Rates carry Wilson intervals, κ and F1 seeded bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubric_engine.calibration.alt_fields import AltTestOptions
from rubric_engine.calibration.tally import CalibrationTally
from rubric_engine.calibration.views import RowUnit, RowView
from rubric_engine.rubric.model import EvalRubric

__all__ = ["calibrate_views"]


def calibrate_views(
    reference: Mapping[str, RowView],
    judge: Mapping[str, RowView],
    *,
    rubric: EvalRubric | None = None,
    judge_all: Mapping[str, RowView] | None = None,
    reviewers: Mapping[str, Mapping[str, RowView]] | None = None,
    adjudicators: Mapping[str, Mapping[str, RowView]] | None = None,
    half_width: float | None = None,
    seed: int = 0,
    alt_test: AltTestOptions | None = None,
) -> dict[str, Any]:
    """The calibration result of ``judge`` against ``reference`` (see the module docstring).

    Args:
        reference / judge: rowId → view. Rows only one side has are counted, not compared.
        rubric: requirement categories, red lines, intent order and score scale when known.
        judge_all: every judged row (the whole task), for the observed and corrected violation
            rates and the planner; default ``judge``.
        reviewers: reviewer → views (adjudications left out), for Krippendorff's α among
            reviewers and with the judge, the alternative annotator test and the reviewers as
            the baseline.
        adjudicators: adjudicator → views, for the α that counts them, on its own line.
        half_width: when given, add the label-count plan for intervals of ±half_width.
        seed: the bootstrap's seed.
        alt_test: the alternative annotator test's ε, q and minimum instances.

    Returns:
        A JSON-ready dict: ``overall``, ``requirements``, ``intents``, ``categories``,
        ``redFlags``, ``intentAgreement``, ``scores``, ``omission``, ``violationRate``,
        ``krippendorffAlpha``, ``excluded``, ``rows``, ``seed``; ``altTest`` and
        ``reviewerBaseline`` with two or more reviewers; ``plan`` with half_width.
    """
    tally = CalibrationTally(rubric, half_width=half_width, seed=seed, alt_test=alt_test)
    for view in (judge_all if judge_all is not None else judge).values():
        tally.observe(view)
    reviewers = reviewers or {}
    adjudicators = adjudicators or {}
    for row_id, ref in reference.items():
        tally.add(
            RowUnit(
                row_id,
                ref,
                judge.get(row_id),
                {name: views[row_id] for name, views in reviewers.items() if row_id in views},
                {name: views[row_id] for name, views in adjudicators.items() if row_id in views},
            )
        )
    return tally.result()
