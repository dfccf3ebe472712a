"""The report's ``panel`` section: how far a panel's judges agreed with each other
(docs/panels.md "Reading it").

Only a task whose rows were judged by more than one judge has one. Fed one row at a time
(:meth:`PanelCounts.add`), it keeps counters only. On each row that scored, a judge's own
verdict is the vote of its own samples (with ``--samples 1``, its one answer): per
requirement the majority status among its samples that gave one, a tie going to the stricter
status (:data:`~rubric_engine.results.samples.STRICTNESS`), and the lower median of its final
scores. Figures:

- per judge: the rows it scored and its mean final score;
- per requirement: the rows every judge gave it a status, and the share of those where all
  gave the same (``agreement``);
- per pair of judges: the (row, requirement) pairs both gave a status, the share they agree
  on, Cohen's κ over them (:func:`cohen_kappa`; ``None`` when undefined), and the share of
  their common rows with the same final score.

Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import combinations

from rubric_engine.report.model import PanelJudge, PanelPair, PanelRequirement, PanelSection
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus, SampleSummary
from rubric_engine.results.samples import STRICTNESS, lower_median

__all__ = ["PanelCounts", "cohen_kappa", "judge_verdicts"]

S = RequirementStatus
Pair = tuple[RequirementStatus, RequirementStatus]


def cohen_kappa(pairs: Counter[Pair]) -> float | None:
    """Cohen's κ of two raters from ``pairs`` ((rater 1's status, rater 2's) → count):
    (observed agreement − chance agreement) / (1 − chance agreement), chance from each
    rater's own share of each status. ``None`` when undefined: no pairs, or chance agreement
    1 (both raters gave one and the same status throughout)."""
    n = sum(pairs.values())
    if not n:
        return None
    observed = sum(c for (a, b), c in pairs.items() if a is b) / n
    first, second = Counter[S](), Counter[S]()
    for (a, b), c in pairs.items():
        first[a] += c
        second[b] += c
    chance = sum(first[s] * second[s] for s in first) / (n * n)
    if chance >= 1:
        return None
    return (observed - chance) / (1 - chance)


def judge_verdicts(
    samples: Sequence[SampleSummary],
) -> dict[int, tuple[dict[str, S], int | None]]:
    """Each judge's own verdict on a row: judge → (requirement → its samples' majority
    status, a tie to the stricter; the lower median of their final scores)."""
    by_judge: dict[int, list[SampleSummary]] = {}
    for sample in samples:
        by_judge.setdefault(sample.judge, []).append(sample)
    out: dict[int, tuple[dict[str, S], int | None]] = {}
    for judge, own in by_judge.items():
        votes: dict[str, Counter[S]] = {}
        for sample in own:
            for rid, status in sample.statuses.items():
                votes.setdefault(rid, Counter())[status] += 1
        statuses = {
            rid: max(tally, key=lambda st: (tally[st], STRICTNESS[st]))
            for rid, tally in votes.items()
        }
        finals = [s.final_score for s in own if s.final_score is not None]
        out[judge] = (statuses, lower_median(finals) if finals else None)
    return out


class PanelCounts:
    """The section of the rows added so far."""

    def __init__(self) -> None:
        self.rows = 0  # scored rows judged by more than one judge
        self._judge_rows: Counter[int] = Counter()
        self._judge_scores: Counter[int] = Counter()
        self._req_rows: Counter[str] = Counter()
        self._req_agree: Counter[str] = Counter()
        self._pairs: dict[tuple[int, int], Counter[Pair]] = {}
        self._pair_rows: Counter[tuple[int, int]] = Counter()
        self._pair_same: Counter[tuple[int, int]] = Counter()

    def add(self, result: RowResult) -> None:
        samples = result.samples
        if not samples or result.status is not RowStatus.SCORED:
            return
        verdicts = judge_verdicts(samples)
        if len(verdicts) < 2:
            return
        self.rows += 1
        judges = sorted(verdicts)
        for judge in judges:
            score = verdicts[judge][1]
            if score is not None:
                self._judge_rows[judge] += 1
                self._judge_scores[judge] += score
        common = set.intersection(*(set(verdicts[j][0]) for j in judges))
        for rid in common:
            self._req_rows[rid] += 1
            self._req_agree[rid] += len({verdicts[j][0][rid] for j in judges}) == 1
        for a, b in combinations(judges, 2):
            (first, score_a), (second, score_b) = verdicts[a], verdicts[b]
            pairs = self._pairs.setdefault((a, b), Counter())
            for rid in first.keys() & second.keys():
                pairs[(first[rid], second[rid])] += 1
            self._pair_rows[(a, b)] += 1
            self._pair_same[(a, b)] += score_a == score_b

    def section(self, models: Sequence[str] = ()) -> PanelSection | None:
        """The section (``models``: the judges' models in order, from the task); ``None`` when
        no row was judged by more than one judge."""
        if not self.rows:
            return None
        every = sum(self._req_rows.values())
        agreed = sum(self._req_agree.values())
        return PanelSection(
            rows=self.rows,
            judges=tuple(
                PanelJudge(
                    judge=j,
                    model=models[j - 1] if j <= len(models) else None,
                    rows=self._judge_rows[j],
                    mean_final_score=round(self._judge_scores[j] / self._judge_rows[j], 4)
                    if self._judge_rows[j]
                    else None,
                )
                for j in sorted({j for pair in self._pairs for j in pair})
            ),
            agreement=round(agreed / every, 4) if every else None,
            requirements=tuple(
                PanelRequirement(
                    requirement_id=rid,
                    rows=self._req_rows[rid],
                    agreement=round(self._req_agree[rid] / self._req_rows[rid], 4),
                )
                for rid in sorted(
                    self._req_rows, key=lambda r: (self._req_agree[r] / self._req_rows[r], r)
                )
            ),
            pairs=tuple(self._pair(pair) for pair in sorted(self._pairs)),
        )

    def _pair(self, pair: tuple[int, int]) -> PanelPair:
        counts = self._pairs[pair]
        items = sum(counts.values())
        kappa = cohen_kappa(counts)
        return PanelPair(
            judges=pair,
            items=items,
            agreement=round(sum(c for (a, b), c in counts.items() if a is b) / items, 4)
            if items
            else None,
            kappa=round(kappa, 4) if kappa is not None else None,
            same_score=round(self._pair_same[pair] / self._pair_rows[pair], 4),
        )
