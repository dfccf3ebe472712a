"""Chance-corrected agreement over categories (pure): Cohen's κ (unweighted, or quadratically
weighted for ordinal scores) and Krippendorff's α for any number of raters with gaps.

Cohen's κ: Cohen (1960); weighted κ: Cohen (1968), with weights w_ij = (i−j)²/(k−1)² as
scikit-learn's ``cohen_kappa_score(weights="quadratic")``. Krippendorff's α: Krippendorff,
"Computing Krippendorff's Alpha-Reliability" (2011): α = 1 − D_o/D_e over the coincidence
matrix of pairable values, with the nominal, ordinal and interval difference functions; this
matches the ``krippendorff`` package (the tests check both on random data). Own code because
scikit-learn (≈ 40 MB with its own compiled stack) would be a runtime dependency for two
20-line formulas.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from typing import Literal

__all__ = ["AlphaTally", "cohen_kappa", "krippendorff_alpha"]

Value = float | str


def cohen_kappa(
    reference: Sequence[Hashable],
    judge: Sequence[Hashable],
    *,
    categories: Sequence[Hashable] | None = None,
    weights: Literal["quadratic"] | None = None,
) -> float | None:
    """Cohen's κ between two equally long sequences of categories.

    Args:
        categories: the ordered category list (needed for ``weights="quadratic"``; default:
            the sorted union of the values seen).
        weights: ``None`` (unweighted) or ``"quadratic"`` (for ordinal values such as scores).

    Returns:
        κ in [−1, 1], or ``None`` when fewer than one pair or chance disagreement is 0.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(reference) != len(judge):
        raise ValueError(f"{len(reference)} reference values but {len(judge)} judge values")
    n = len(reference)
    if n == 0:
        return None
    cats = list(categories) if categories is not None else sorted({*reference, *judge}, key=str)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    observed = Counter((index[a], index[b]) for a, b in zip(reference, judge, strict=True))
    row = Counter(index[a] for a in reference)
    col = Counter(index[b] for b in judge)

    def weight(i: int, j: int) -> float:
        if weights == "quadratic":
            return (i - j) ** 2 / ((k - 1) ** 2) if k > 1 else 0.0
        return 0.0 if i == j else 1.0

    d_obs = sum(weight(i, j) * count for (i, j), count in observed.items()) / n
    d_exp = sum(weight(i, j) * row[i] * col[j] for i in row for j in col) / (n * n)
    return None if d_exp == 0 else 1 - d_obs / d_exp


class AlphaTally:
    """Krippendorff's coincidence matrix, built one unit at a time (a unit's values are all
    the raters' values for it; units with fewer than two are not pairable and add nothing)."""

    def __init__(self) -> None:
        self.coincidence: dict[tuple[Value, Value], float] = defaultdict(float)

    def add(self, values: Sequence[Value]) -> None:
        m = len(values)
        if m < 2:
            return
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    self.coincidence[(a, b)] += 1 / (m - 1)

    def alpha(self, level: Literal["nominal", "ordinal", "interval"] = "nominal") -> float | None:
        """α of the units added; ``None`` when fewer than two pairable values exist or all
        pairable values are equal (no expected disagreement)."""
        totals: dict[Value, float] = defaultdict(float)
        for (a, _), weight in self.coincidence.items():
            totals[a] += weight
        n = sum(totals.values())
        if n < 2:
            return None
        ordered: list[Value] = sorted(totals, key=lambda v: (isinstance(v, str), v))
        position = {v: i for i, v in enumerate(ordered)}

        def delta(a: Value, b: Value) -> float:
            if level == "nominal":
                return 0.0 if a == b else 1.0
            if level == "interval":
                return (float(a) - float(b)) ** 2
            lo, hi = sorted((position[a], position[b]))
            between = sum(totals[ordered[g]] for g in range(lo, hi + 1))
            return (between - (totals[a] + totals[b]) / 2) ** 2

        d_obs = sum(w * delta(a, b) for (a, b), w in self.coincidence.items())
        d_exp = sum(totals[a] * totals[b] * delta(a, b) for a in ordered for b in ordered) / (n - 1)
        return None if d_exp == 0 else 1 - d_obs / d_exp


def krippendorff_alpha(
    data: Sequence[Sequence[float | str | None]],
    level: Literal["nominal", "ordinal", "interval"] = "nominal",
) -> float | None:
    """Krippendorff's α of reliability data.

    Args:
        data: one sequence per rater, each of the same length (one entry per unit); ``None`` =
            that rater gave no value for that unit. Units with fewer than two values are not
            pairable and are left out. Ordinal and interval levels need numbers.

    Returns:
        α (1 = perfect agreement, 0 = chance, may be negative), or ``None`` when fewer than two
        pairable values exist or all pairable values are equal (no expected disagreement).

    Raises:
        ValueError: raters of different lengths.
    """
    if len({len(r) for r in data}) > 1:
        raise ValueError("every rater needs one entry per unit (None where it gave no value)")
    tally = AlphaTally()
    for u in range(len(data[0]) if data else 0):
        tally.add([v for r in data if (v := r[u]) is not None])
    return tally.alpha(level)
