"""A row's outcome for reports, diffs and gates: pass score, outcome, rounding (docs/reports.md).

**Pass** (the diagnosis cases' ``passed`` / ``passRate``, carried over to rubric scoring): a SCORED
row passes when it has no red flag and ``finalScore >= passScore``. ``passScore`` is one below
the top of the pack's scale (4 on 1–5; the top itself on a two-point scale) unless the caller
sets it. ``passRate = passed / scored``: JUDGE_ERROR rows have no outcome, so they are outside
this denominator like every other (docs/protocol.md §14) and are counted on their own; a CI gate
should bound ``judgeErrors`` next to ``passRate``.

A row's **outcome** is one of :data:`OUTCOMES`: ``RED_FLAG`` (any red flag, whatever the
score: red lines have their own bucket, docs/reports.md), ``PASS``, ``FAIL`` (scored below
``passScore``) or ``JUDGE_ERROR``. "Verdict" is kept for the judge's answer; the report's
``totals.verdictDistribution`` key keeps its old name for readers of ``report.json``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rubric_engine.report.model import RowOutcome
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

OUTCOMES: tuple[RowOutcome, ...] = ("PASS", "FAIL", "RED_FLAG", "JUDGE_ERROR")
#: the (snake_case) report field that counts each referenceBasis status
STATUS_FIELD = {
    RequirementStatus.FOLLOWED: "followed",
    RequirementStatus.PARTIAL: "partial",
    RequirementStatus.VIOLATED: "violated",
    RequirementStatus.NOT_APPLICABLE: "not_applicable",
}


def default_pass_score(rubric: EvalRubric) -> int:
    """One below the top of the scale (4 on 1–5); the top on a two-point scale."""
    scale = rubric.score_scale
    return scale.max - 1 if scale.max - scale.min >= 2 else scale.max


def checked_pass_score(rubric: EvalRubric, pass_score: int | None) -> int:
    """``pass_score`` (the default when ``None``), on the pack's scale.

    Raises:
        ConfigurationError: a pass score off the scale (every row would pass, or fail).
    """
    threshold = default_pass_score(rubric) if pass_score is None else pass_score
    scale = rubric.score_scale
    if not scale.min <= threshold <= scale.max:
        from rubric_engine.errors import ConfigurationError

        raise ConfigurationError(
            f"pass score {threshold} is outside the pack's scale {scale.min}..{scale.max}; "
            f"choose a value in that range"
        )
    return threshold


def row_outcome(result: RowResult, pass_score: int) -> RowOutcome:
    """``JUDGE_ERROR``, ``RED_FLAG``, ``PASS`` or ``FAIL`` (see the module docstring).

    A CHECKED row (``--judge none``) has no score: it passes when its rule checks do
    (``rules.passed``, docs/cases.md) and it has no red flag.
    """
    rules_passed = result.rules.passed if result.rules is not None else None
    return outcome_of(
        result.status, result.final_score, bool(result.red_flag_types), rules_passed, pass_score
    )


def outcome_of(
    status: RowStatus,
    final_score: int | None,
    red_flagged: bool,
    rules_passed: bool | None,
    pass_score: int,
) -> RowOutcome:
    """:func:`row_outcome` from the fields it reads (``rules_passed``: ``None`` without rule
    checks), for a reader that has them without the whole result (``rows.jsonl`` copied
    from the store)."""
    if status is RowStatus.CHECKED:
        if red_flagged:
            return "RED_FLAG"
        return "PASS" if rules_passed else "FAIL"
    if status is RowStatus.JUDGE_ERROR or final_score is None:
        return "JUDGE_ERROR"
    if red_flagged:
        return "RED_FLAG"
    return "PASS" if final_score >= pass_score else "FAIL"


@dataclass(frozen=True)
class Figures:
    """How a report rounds its means and ratios: to ``places`` decimals (4 in every written
    report), or not at all (``None``): a gate or a diff decides on the exact value (1,808 /
    2,009 = 0.89995 must fail ``passRate>=0.9``), then rounds what it shows."""

    places: int | None = 4

    def _rounded(self, value: float) -> float:
        return value if self.places is None else round(value, self.places)

    def mean(self, values: list[int]) -> float | None:
        """The mean, rounded; ``None`` when empty."""
        return self._rounded(sum(values) / len(values)) if values else None

    def mean_of(self, total: int, count: int) -> float | None:
        """The mean of ``count`` integers adding up to ``total``, rounded (the same float as
        :meth:`mean` of the list: an integer sum is exact); ``None`` when ``count`` is 0."""
        return self._rounded(total / count) if count else None

    def ratio(self, num: int, den: int) -> float | None:
        """``num / den``, rounded; ``None`` when ``den`` is 0."""
        return self._rounded(num / den) if den else None


#: the figures of every written report
ROUNDED = Figures(4)
#: unrounded figures, for gates and diffs
EXACT = Figures(None)


def mean(values: list[int]) -> float | None:
    """Mean rounded to 4 places; ``None`` when empty."""
    return ROUNDED.mean(values)


def ratio(num: int, den: int) -> float | None:
    """``num / den`` rounded to 4 places; ``None`` when ``den`` is 0."""
    return ROUNDED.ratio(num, den)
