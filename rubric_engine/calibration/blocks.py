"""Requirement pairs and their 2×2 blocks, counted as rows stream in (pure given the seed).

A (row, requirement) pair is compared when both sides give it FOLLOWED, PARTIAL or VIOLATED;
"unmet" (PARTIAL or VIOLATED) is the positive class. NOT_APPLICABLE or UNSURE on either side,
and requirements only one side judged, are outside every denominator and counted under
``excluded``. A block holds the counts and figures of :mod:`.binary`, Wilson intervals of its
rates and, for the overall and per-requirement blocks, bootstrap intervals of κ and F1 drawn
from the counts (:func:`.intervals.bootstrap_intervals`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.calibration.binary import Confusion, binary_metrics
from rubric_engine.calibration.intervals import bootstrap_intervals, wilson
from rubric_engine.calibration.views import RowView
from rubric_engine.labels.model import UNMET, LabelStatus

__all__ = ["PairTally", "block", "unmet"]

_RATES: dict[str, Callable[[Confusion], tuple[int, int]]] = {  # rate → (successes, trials)
    "accuracy": lambda c: (c.tp + c.tn, c.n),
    "precisionUnmet": lambda c: (c.tp, c.tp + c.fp),
    "recallUnmet": lambda c: (c.tp, c.tp + c.fn),
    "tnr": lambda c: (c.tn, c.tn + c.fp),
}


def unmet(status: LabelStatus | None) -> bool | None:
    """True for VIOLATED/PARTIAL, False for FOLLOWED, None outside the comparison."""
    if status in UNMET:
        return True
    return False if status is LabelStatus.FOLLOWED else None


def block(c: Confusion, seed: int, boot: bool = True) -> dict[str, Any]:
    """The figures of one 2×2 table with their 95% intervals (``intervals95``)."""
    out: dict[str, Any] = binary_metrics(c)
    intervals: dict[str, Any] = {}
    for name, parts in _RATES.items():
        interval = wilson(*parts(c))
        intervals[name] = None if interval is None else list(interval)
    if boot:
        ci = bootstrap_intervals(c, seed=seed)
        intervals["kappa"] = None if ci["kappa"] is None else list(ci["kappa"])
        intervals["f1Unmet"] = None if ci["f1Unmet"] is None else list(ci["f1Unmet"])
    out["intervals95"] = intervals
    return out


def _cell(c: Confusion, ref: bool, judge: bool) -> Confusion:
    if ref and judge:
        return Confusion(c.tp + 1, c.fp, c.fn, c.tn)
    if ref:
        return Confusion(c.tp, c.fp, c.fn + 1, c.tn)
    if judge:
        return Confusion(c.tp, c.fp + 1, c.fn, c.tn)
    return Confusion(c.tp, c.fp, c.fn, c.tn + 1)


@dataclass
class PairTally:
    """2×2 counts overall, per requirement, per intent and per category, and what was left out.

    ``category_of`` maps a requirement ID to its category (the rubric's, ``CASE`` for
    case-level IDs); a row's intent is the reference's, else the judge's, else ``(none)``.
    """

    category_of: Callable[[str], str]
    overall: Confusion = field(default_factory=Confusion)
    requirements: dict[str, Confusion] = field(default_factory=lambda: defaultdict(Confusion))
    intents: dict[str, Confusion] = field(default_factory=lambda: defaultdict(Confusion))
    categories: dict[str, Confusion] = field(default_factory=lambda: defaultdict(Confusion))
    excluded: Counter[str] = field(default_factory=Counter)
    rows_compared: int = 0

    def add(self, reference: RowView, judge: RowView) -> None:
        """Every requirement the reference judged on one row."""
        intent = reference.intent_key or judge.intent_key or "(none)"
        compared = False
        for rid, kind, ref, theirs in self._pairs(reference, judge):
            if kind is not None:
                self.excluded[kind] += 1
                continue
            compared = True
            self.overall = _cell(self.overall, ref, theirs)
            self.requirements[rid] = _cell(self.requirements[rid], ref, theirs)
            self.intents[intent] = _cell(self.intents[intent], ref, theirs)
            category = self.category_of(rid)
            self.categories[category] = _cell(self.categories[category], ref, theirs)
        self.rows_compared += compared

    @staticmethod
    def _pairs(reference: RowView, judge: RowView) -> Iterator[tuple[str, str | None, bool, bool]]:
        """``(requirement, why excluded or None, reference unmet, judge unmet)``."""
        for rid, status in reference.statuses.items():
            theirs = judge.statuses.get(rid)
            if theirs is None:
                yield rid, "notJudgedByJudge", False, False
                continue
            a, b = unmet(status), unmet(theirs)
            if status is LabelStatus.UNSURE or theirs is LabelStatus.UNSURE:
                yield rid, "unsure", False, False
            elif a is None and b is None:
                yield rid, "bothNotApplicable", False, False
            elif a is None or b is None:
                yield rid, "applicabilityDisagreements", False, False
            else:
                yield rid, None, a, b
