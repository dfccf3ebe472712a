"""Row-level agreement counted as rows stream in (pure): red flags, intents, scores, omissions.

Each tally keeps counts (and, for scores, the (reference, judge) pairs as a table of counts:
scores are whole points of a scale), never the rows, so memory does not grow with the task.
Row lists (missed and false flags, omissions) keep the first :data:`ROWS_LISTED` rows seen; the
counts beside them are complete.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.calibration.agreement import cohen_kappa
from rubric_engine.calibration.binary import ratio
from rubric_engine.calibration.intervals import wilson
from rubric_engine.calibration.scores import score_agreement
from rubric_engine.calibration.views import RowView, natural_key
from rubric_engine.labels.model import UNMET

__all__ = ["ROWS_LISTED", "FlagTally", "IntentTally", "OmissionTally", "ScoreTally"]

#: rows listed per missed/false flag type and for omissions (the counts are complete)
ROWS_LISTED = 100


def _interval(successes: int, trials: int) -> list[float] | None:
    found = wilson(successes, trials)
    return None if found is None else list(found)


def _listed(rows: list[str], row_id: str) -> None:
    if len(rows) < ROWS_LISTED:
        rows.append(row_id)


@dataclass
class FlagTally:
    """Red-flag presence per type on rows both sides speak for (see ``RowView.flag_scope``)."""

    types: Sequence[str] = ()
    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    missed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    false: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, ref: RowView, judge: RowView) -> None:
        if ref.red_flag_types is None or judge.red_flag_types is None:
            return
        scope = (
            ref.flag_scope
            if ref.flag_scope is not None
            else {*self.types, *ref.red_flag_types, *judge.red_flag_types}
        )
        for t in scope:
            mine, theirs = t in ref.red_flag_types, t in judge.red_flag_types
            key = "tp" if mine and theirs else "fn" if mine else "fp" if theirs else "tn"
            self.counts[t][key] += 1
            if key == "fn":
                _listed(self.missed[t], ref.row_id)
            elif key == "fp":
                _listed(self.false[t], ref.row_id)

    @staticmethod
    def _figures(c: Counter[str]) -> dict[str, Any]:
        return {
            "tp": c["tp"],
            "fn": c["fn"],
            "fp": c["fp"],
            "tn": c["tn"],
            "recall": ratio(c["tp"], c["tp"] + c["fn"]),
            "precision": ratio(c["tp"], c["tp"] + c["fp"]),
            "recallInterval95": _interval(c["tp"], c["tp"] + c["fn"]),
            "precisionInterval95": _interval(c["tp"], c["tp"] + c["fp"]),
        }

    def result(self) -> dict[str, Any]:
        total: Counter[str] = sum(self.counts.values(), Counter())
        ordered = [*self.types, *sorted(set(self.counts) - set(self.types))]
        return {
            "overall": self._figures(total),
            "types": [
                {
                    "type": t,
                    **self._figures(self.counts[t]),
                    "missedRows": sorted(self.missed[t], key=natural_key),
                    "falseRows": sorted(self.false[t], key=natural_key),
                }
                for t in ordered
                if t in self.counts
            ],
        }


@dataclass
class IntentTally:
    """Intent agreement: the confusion matrix of (reference, judge) intent keys."""

    matrix: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, ref: RowView, judge: RowView) -> None:
        if ref.intent_key and judge.intent_key:
            self.matrix[ref.intent_key][judge.intent_key] += 1

    def result(self) -> dict[str, Any]:
        pairs = [(a, b, n) for a, row in self.matrix.items() for b, n in row.items()]
        n = sum(count for *_, count in pairs)
        right = sum(count for a, b, count in pairs if a == b)
        ref = [a for a, _, count in pairs for _ in range(count)]
        judge = [b for _, b, count in pairs for _ in range(count)]
        return {
            "n": n,
            "accuracy": ratio(right, n),
            "accuracyInterval95": _interval(right, n),
            "kappa": cohen_kappa(ref, judge),
            "confusion": {a: dict(sorted(row.items())) for a, row in sorted(self.matrix.items())},
        }


@dataclass
class ScoreTally:
    """(reference score, judge score) pairs as counts of each pair of points."""

    scale: tuple[int, int] | None = None
    pairs: Counter[tuple[float, float]] = field(default_factory=Counter)

    def add(self, ref: RowView, judge: RowView) -> None:
        if ref.score is not None and judge.score is not None:
            self.pairs[(ref.score, judge.score)] += 1

    def result(self) -> dict[str, Any]:
        ordered = sorted(self.pairs.items())
        ref = [a for (a, _), n in ordered for _ in range(n)]
        judge = [b for (_, b), n in ordered for _ in range(n)]
        return score_agreement(ref, judge, self.scale)


@dataclass
class OmissionTally:
    """Rows where the reference found a violation and the judge listed nothing unmet."""

    found: int = 0
    omitted: int = 0
    rows: list[str] = field(default_factory=list)

    def add(self, ref: RowView, judge: RowView) -> None:
        if not any(s in UNMET for s in ref.statuses.values()):
            return
        self.found += 1
        if not any(s in UNMET for s in judge.statuses.values()):
            self.omitted += 1
            _listed(self.rows, ref.row_id)

    def result(self) -> dict[str, Any]:
        return {
            "rowsWithViolation": self.found,
            "omitted": self.omitted,
            "rate": ratio(self.omitted, self.found),
            "interval95": _interval(self.omitted, self.found),
            "rows": sorted(self.rows, key=natural_key),
        }
