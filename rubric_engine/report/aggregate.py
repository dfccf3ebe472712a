"""Aggregate a task's stored rows into the report structure (docs/reports.md).

Input is only what the store holds: the task section (from the task record), its rubric
snapshot and its rows. Output is a :class:`~rubric_engine.report.model.Report` whose JSON key
order and number formatting are fixed, so rebuilding a report from the same task gives the same
bytes. Pure: no I/O, no clock.

Rules: mean scores use SCORED rows only; compliance per requirement is
FOLLOWED / (FOLLOWED + PARTIAL + VIOLATED) with NOT_APPLICABLE and JUDGE_ERROR rows outside
every denominator (docs/protocol.md §14); ``null`` when the denominator is 0. Pass, pass rate and a
row's outcome are defined in :mod:`rubric_engine.report.outcome`. A referenceBasis entry's
``source`` (judge, rule, default, backfill) does not change how it is counted.

The report is built as a stream (:class:`~rubric_engine.report.accumulate.ReportAccumulator`,
in bounded memory): :func:`build_report` feeds it rows in input order; a fresh run feeds it
each row as it is stored, in any order, and gets the same report.
"""

from __future__ import annotations

from collections.abc import Iterable

from rubric_engine.report.accumulate import LOWEST_ROWS, ReportAccumulator, accumulate
from rubric_engine.report.model import Report, TaskSection
from rubric_engine.report.outcome import OUTCOMES, default_pass_score, row_outcome
from rubric_engine.report.rows import RowFacts, RowUsage, row_facts
from rubric_engine.results.model import RowResult
from rubric_engine.rubric.model import EvalRubric

__all__ = [
    "LOWEST_ROWS",
    "OUTCOMES",
    "ReportAccumulator",
    "RowFacts",
    "RowUsage",
    "build_report",
    "default_pass_score",
    "row_facts",
    "row_outcome",
]


def build_report(
    task: TaskSection,
    rubric: EvalRubric,
    rows: Iterable[tuple[RowResult, RowUsage, RowFacts]],
    *,
    pass_score: int | None = None,
    by: tuple[str, ...] = (),
    exact: bool = False,
) -> Report:
    """Build the typed report.

    Args:
        task: the ``task`` section (id, rubric key/version/hash, prompt, model …) as stored.
        rubric: the task's own snapshot, never the current file.
        rows: results in input order with their judge usage and agent facts.
        pass_score: the lowest passing final score; default :func:`default_pass_score`.
        by: slice names for the ``slices`` section (``intent``, ``category`` or a metadata
            field); the section is left out when empty.
        exact: unrounded means and ratios (:data:`~rubric_engine.report.outcome.EXACT`), for
            a gate or a diff to decide on; a written report rounds them to 4 places.

    Returns:
        The report (sections in :class:`~rubric_engine.report.model.Report`;
        docs/reports.md), with ``rules`` (the diagnosis report) when rows carry rule checks, and
        ``totals.checked`` when rows were decided by rules alone (``--judge none``: status
        CHECKED, no score; they count in ``redFlags``, ``requirements`` and the pass rate).

    Raises:
        ConfigurationError: ``pass_score`` outside the scale, or a ``by`` name that is neither
            ``intent``, ``category`` nor a metadata field of any row (the valid names are listed).
    """
    built = ReportAccumulator(rubric, pass_score=pass_score, by=by, exact=exact)
    return accumulate(built, rows).finish(task)
