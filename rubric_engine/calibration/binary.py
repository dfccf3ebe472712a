"""Binary agreement from a 2×2 confusion table, "unmet" the positive class (pure).

Each figure is ``None`` when its denominator is 0 (undefined), never a made-up 0 or 1.
Formulas: precision TP/(TP+FP); recall = TPR TP/(TP+FN); TNR TN/(TN+FP); F1 2TP/(2TP+FP+FN);
balanced accuracy (TPR+TNR)/2; MCC (TP·TN−FP·FN)/√((TP+FP)(TP+FN)(TN+FP)(TN+FN)) (Matthews
1975); Cohen's κ (p_o−p_e)/(1−p_e) with p_e from the two sides' marginals (Cohen 1960). They
match scikit-learn's functions of the same names where those are defined (the tests check it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Confusion", "binary_metrics", "confusion", "ratio"]


def ratio(num: float, den: float) -> float | None:
    """``num / den``, or ``None`` when ``den`` is 0."""
    return num / den if den else None


@dataclass(frozen=True)
class Confusion:
    """Counts of (reference, judge) pairs: ``tp`` both unmet, ``fn`` reference unmet and judge
    met (a missed violation), ``fp`` judge unmet and reference met, ``tn`` both met."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    def __add__(self, other: Confusion) -> Confusion:
        return Confusion(
            self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn
        )


def confusion(pairs: Iterable[tuple[bool, bool]]) -> Confusion:
    """Count ``(reference_unmet, judge_unmet)`` pairs."""
    tp = fp = fn = tn = 0
    for ref, judge in pairs:
        if ref and judge:
            tp += 1
        elif ref:
            fn += 1
        elif judge:
            fp += 1
        else:
            tn += 1
    return Confusion(tp, fp, fn, tn)


def kappa_from_counts(c: Confusion) -> float | None:
    """Cohen's κ of a 2×2 table; ``None`` when chance agreement is 1 (one class only)."""
    n = c.n
    if n == 0:
        return None
    p_o = (c.tp + c.tn) / n
    p_e = ((c.tp + c.fp) * (c.tp + c.fn) + (c.fn + c.tn) * (c.fp + c.tn)) / (n * n)
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def mcc_from_counts(c: Confusion) -> float | None:
    """Matthews correlation; ``None`` when a row or column of the table is empty."""
    den = (c.tp + c.fp) * (c.tp + c.fn) * (c.tn + c.fp) * (c.tn + c.fn)
    return (c.tp * c.tn - c.fp * c.fn) / math.sqrt(den) if den else None


def binary_metrics(c: Confusion) -> dict[str, float | int | None]:
    """Every figure of a 2×2 table, under the names reports and gates use.

    Returns:
        ``n, tp, fp, fn, tn, accuracy, precisionUnmet, recallUnmet, tnr, f1Unmet,
        balancedAccuracy, mcc, kappa``; rates in 0–1.
    """
    tpr, tnr = ratio(c.tp, c.tp + c.fn), ratio(c.tn, c.tn + c.fp)
    return {
        "n": c.n,
        "tp": c.tp,
        "fp": c.fp,
        "fn": c.fn,
        "tn": c.tn,
        "accuracy": ratio(c.tp + c.tn, c.n),
        "precisionUnmet": ratio(c.tp, c.tp + c.fp),
        "recallUnmet": tpr,
        "tnr": tnr,
        "f1Unmet": ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn),
        "balancedAccuracy": None if tpr is None or tnr is None else (tpr + tnr) / 2,
        "mcc": mcc_from_counts(c),
        "kappa": kappa_from_counts(c),
    }
