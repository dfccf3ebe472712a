"""The rule checks of a task in the shape of seed 001's ``DiagnosisEvalReport``. Pure.

::

    {totalCases, passedCases, passRate, verdictDistribution, averageToolCallCount,
     averageDurationMs, results: [DiagnosisEvalResult, …]}

Only rows that carry rule checks are cases here. ``passRate`` is 0.0–1.0 (``null`` without
cases); ``verdictDistribution`` counts the verifier verdicts, a missing one as ``"NONE"``;
``averageDurationMs`` averages the rows whose trace records a duration (``null`` if none).
Each result is the row's :class:`~rubric_engine.results.RuleSummary` as JSON.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rubric_engine.results import RowResult

NO_VERDICT = "NONE"


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def diagnosis_report(results: Iterable[RowResult]) -> dict[str, Any] | None:
    """Aggregate the rows' rule summaries; ``None`` when no row has rule checks."""
    summaries = [r.rules for r in results if r.rules is not None]
    if not summaries:
        return None
    passed = sum(1 for s in summaries if s.passed)
    verdicts = Counter(s.verdict or NO_VERDICT for s in summaries)
    durations = [s.duration_ms for s in summaries if s.duration_ms is not None]
    return {
        "totalCases": len(summaries),
        "passedCases": passed,
        "passRate": round(passed / len(summaries), 4),
        "verdictDistribution": dict(sorted(verdicts.items())),
        "averageToolCallCount": _mean([float(s.tool_call_count) for s in summaries]),
        "averageDurationMs": _mean(durations),
        "results": [s.to_json_dict() for s in summaries],
    }
