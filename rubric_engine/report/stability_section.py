"""The report's ``stability`` section: how far a sampled task's samples agreed
(docs/stability.md "Reading it").

Only a task with sampled rows has one (a task of single asks keeps its ``report.json`` bytes).
Fed one row at a time (:meth:`StabilityCounts.add`), it keeps counters and at most
:data:`LISTED` unstable rows (most flips first). Figures:

- ``unstableRate``: unstable rows / sampled rows that scored;
- ``flipRate``: (row, requirement) pairs whose voting samples disagreed / pairs voted on;
- ``kappa``: Fleiss' κ of the requirement statuses across the samples, over the pairs every
  sample of the row judged (rows with the most common sample count); ``None`` when every
  status given is the same (κ is undefined then: nothing to agree by chance about);
- ``redFlagSplits`` / ``intentSplits``: rows with a ``RED_FLAG_SPLIT`` / ``INTENT_SPLIT``.

Pure.
"""

from __future__ import annotations

import heapq
from collections import Counter

from rubric_engine.report.model import StabilityRequirement, StabilityRow, StabilitySection
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus, WarningCode

__all__ = ["LISTED", "StabilityCounts", "fleiss_kappa"]

#: unstable rows listed by the section (the counts cover them all)
LISTED = 50
_STATUSES = tuple(RequirementStatus)


def fleiss_kappa(items: list[Counter[RequirementStatus]]) -> float | None:
    """Fleiss' κ of ``items`` (each: how many raters gave each status; all the same count of
    raters, at least 2); ``None`` when undefined (no items, or one status throughout)."""
    if not items:
        return None
    raters = sum(items[0].values())
    n = len(items)
    agreement = sum(
        (sum(c * c for c in item.values()) - raters) / (raters * (raters - 1)) for item in items
    )
    totals = Counter[RequirementStatus]()
    for item in items:
        totals.update(item)
    chance = sum((totals[s] / (n * raters)) ** 2 for s in _STATUSES)
    if chance >= 1:
        return None
    return (agreement / n - chance) / (1 - chance)


class StabilityCounts:
    """The section of the rows added so far."""

    def __init__(self) -> None:
        self.sampled = self.scored = self.unstable = self.failed = 0
        self.red_flag_splits = self.intent_splits = 0
        self.pairs = self.flipped = 0
        self.samples = 0
        self._req_pairs: Counter[str] = Counter()
        self._req_flips: Counter[str] = Counter()
        self._kappa: dict[int, list[Counter[RequirementStatus]]] = {}
        self._listed: list[tuple[int, int, StabilityRow]] = []  # min-heap (flips, -seq)

    def add(self, seq: int, result: RowResult) -> None:
        if not result.samples:
            return
        self.sampled += 1
        self.samples += len(result.samples)
        if result.status is not RowStatus.SCORED or result.stability is None:
            self.failed += int(result.status is RowStatus.JUDGE_ERROR)
            return
        self.scored += 1
        codes = {w.code for w in result.warnings}
        self.red_flag_splits += WarningCode.RED_FLAG_SPLIT in codes
        self.intent_splits += WarningCode.INTENT_SPLIT in codes
        stability = result.stability
        for entry in result.reference_basis:
            rid = entry.requirement_id
            self.pairs += 1
            self._req_pairs[rid] += 1
        self.flipped += len(stability.flips)
        self._req_flips.update(stability.flips)
        k = len(result.samples)
        if k > 1:
            votes = self._kappa.setdefault(k, [])
            for entry in result.reference_basis:
                given = [s.statuses.get(entry.requirement_id) for s in result.samples]
                if all(g is not None for g in given):
                    votes.append(Counter(g for g in given if g is not None))
        if stability.stable:
            return
        self.unstable += 1
        row = StabilityRow(
            row_id=result.row_id,
            final_score=result.final_score,
            scores=tuple(s.final_score for s in result.samples),
            reasons=stability.reasons,
            flips=stability.flips,
        )
        key = (len(stability.flips) + len(stability.reasons), -seq, row)
        if len(self._listed) < LISTED:
            heapq.heappush(self._listed, key)
        elif key[:2] > self._listed[0][:2]:
            heapq.heapreplace(self._listed, key)

    def section(self) -> StabilitySection | None:
        """The section; ``None`` when no row was sampled."""
        if not self.sampled:
            return None
        common = max(self._kappa, key=lambda k: len(self._kappa[k]), default=None)
        kappa = fleiss_kappa(self._kappa[common]) if common is not None else None
        requirements = sorted(
            (rid for rid in self._req_flips if self._req_flips[rid]),
            key=lambda rid: (-self._req_flips[rid] / self._req_pairs[rid], rid),
        )
        listed = sorted(self._listed, key=lambda k: (-k[0], -k[1]))
        return StabilitySection(
            sampled_rows=self.sampled,
            samples=self.samples,
            unstable_rows=self.unstable,
            unstable_rate=round(self.unstable / self.scored, 4) if self.scored else None,
            flip_rate=round(self.flipped / self.pairs, 4) if self.pairs else None,
            kappa=round(kappa, 4) if kappa is not None else None,
            red_flag_splits=self.red_flag_splits,
            intent_splits=self.intent_splits,
            rows_with_failed_sample=self.failed,
            requirements=tuple(
                StabilityRequirement(
                    requirement_id=rid,
                    rows=self._req_pairs[rid],
                    flips=self._req_flips[rid],
                    flip_rate=round(self._req_flips[rid] / self._req_pairs[rid], 4),
                )
                for rid in requirements
            ),
            unstable=tuple(k[2] for k in listed),
        )
