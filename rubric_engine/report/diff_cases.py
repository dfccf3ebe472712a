"""Diff items: how one difference is written, and the case-scope comparisons (docs/reports.md).

Helpers for :mod:`rubric_engine.report.diff`, which documents the rules. Pure.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from itertools import chain
from typing import Any

from rubric_engine.report.metrics import Better
from rubric_engine.report.model import DiffItem, ItemType
from rubric_engine.report.outcome import row_outcome
from rubric_engine.report.rows import RowFacts
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus

REGRESSION: ItemType = "REGRESSION"
IMPROVEMENT: ItemType = "IMPROVEMENT"
CHANGED: ItemType = "CHANGED"
_RANK = {RequirementStatus.FOLLOWED: 0, RequirementStatus.PARTIAL: 1, RequirementStatus.VIOLATED: 2}


def item(
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
        baseline_value=shown(base) if isinstance(base, float) else base,
        current_value=shown(cur) if isinstance(cur, float) else cur,
        delta=round(cur - base, 4) if numeric else None,
        message=message,
    )


def shown(value: float | None) -> float | None:
    """Figures decided on exactly (``outcome.EXACT``) are shown to 4 places."""
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


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)


def numeric(
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
        item(
            kind,
            metric,
            base,
            cur,
            f"{where}{label} {verb} from {fmt(base)} to {fmt(cur)}",
            case_id,
        )
    )


Row = tuple[RowResult, RowFacts]


def case_items(
    baseline_rows: Iterable[Row],
    current_rows: Iterable[Row],
    b_pass: int,
    c_pass: int,
    shared: set[str],
    *,
    baseline_ids: Container[str],
) -> list[DiffItem]:
    """Case-scope items in the current task's row order, then the baseline's rows that have no
    result in the current task (see :mod:`rubric_engine.report.diff` for the rules)."""
    return [
        item
        for base, cur, _ in row_pairs(baseline_rows, current_rows, baseline_ids)
        for item in pair_items(base, cur, b_pass, c_pass, shared)
    ]


def row_pairs(
    baseline_rows: Iterable[Row], current_rows: Iterable[Row], baseline_ids: Container[str]
) -> Iterator[tuple[Row | None, Row | None, tuple[int, int]]]:
    """The rows of two tasks matched by rowId, each pair with its place
    (:data:`~rubric_engine.report.diff_list.Place`): the current task's rows in order, then
    the baseline's rows it has no result for, in the baseline's order.

    Both sides are read once, side by side: a baseline row read ahead waits until its current
    row comes. Two tasks scored from one input keep one order, so a handful of rows is held
    whatever the tasks' size; ``baseline_ids`` (every rowId of the baseline) tells a row only
    in the current task without reading the baseline to its end.
    """
    base_iter = enumerate(baseline_rows)
    waiting: dict[str, tuple[int, Row]] = {}  # read ahead, in baseline order
    for seq, cur in enumerate(current_rows):
        row_id = cur[0].row_id
        found = waiting.pop(row_id, None)
        if found is None and row_id in baseline_ids:
            found = _read_up_to(row_id, base_iter, waiting)
        yield (found[1] if found else None), cur, (0, seq)
    for seq, base in chain(waiting.values(), base_iter):
        yield base, None, (1, seq)


def pair_items(
    base: Row | None, cur: Row | None, b_pass: int, c_pass: int, shared: set[str]
) -> list[DiffItem]:
    """The items of one rowId: a row of both tasks compared, or a row only one task has."""
    if cur is None:
        assert base is not None
        row_id = base[0].row_id
        message = f"{row_id}: judged in the baseline, no result in the current task"
        return [item(REGRESSION, "presence", "present", None, message, row_id)]
    if base is None:
        row_id = cur[0].row_id
        message = f"{row_id}: only in the current task"
        return [item(CHANGED, "presence", None, "present", message, row_id)]
    return _row_items(base[0], cur[0], base[1], cur[1], b_pass, c_pass, shared)


def _read_up_to(
    row_id: str, base_iter: Iterator[tuple[int, Row]], waiting: dict[str, tuple[int, Row]]
) -> tuple[int, Row] | None:
    """Read the baseline on to the row ``row_id``, keeping the rows passed in ``waiting``."""
    for seq, base in base_iter:
        if base[0].row_id == row_id:
            return seq, base
        waiting[base[0].row_id] = (seq, base)
    return None


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
                item(
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
                item(
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
            item(
                IMPROVEMENT if now else REGRESSION,
                "passed",
                was,
                now,
                f"{rid}: {'now passes' if now else 'passed before, fails now'}",
                rid,
            )
        )
    numeric(
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
                item(
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
                item(
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
            item(
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
            item(
                kind,
                f"requirements.{entry.requirement_id}",
                str(old),
                str(entry.status),
                f"{rid}: {entry.requirement_id} {old} → {entry.status}",
                rid,
            )
        )
    items += _rule_items(base, cur)
    numeric(
        items,
        "toolCalls",
        "tool calls",
        base_facts.tool_calls,
        cur_facts.tool_calls,
        Better.LOWER,
        up_only=True,
        case_id=rid,
    )
    numeric(
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
    """Rule checks that got worse: an evidence tool lost, or fewer keywords matched."""
    if base.rules is None or cur.rules is None:
        return []
    rid = cur.row_id
    items: list[DiffItem] = []
    for tool, now in cur.rules.evidence_coverage.items():
        was = base.rules.evidence_coverage.get(tool)
        if was is not None and was != now:
            items.append(
                item(
                    IMPROVEMENT if now else REGRESSION,
                    f"evidenceCoverage.{tool}",
                    was,
                    now,
                    f"{rid}: evidence tool {tool} {'now used' if now else 'no longer used'}",
                    rid,
                )
            )
    numeric(
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
            item(
                CHANGED,
                "verdict",
                base.rules.verdict,
                cur.rules.verdict,
                f"{rid}: verifier verdict {base.rules.verdict} → {cur.rules.verdict}",
                rid,
            )
        )
    return items
