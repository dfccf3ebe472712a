"""The report's ``rules`` section: a task's rule checks as a ``DiagnosisEvalReport``
(docs/cases.md).

Only rows that carry rule checks are cases here. ``passRate`` is 0.0–1.0; the verifier
verdicts are counted with a missing one as ``"NONE"``; ``averageDurationMs`` averages the rows
whose trace records a duration (``None`` if none). Each result is the row's
:class:`~rubric_engine.results.model.RuleSummary`. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from rubric_engine.report.model import RulesSection
from rubric_engine.results.model import RowResult, RuleSummary

NO_VERDICT = "NONE"


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def rules_section(results: Iterable[RowResult]) -> RulesSection | None:
    """Aggregate the rows' rule summaries; ``None`` when no row has rule checks."""
    return rules_section_of([r.rules for r in results if r.rules is not None])


def rules_section_of(summaries: Sequence[RuleSummary]) -> RulesSection | None:
    """The section of the rows' rule summaries in input order (every one is in the section's
    ``results``); ``None`` when there are none."""
    if not summaries:
        return None
    passed = sum(1 for s in summaries if s.passed)
    verdicts = Counter(s.verdict or NO_VERDICT for s in summaries)
    durations = [s.duration_ms for s in summaries if s.duration_ms is not None]
    return RulesSection(
        total_cases=len(summaries),
        passed_cases=passed,
        pass_rate=round(passed / len(summaries), 4),
        verdict_distribution=dict(sorted(verdicts.items())),
        average_tool_call_count=round(
            sum(float(s.tool_call_count) for s in summaries) / len(summaries), 4
        ),
        average_duration_ms=_mean(durations),
        results=tuple(summaries),
    )
