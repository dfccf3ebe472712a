"""Baseline diff of two tasks (docs/reports.md): what got worse, better, or only changed.

Items are ``REGRESSION``, ``IMPROVEMENT`` or ``CHANGED`` at ``aggregate`` or ``case`` scope (a
case is a row, matched by ``rowId``). The rules (the diagnosis cases' baseline diff carried
over to rubric scoring):

- aggregate: pass rate or mean score down → REGRESSION (up → IMPROVEMENT); more rows of a red-flag
  type → REGRESSION (a type that was absent is a *new red flag*); a requirement's compliance down
  → REGRESSION; an intent's mean score down → REGRESSION; more JUDGE_ERROR rows → REGRESSION; mean
  tool calls or agent duration up → REGRESSION (a cost signal; down is CHANGED); the verdict and
  score distributions, protocol-warning counts and row counts → CHANGED, for a person to judge.
- case: a row that passed and now does not → REGRESSION; final score down → REGRESSION; a red
  flag that appeared → REGRESSION; a requirement FOLLOWED → PARTIAL → VIOLATED, one step or two →
  REGRESSION (the reverse → IMPROVEMENT; to or from NOT_APPLICABLE → CHANGED); a row that became
  JUDGE_ERROR → REGRESSION; a row of the baseline that the current task has no result for (a
  stopped or partial run) → REGRESSION; tool calls or duration up → REGRESSION; an evidence tool
  of a rule check no longer used, or fewer keywords matched → REGRESSION (the reverse →
  IMPROVEMENT); another intent, or a row only in the current task → CHANGED.

Tasks made with different rubrics (another version, or another pack) are compared on the
requirement IDs both snapshots declare; the ``rubricComparison`` block says so and lists the
rest. The aggregate comparisons are the metrics marked ``in_diff`` in the one metric table
(:mod:`rubric_engine.report.metrics`, which ``gate`` reads too), with its direction; the
distributions, the row count and the pass score are CHANGED items for a person. Pure: the inputs
are two already built reports and their rows; :func:`rubric_engine.report.run.run_diff` reads
them from a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.diff_cases import (
    CHANGED,
    IMPROVEMENT,
    REGRESSION,
    Row,
    item,
    numeric,
    pair_items,
    row_pairs,
    shown,
)
from rubric_engine.report.diff_list import CaseItems
from rubric_engine.report.metrics import METRICS, MetricDef, params
from rubric_engine.report.model import (
    CappedItems,
    Diff,
    DiffItem,
    Report,
    RubricComparison,
    RubricRef,
)
from rubric_engine.report.rows import RowFacts
from rubric_engine.results.model import RowResult
from rubric_engine.rubric.model import EvalRubric

__all__ = [
    "CHANGED",
    "DIFF_METRICS",
    "IMPROVEMENT",
    "REGRESSION",
    "DiffSide",
    "DiffStart",
    "diff_tasks",
    "rubric_comparison",
]


@dataclass(frozen=True)
class DiffSide:
    """One task as the diff reads it: its built report, rubric snapshot and rows in order.

    ``rows`` is read once per pass and may be a stream a store reads afresh on each pass
    (:class:`~rubric_engine.report.run.StoredRows`); ``row_ids`` then names the rows in
    the same order, so the diff need not read the rows to know which exist.
    """

    report: Report
    rubric: EvalRubric
    rows: Iterable[tuple[RowResult, RowFacts]]
    row_ids: Sequence[str] | None = None

    def ids(self) -> Sequence[str]:
        """The rowIds of the rows, in order."""
        if self.row_ids is not None:
            return self.row_ids
        return [result.row_id for result, _ in self.rows]


def rubric_comparison(base: EvalRubric, cur: EvalRubric) -> RubricComparison:
    """Which rubric each side used and which requirement IDs the diff compares."""
    base_ids, cur_ids = list(base.requirements_by_id), list(cur.requirements_by_id)
    shared = [rid for rid in cur_ids if rid in set(base_ids)]
    same = base.content_hash() == cur.content_hash()
    note = (
        f"same rubric ({cur.key} v{cur.version}); all {len(shared)} requirement IDs compared"
        if same
        else f"different rubrics ({base.key} v{base.version} → {cur.key} v{cur.version}): "
        f"requirements compared on the {len(shared)} IDs both declare; "
        f"{len(base_ids) - len(shared)} only in the baseline, {len(cur_ids) - len(shared)} only in "
        "the current rubric are left out; pass rates and scores were judged under different rules"
    )
    return RubricComparison(
        same_rubric=same,
        baseline=RubricRef(key=base.key, version=base.version, hash=base.content_hash()),
        current=RubricRef(key=cur.key, version=cur.version, hash=cur.content_hash()),
        shared_requirement_ids=len(shared),
        only_in_baseline=tuple(rid for rid in base_ids if rid not in set(cur_ids)),
        only_in_current=tuple(rid for rid in cur_ids if rid not in set(base_ids)),
        note=note,
    )


def diff_tasks(baseline: DiffSide, current: DiffSide, *, max_items: int | None = None) -> Diff:
    """The diff: the baseline diff's summary fields, ``rubricComparison`` and ``items``.

    Args:
        max_items: case items listed, the most important (:mod:`~rubric_engine.report.diff_list`);
            ``None`` lists every one. The counts are of every item either way.

    Raises:
        ConfigurationError: the tasks share neither a rowId nor a requirement ID, so nothing
            in them is comparable (every difference would read as a REGRESSION and a gate
            would fail for nothing).

    Returns:
        A :class:`~rubric_engine.report.model.Diff`: aggregate items first, then case items in
        the current task's row order. ``delta`` is ``current - baseline`` for numbers,
        ``None`` otherwise. Build both reports with ``exact=True`` to decide on exact values
        (the figures shown are rounded to 4 places).
    """
    start = DiffStart.of(baseline.report, baseline.rubric, current.report, current.rubric)
    base_ids = baseline.ids()
    if not start.shared:
        cur_ids = set(current.ids())
        if not any(row_id in cur_ids for row_id in base_ids):
            raise start.nothing_comparable(list(base_ids), sorted(cur_ids))
    case = CaseItems(max_items)
    for base, cur, place in row_pairs(baseline.rows, current.rows, set(base_ids)):
        case.add(start.pair_items(base, cur), place)
    return start.finish(case)


@dataclass(frozen=True)
class DiffStart:
    """What a diff decides from the two reports and rubrics, before any row is compared: the
    rubric comparison, the shared requirement IDs and the aggregate items."""

    baseline: Report
    current: Report
    baseline_rubric: EvalRubric
    current_rubric: EvalRubric
    comparison: RubricComparison
    shared: set[str]
    aggregate: list[DiffItem]

    @classmethod
    def of(cls, b: Report, b_rubric: EvalRubric, c: Report, c_rubric: EvalRubric) -> DiffStart:
        base_ids = set(b_rubric.requirements_by_id)
        shared = {rid for rid in c_rubric.requirements_by_id if rid in base_ids}
        comparison = rubric_comparison(b_rubric, c_rubric)
        return cls(b, c, b_rubric, c_rubric, comparison, shared, _aggregate_items(b, c, shared))

    def pair_items(self, base: Row | None, cur: Row | None) -> list[DiffItem]:
        """The case items of one rowId (:func:`~rubric_engine.report.diff_cases.pair_items`)."""
        b_pass, c_pass = self.baseline.totals.pass_score, self.current.totals.pass_score
        return pair_items(base, cur, b_pass, c_pass, self.shared)

    def nothing_comparable(self, base_rows: list[str], cur_rows: list[str]) -> ConfigurationError:
        """The error of two tasks that share no rowId and no requirement ID (a few rowIds of
        each named)."""
        b, c = self.baseline.task, self.current.task

        def sample(ids: list[str]) -> str:
            return ", ".join(ids[:3]) + (", …" if len(ids) > 3 else "") if ids else "none"

        return ConfigurationError(
            f"nothing comparable: baseline {b.id} ({self.baseline_rubric.key} "
            f"v{self.baseline_rubric.version}; rows {sample(base_rows)}) and current {c.id} "
            f"({self.current_rubric.key} v{self.current_rubric.version}; rows "
            f"{sample(cur_rows)}) share no rowId and no requirement ID. Diff a baseline scored "
            "on the same rows or with the same rubric (`rubric-eval tasks` lists the tasks)"
        )

    def finish(self, case: CaseItems, items_file: str | None = None) -> Diff:
        """The diff of the aggregate items and ``case``'s; ``items_file`` names the file that
        holds every item when ``case`` kept only some (docs/scale.md)."""
        b, c = self.baseline, self.current
        counts = {kind: case.counts[kind] for kind in (REGRESSION, IMPROVEMENT, CHANGED)}
        for i in self.aggregate:
            counts[i.type] += 1
        capped = None
        if case.capped:
            listed = len(case.listed())
            capped = CappedItems(case_items=case.found, listed=listed, items_file=items_file)
        return Diff(
            baseline_task_id=b.task.id,
            current_task_id=c.task.id,
            baseline_total_cases=b.totals.rows,
            current_total_cases=c.totals.rows,
            baseline_passed_cases=b.totals.passed_rows,
            current_passed_cases=c.totals.passed_rows,
            baseline_pass_rate=shown(b.totals.pass_rate),
            current_pass_rate=shown(c.totals.pass_rate),
            regression_count=counts[REGRESSION],
            improvement_count=counts[IMPROVEMENT],
            changed_count=counts[CHANGED],
            has_regression=counts[REGRESSION] > 0,
            rubric_comparison=self.comparison,
            items=(*self.aggregate, *case.listed()),
            capped=capped,
        )


#: the metrics the diff compares, from the one table (gate reads the same definitions)
DIFF_METRICS: tuple[MetricDef, ...] = tuple(m for m in METRICS if m.in_diff)


def _compared_params(metric: MetricDef, b: Report, c: Report, shared: set[str]) -> list[str]:
    """The current task's parameters of a metric, in its order; a requirement ID is compared
    when both rubrics declare it, or when it is case-level (``CASE_…``) in both tasks."""
    found = params(metric, c)
    if "<REQUIREMENT_ID>" not in metric.name:
        return found
    case_ids = {r.id for r in c.requirements if r.category == "CASE"}
    return [rid for rid in found if rid in shared or rid in case_ids]


def _metric_items(b: Report, c: Report, shared: set[str]) -> list[DiffItem]:
    items: list[DiffItem] = []
    for metric in DIFF_METRICS:
        for param in _compared_params(metric, b, c, shared):
            name = metric.concrete(param)
            before, now = metric.value(b, param), metric.value(c, param)
            if metric.name == "redFlags.<TYPE>" and before == 0 and now:
                flag = next(f for f in c.red_flags if f.type == param)
                examples = ", ".join(flag.row_ids[:5])
                message = f"new red flag {param} in {now} row(s): {examples}"
                items.append(item(REGRESSION, name, before, now, message))
                continue
            label = metric.label.format(param=param)
            up_only = not metric.credits_improvement
            numeric(items, name, label, before, now, metric.better, up_only=up_only)
    return items


def _aggregate_items(b: Report, c: Report, shared: set[str]) -> list[DiffItem]:
    items: list[DiffItem] = []
    bt, ct = b.totals, c.totals
    if bt.pass_score != ct.pass_score:
        items.append(
            item(
                CHANGED,
                "passScore",
                bt.pass_score,
                ct.pass_score,
                "the pass score differs; pass rates are not like for like",
            )
        )
    items += _metric_items(b, c, shared)
    # a change in the verifier's verdict distribution is recorded for a person
    b_rules, c_rules = b.rules, c.rules
    distributions: tuple[tuple[str, dict[str, int] | None, dict[str, int] | None, str], ...] = (
        (
            "verdictDistribution",
            {str(k): n for k, n in bt.outcome_distribution.items()},
            {str(k): n for k, n in ct.outcome_distribution.items()},
            "verdicts",
        ),
        (
            "rules.verdictDistribution",
            b_rules.verdict_distribution if b_rules else None,
            c_rules.verdict_distribution if c_rules else None,
            "verifier verdicts",
        ),
        ("scoreDistribution", bt.score_distribution, ct.score_distribution, "scores"),
        ("warnings", b.warnings, c.warnings, "protocol warnings"),
    )
    for metric, base, cur, label in distributions:
        if base is None or cur is None:
            continue
        if base != cur:
            message = f"{label} changed: {_pairs(base)} → {_pairs(cur)}"
            items.append(item(CHANGED, metric, base, cur, message))
    if bt.rows != ct.rows:
        message = f"row count changed from {bt.rows} to {ct.rows}"
        items.append(item(CHANGED, "rows", bt.rows, ct.rows, message))
    return items


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
