"""Score agreement between reviewer and judge scores of the same rows (pure; scipy for the
correlations).

Pearson r, Spearman ρ and Kendall τ-b come from ``scipy.stats`` (``pearsonr``, ``spearmanr``,
``kendalltau``); RMSE √(mean((judge−ref)²)), the mean signed bias mean(judge−ref) (positive =
the judge is more lenient when higher is better) and the quadratically weighted κ
(:func:`~rubric_engine.calibration.agreement.cohen_kappa`) are computed here. These are the
figures of the LLM-Rubric baselines (Hashemi et al. 2024) that the tests reproduce.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rubric_engine.calibration.agreement import cohen_kappa

__all__ = ["score_agreement"]


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def score_agreement(
    reference: Sequence[float], judge: Sequence[float], scale: tuple[int, int] | None = None
) -> dict[str, float | int | None]:
    """Agreement of paired scores.

    Args:
        reference / judge: equally long; one pair per row both scored.
        scale: the pack's (min, max); the weighted κ's categories. Without it, the integers
            between the lowest and highest value seen.

    Returns:
        ``n, pearson, spearman, kendall, rmse, meanSignedBias, weightedKappa``; a correlation
        of a constant side is ``None``, ``weightedKappa`` is ``None`` unless every score is an
        integer.
    """
    n = len(reference)
    out: dict[str, float | int | None] = {"n": n}
    if n == 0:
        return {
            **out,
            **dict.fromkeys(
                ("pearson", "spearman", "kendall", "rmse", "meanSignedBias", "weightedKappa")
            ),
        }
    diffs = [j - r for r, j in zip(reference, judge, strict=True)]
    out["rmse"] = math.sqrt(sum(d * d for d in diffs) / n)
    out["meanSignedBias"] = sum(diffs) / n
    constant = len(set(reference)) < 2 or len(set(judge)) < 2
    if n < 2 or constant:
        out.update(pearson=None, spearman=None, kendall=None)
    else:
        import warnings

        from scipy import stats

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["pearson"] = _finite(stats.pearsonr(judge, reference).statistic)
            out["spearman"] = _finite(stats.spearmanr(judge, reference).statistic)
            out["kendall"] = _finite(stats.kendalltau(judge, reference).statistic)
    integers = all(float(v).is_integer() for v in (*reference, *judge))
    if integers:
        lo, hi = scale or (int(min(*reference, *judge)), int(max(*reference, *judge)))
        cats = list(range(lo, hi + 1))
        out["weightedKappa"] = cohen_kappa(
            [int(v) for v in reference],
            [int(v) for v in judge],
            categories=cats,
            weights="quadratic",
        )
    else:
        out["weightedKappa"] = None
    return out
