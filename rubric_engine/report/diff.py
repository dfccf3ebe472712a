"""Baseline diff of two tasks (seed 001 §6, SPEC §9): what got worse, better, or only changed.

Items are ``REGRESSION``, ``IMPROVEMENT`` or ``CHANGED`` at ``aggregate`` or ``case`` scope (a
case is a row, matched by ``rowId``). The seed's rules, carried over to rubric scoring:

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

from dataclasses import dataclass
from typing import Any

from rubric_engine.report.aggregate import RowFacts
from rubric_engine.report.metrics import METRICS, Better, MetricDef, params
from rubric_engine.report.model import (
    Diff,
    DiffItem,
    ItemType,
    Report,
    RubricComparison,
    RubricRef,
)
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

REGRESSION: ItemType = "REGRESSION"
IMPROVEMENT: ItemType = "IMPROVEMENT"
CHANGED: ItemType = "CHANGED"
_RANK = {RequirementStatus.FOLLOWED: 0, RequirementStatus.PARTIAL: 1, RequirementStatus.VIOLATED: 2}


@dataclass(frozen=True)
class DiffSide:
    """One task as the diff reads it: its built report, rubric snapshot and rows in order."""

    report: Report
    rubric: EvalRubric
    rows: list[tuple[RowResult, RowFacts]]


def _item(
    kind: ItemType,
    metric: str,
    base: Any,
    cur: Any,
    message: str,
    case_id: str | None = None,
) -> DiffItem:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (base, cur))
    return DiffItem(
        type=kind,
        scope="case" if case_id else "aggregate",
        case_id=case_id,
        metric=metric,
        baseline_value=_shown(base) if isinstance(base, float) else base,
        current_value=_shown(cur) if isinstance(cur, float) else cur,
        delta=round(cur - base, 4) if numeric else None,
        message=message,
    )


def _shown(value: float | None) -> float | None:
    """Figures decided on exactly (see ``outcome.exact_figures``) are shown to 4 places."""
    return None if value is None else round(value, 4)


def _direction(base: Any, cur: Any, better: Better) -> ItemType | None:
    """REGRESSION/IMPROVEMENT for a numeric change (CHANGED when neither way is better),
    ``None`` when equal or not comparable."""
    if base is None or cur is None or base == cur:
        return None
    if better is Better.NEITHER:
        return CHANGED
    improved = cur > base if better is Better.HIGHER else cur < base
    return IMPROVEMENT if improved else REGRESSION


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)


def _numeric(
    items: list[DiffItem],
    metric: str,
    label: str,
    base: Any,
    cur: Any,
    better: Better,
    *,
    up_only: bool = False,
    case_id: str | None = None,
) -> None:
    kind = _direction(base, cur, better)
    if kind is None:
        return
    if up_only and kind == IMPROVEMENT:
        kind = CHANGED
    verb = "rose" if cur > base else "fell"
    where = f"{case_id}: " if case_id else ""
    items.append(
        _item(
            kind,
            metric,
            base,
            cur,
            f"{where}{label} {verb} from {_fmt(base)} to {_fmt(cur)}",
            case_id,
        )
    )


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


def diff_tasks(baseline: DiffSide, current: DiffSide) -> Diff:
    """The diff: seed-001 summary fields, ``rubricComparison`` and ``items``.

    Returns:
        A :class:`~rubric_engine.report.model.Diff`: aggregate items first, then case items in
        the current task's row order. ``delta`` is ``current - baseline`` for numbers,
        ``None`` otherwise. Build both reports inside
        :func:`~rubric_engine.report.outcome.exact_figures` to decide on exact values (the
        figures shown are rounded to 4 places).
    """
    b, c = baseline.report, current.report
    comparison = rubric_comparison(baseline.rubric, current.rubric)
    base_ids = set(baseline.rubric.requirements_by_id)
    shared = {rid for rid in current.rubric.requirements_by_id if rid in base_ids}
    items = _aggregate_items(b, c, shared)
    items += _case_items(baseline, current, shared)
    counts = {
        kind: sum(1 for i in items if i.type == kind) for kind in (REGRESSION, IMPROVEMENT, CHANGED)
    }
    return Diff(
        baseline_task_id=b.task.id,
        current_task_id=c.task.id,
        baseline_total_cases=b.totals.rows,
        current_total_cases=c.totals.rows,
        baseline_passed_cases=b.totals.passed_rows,
        current_passed_cases=c.totals.passed_rows,
        baseline_pass_rate=_shown(b.totals.pass_rate),
        current_pass_rate=_shown(c.totals.pass_rate),
        regression_count=counts[REGRESSION],
        improvement_count=counts[IMPROVEMENT],
        changed_count=counts[CHANGED],
        has_regression=counts[REGRESSION] > 0,
        rubric_comparison=comparison,
        items=tuple(items),
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
                items.append(_item(REGRESSION, name, before, now, message))
                continue
            label = metric.label.format(param=param)
            up_only = not metric.credits_improvement
            _numeric(items, name, label, before, now, metric.better, up_only=up_only)
    return items


def _aggregate_items(b: Report, c: Report, shared: set[str]) -> list[DiffItem]:
    items: list[DiffItem] = []
    bt, ct = b.totals, c.totals
    if bt.pass_score != ct.pass_score:
        items.append(
            _item(
                CHANGED,
                "passScore",
                bt.pass_score,
                ct.pass_score,
                "the pass score differs; pass rates are not like for like",
            )
        )
    items += _metric_items(b, c, shared)
    # seed 001 §6: a change in the verifier's verdict distribution is recorded for a person
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
            items.append(_item(CHANGED, metric, base, cur, message))
    if bt.rows != ct.rows:
        message = f"row count changed from {bt.rows} to {ct.rows}"
        items.append(_item(CHANGED, "rows", bt.rows, ct.rows, message))
    return items


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _case_items(baseline: DiffSide, current: DiffSide, shared: set[str]) -> list[DiffItem]:
    items: list[DiffItem] = []
    b_pass = baseline.report.totals.pass_score
    c_pass = current.report.totals.pass_score
    base_rows = {r.row_id: (r, f) for r, f in baseline.rows}
    seen = set()
    for cur, cur_facts in current.rows:
        seen.add(cur.row_id)
        found = base_rows.get(cur.row_id)
        if found is None:
            items.append(
                _item(
                    CHANGED,
                    "presence",
                    None,
                    "present",
                    f"{cur.row_id}: only in the current task",
                    cur.row_id,
                )
            )
            continue
        items += _row_items(found[0], cur, found[1], cur_facts, b_pass, c_pass, shared)
    for base, _ in baseline.rows:
        if base.row_id not in seen:
            items.append(
                _item(
                    REGRESSION,
                    "presence",
                    "present",
                    None,
                    f"{base.row_id}: judged in the baseline, no result in the current task",
                    base.row_id,
                )
            )
    return items


def _row_items(
    base: RowResult,
    cur: RowResult,
    base_facts: RowFacts,
    cur_facts: RowFacts,
    b_pass: int,
    c_pass: int,
    shared: set[str],
) -> list[DiffItem]:
    rid = cur.row_id
    items: list[DiffItem] = []
    if base.status is not cur.status:
        if cur.status is RowStatus.JUDGE_ERROR:
            why = f" ({cur.error.kind}: {cur.error.message})" if cur.error else ""
            items.append(
                _item(
                    REGRESSION,
                    "status",
                    str(base.status),
                    str(cur.status),
                    f"{rid}: became JUDGE_ERROR{why}",
                    rid,
                )
            )
        else:
            items.append(
                _item(
                    CHANGED,
                    "status",
                    str(base.status),
                    str(cur.status),
                    f"{rid}: was JUDGE_ERROR, now scored",
                    rid,
                )
            )
        return items
    if cur.status is RowStatus.JUDGE_ERROR:
        return items
    was = row_outcome(base, b_pass) == "PASS"
    now = row_outcome(cur, c_pass) == "PASS"
    if was != now:
        items.append(
            _item(
                IMPROVEMENT if now else REGRESSION,
                "passed",
                was,
                now,
                f"{rid}: {'now passes' if now else 'passed before, fails now'}",
                rid,
            )
        )
    _numeric(
        items,
        "finalScore",
        "final score",
        base.final_score,
        cur.final_score,
        Better.HIGHER,
        case_id=rid,
    )
    for flag in cur.red_flag_types:
        if flag not in base.red_flag_types:
            items.append(
                _item(
                    REGRESSION,
                    f"redFlags.{flag}",
                    False,
                    True,
                    f"{rid}: new red flag {flag}",
                    rid,
                )
            )
    for flag in base.red_flag_types:
        if flag not in cur.red_flag_types:
            items.append(
                _item(
                    IMPROVEMENT,
                    f"redFlags.{flag}",
                    True,
                    False,
                    f"{rid}: red flag {flag} gone",
                    rid,
                )
            )
    if base.intent_key != cur.intent_key:
        items.append(
            _item(
                CHANGED,
                "intentKey",
                base.intent_key,
                cur.intent_key,
                f"{rid}: judged as intent {cur.intent_key}, was {base.intent_key}",
                rid,
            )
        )
    before = {e.requirement_id: e.status for e in base.reference_basis}
    for entry in cur.reference_basis:
        old = before.get(entry.requirement_id)
        is_case = entry.requirement_id.startswith("CASE_")
        if old is None or old is entry.status or not (is_case or entry.requirement_id in shared):
            continue
        if old in _RANK and entry.status in _RANK:
            kind = REGRESSION if _RANK[entry.status] > _RANK[old] else IMPROVEMENT
        else:
            kind = CHANGED
        items.append(
            _item(
                kind,
                f"requirements.{entry.requirement_id}",
                str(old),
                str(entry.status),
                f"{rid}: {entry.requirement_id} {old} → {entry.status}",
                rid,
            )
        )
    items += _rule_items(base, cur)
    _numeric(
        items,
        "toolCalls",
        "tool calls",
        base_facts.tool_calls,
        cur_facts.tool_calls,
        Better.LOWER,
        up_only=True,
        case_id=rid,
    )
    _numeric(
        items,
        "durationMs",
        "agent duration (ms)",
        base_facts.duration_ms,
        cur_facts.duration_ms,
        Better.LOWER,
        up_only=True,
        case_id=rid,
    )
    return items


def _rule_items(base: RowResult, cur: RowResult) -> list[DiffItem]:
    """Seed 001 §6 on rule checks: an evidence tool lost, or fewer keywords matched."""
    if base.rules is None or cur.rules is None:
        return []
    rid = cur.row_id
    items: list[DiffItem] = []
    for tool, now in cur.rules.evidence_coverage.items():
        was = base.rules.evidence_coverage.get(tool)
        if was is not None and was != now:
            items.append(
                _item(
                    IMPROVEMENT if now else REGRESSION,
                    f"evidenceCoverage.{tool}",
                    was,
                    now,
                    f"{rid}: evidence tool {tool} {'now used' if now else 'no longer used'}",
                    rid,
                )
            )
    _numeric(
        items,
        "matchedKeywordCount",
        "matched keywords",
        base.rules.matched_keyword_count,
        cur.rules.matched_keyword_count,
        Better.HIGHER,
        case_id=rid,
    )
    if base.rules.verdict != cur.rules.verdict:
        items.append(
            _item(
                CHANGED,
                "verdict",
                base.rules.verdict,
                cur.rules.verdict,
                f"{rid}: verifier verdict {base.rules.verdict} → {cur.rules.verdict}",
                rid,
            )
        )
    return items
