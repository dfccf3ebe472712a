"""What the judge's measured error means for its figures (pure): the violation rate corrected
for misclassification, and how many labels a requirement needs.

Rogan & Gladen (1978): with observed rate p̂, sensitivity TPR and specificity TNR, the true
rate is (p̂ + TNR − 1)/(TPR + TNR − 1), clipped to [0, 1]; undefined when TPR + TNR ≤ 1 (the
judge is no better than chance). The planner uses the normal-approximation size of a binomial
interval, n = z²·p(1−p)/h² (the same size the Wilson interval reaches for p away from 0 and 1),
for both the positives (TPR) and the negatives (TNR), divided by the requirement's unmet share
to give the rows to label.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["MIN_PAIRS", "labels_needed", "rogan_gladen"]


def rogan_gladen(observed: float, tpr: float | None, tnr: float | None) -> float | None:
    """Violation rate corrected for the judge's error; ``None`` when undefined."""
    if tpr is None or tnr is None or tpr + tnr <= 1:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1) / (tpr + tnr - 1)))


def labels_needed(
    prevalence: float | None,
    half_width: float,
    *,
    tpr: float | None = None,
    tnr: float | None = None,
    level: float = 0.95,
) -> dict[str, int | float | bool | None]:
    """Labels one requirement needs so that its TPR and TNR intervals are ±``half_width``.

    Args:
        prevalence: the share of applicable rows where it is unmet (the judge's rate on the
            task is the planning value); ``None`` or 0 = too rare to measure.
        tpr / tnr: planning values (the measured ones); 0.5, the worst case, when unknown.

    Returns:
        ``{"positivesNeeded", "negativesNeeded", "labelsNeeded", "tooRare"}``; ``labelsNeeded``
        is ``None`` when the requirement is never unmet (no count of labels finds a positive).

    Raises:
        ValueError: ``half_width`` not in (0, 0.5].
    """
    if not 0 < half_width <= 0.5:
        raise ValueError(f"half-width {half_width} must be in (0, 0.5], e.g. 0.1")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)

    def size(p: float | None) -> int:
        q = 0.5 if p is None else p
        return max(1, math.ceil(z * z * q * (1 - q) / (half_width * half_width)))

    pos, neg = size(tpr), size(tnr)
    if not prevalence or prevalence >= 1:  # never (or always) unmet: no count finds both
        return {
            "positivesNeeded": pos,
            "negativesNeeded": neg,
            "labelsNeeded": None,
            "tooRare": True,
        }
    needed = max(math.ceil(pos / prevalence), math.ceil(neg / (1 - prevalence)))
    return {
        "positivesNeeded": pos,
        "negativesNeeded": neg,
        "labelsNeeded": needed,
        "tooRare": False,
    }


#: fewest compared pairs a figure is shown for: below this the planner's worst-case 95% interval
#: of a rate is wider than ±0.3 (z²·0.25/0.3² = 10.7), so text and Markdown say "too few"
MIN_PAIRS: int = math.ceil(NormalDist().inv_cdf(0.975) ** 2 * 0.25 / 0.3**2)
