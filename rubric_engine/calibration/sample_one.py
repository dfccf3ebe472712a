"""Does sampling buy agreement? A sampled task's aggregate beside its first sample, each
against the same reviewers (docs/stability.md "Reading it"). Pure: no I/O.

Calibrating a task scored with ``--samples K`` counts, beside the aggregate, a second tally
where each sampled row's judge is judge 1's sample 1 alone (what one ask would have said);
a row that was not sampled, or whose aggregate is a judge error, is the same on both sides,
so the two are compared over the same rows and any difference comes from the sampled rows.
"""

from __future__ import annotations

from typing import Any

from rubric_engine.calibration.views import RowView
from rubric_engine.labels.model import LabelStatus
from rubric_engine.results.model import RowResult, RowStatus

__all__ = ["FIGURES", "first_sample_view", "side_by_side"]

#: (name, where in a calibration result, whether higher is better)
FIGURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("requirement kappa", ("overall", "kappa"), True),
    ("requirement accuracy", ("overall", "accuracy"), True),
    ("recall (TPR)", ("overall", "recallUnmet"), True),
    ("TNR", ("overall", "tnr"), True),
    ("F1 unmet", ("overall", "f1Unmet"), True),
    ("red-flag recall", ("redFlags", "overall", "recall"), True),
    ("red-flag precision", ("redFlags", "overall", "precision"), True),
    ("intent accuracy", ("intentAgreement", "accuracy"), True),
    ("score weighted kappa", ("scores", "weightedKappa"), True),
    ("score RMSE", ("scores", "rmse"), False),
)


def first_sample_view(result: RowResult, aggregate: RowView | None) -> RowView | None:
    """Judge 1's sample 1 of a sampled row as calibration views a judge; ``aggregate`` (the
    row's own view) for a row not sampled or whose aggregate is a judge error."""
    if aggregate is None or not result.samples:
        return aggregate
    first = next((s for s in result.samples if s.judge == 1 and s.sample == 1), None)
    if first is None or first.status is RowStatus.JUDGE_ERROR:
        return aggregate
    return RowView(
        result.row_id,
        {rid: LabelStatus(str(status)) for rid, status in first.statuses.items()},
        first.intent_key,
        frozenset(first.red_flag_types),
        None if first.final_score is None else float(first.final_score),
    )


def _at(result: dict[str, Any], path: tuple[str, ...]) -> Any:
    found: Any = result
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    return found


def side_by_side(aggregate: dict[str, Any], first: dict[str, Any], rows: int) -> dict[str, Any]:
    """The figures of both calibrations side by side (``difference``: aggregate − sample 1;
    ``better``: which side, ``None`` when equal or undefined).

    Args:
        rows: labelled rows whose judge view came from samples (the rest are equal).
    """
    figures = []
    for name, path, higher in FIGURES:
        a, s = _at(aggregate, path), _at(first, path)
        difference = None if a is None or s is None else round(a - s, 4)
        better = None
        if difference:
            better = "aggregate" if (difference > 0) == higher else "sample1"
        figures.append(
            {
                "name": name,
                "aggregate": a,
                "sample1": s,
                "difference": difference,
                "better": better,
            }
        )
    return {
        "sampledRows": rows,
        "pairs": {"aggregate": aggregate["overall"]["n"], "sample1": first["overall"]["n"]},
        "figures": figures,
    }
