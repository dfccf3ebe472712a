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
rest. Pure: the inputs are two already built reports and their rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubric_engine.report.aggregate import RowFacts
from rubric_engine.report.outcome import row_verdict
from rubric_engine.results import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

REGRESSION, IMPROVEMENT, CHANGED = "REGRESSION", "IMPROVEMENT", "CHANGED"
_RANK = {RequirementStatus.FOLLOWED: 0, RequirementStatus.PARTIAL: 1, RequirementStatus.VIOLATED: 2}


@dataclass(frozen=True)
class DiffSide:
    """One task as the diff reads it: its built report, rubric snapshot and rows in order."""

    report: dict[str, Any]
    rubric: EvalRubric
    rows: list[tuple[RowResult, RowFacts]]


def _item(
    kind: str,
    scope: str,
    metric: str,
    base: Any,
    cur: Any,
    message: str,
    case_id: str | None = None,
) -> dict[str, Any]:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (base, cur))
    return {
        "type": kind,
        "scope": scope,
        "caseId": case_id,
        "metric": metric,
        "baselineValue": _shown(base) if isinstance(base, float) else base,
        "currentValue": _shown(cur) if isinstance(cur, float) else cur,
        "delta": round(cur - base, 4) if numeric else None,
        "message": message,
    }


def _shown(value: float | None) -> float | None:
    """Figures decided on exactly (see ``outcome.exact_figures``) are shown to 4 places."""
    return None if value is None else round(value, 4)


def _direction(base: Any, cur: Any, higher_is_better: bool) -> str | None:
    """REGRESSION/IMPROVEMENT for a numeric change, ``None`` when equal or not comparable."""
    if base is None or cur is None or base == cur:
        return None
    better = cur > base if higher_is_better else cur < base
    return IMPROVEMENT if better else REGRESSION


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)


def _numeric(
    items: list[dict[str, Any]],
    metric: str,
    label: str,
    base: Any,
    cur: Any,
    higher_is_better: bool,
    *,
    up_only: bool = False,
    case_id: str | None = None,
) -> None:
    kind = _direction(base, cur, higher_is_better)
    if kind is None:
        return
    if up_only and kind == IMPROVEMENT:
        kind = CHANGED
    verb = "rose" if cur > base else "fell"
    scope = "case" if case_id else "aggregate"
    where = f"{case_id}: " if case_id else ""
    items.append(
        _item(
            kind,
            scope,
            metric,
            base,
            cur,
            f"{where}{label} {verb} from {_fmt(base)} to {_fmt(cur)}",
            case_id,
        )
    )


def rubric_comparison(base: EvalRubric, cur: EvalRubric) -> dict[str, Any]:
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
    return {
        "sameRubric": same,
        "baseline": {"key": base.key, "version": base.version, "hash": base.content_hash()},
        "current": {"key": cur.key, "version": cur.version, "hash": cur.content_hash()},
        "sharedRequirementIds": len(shared),
        "onlyInBaseline": [rid for rid in base_ids if rid not in set(cur_ids)],
        "onlyInCurrent": [rid for rid in cur_ids if rid not in set(base_ids)],
        "note": note,
    }


def diff_tasks(baseline: DiffSide, current: DiffSide) -> dict[str, Any]:
    """The diff report: seed-001 summary fields, ``rubricComparison`` and ``items``.

    Returns:
        ``{baselineTaskId, currentTaskId, baselineTotalCases, currentTotalCases,
        baselinePassedCases, currentPassedCases, baselinePassRate, currentPassRate,
        regressionCount, improvementCount, changedCount, hasRegression, rubricComparison,
        items: [{type, scope, caseId, metric, baselineValue, currentValue, delta, message}]}``;
        aggregate items first, then case items in the current task's row order. ``delta`` is
        ``current - baseline`` for numbers, ``null`` otherwise.
    """
    b, c = baseline.report, current.report
    comparison = rubric_comparison(baseline.rubric, current.rubric)
    base_ids = set(baseline.rubric.requirements_by_id)
    shared = {rid for rid in current.rubric.requirements_by_id if rid in base_ids}
    items = _aggregate_items(b, c, shared)
    items += _case_items(baseline, current, shared)
    counts = {
        kind: sum(1 for i in items if i["type"] == kind)
        for kind in (REGRESSION, IMPROVEMENT, CHANGED)
    }
    return {
        "baselineTaskId": b["task"]["id"],
        "currentTaskId": c["task"]["id"],
        "baselineTotalCases": b["totals"]["rows"],
        "currentTotalCases": c["totals"]["rows"],
        "baselinePassedCases": b["totals"]["passedRows"],
        "currentPassedCases": c["totals"]["passedRows"],
        "baselinePassRate": _shown(b["totals"]["passRate"]),
        "currentPassRate": _shown(c["totals"]["passRate"]),
        "regressionCount": counts[REGRESSION],
        "improvementCount": counts[IMPROVEMENT],
        "changedCount": counts[CHANGED],
        "hasRegression": counts[REGRESSION] > 0,
        "rubricComparison": comparison,
        "items": items,
    }


def _aggregate_items(
    b: dict[str, Any], c: dict[str, Any], shared: set[str]
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    bt, ct = b["totals"], c["totals"]
    if bt["passScore"] != ct["passScore"]:
        items.append(
            _item(
                CHANGED,
                "aggregate",
                "passScore",
                bt["passScore"],
                ct["passScore"],
                "the pass score differs; pass rates are not like for like",
            )
        )
    _numeric(items, "passRate", "pass rate", bt["passRate"], ct["passRate"], True)
    _numeric(items, "meanScore", "mean final score", bt["meanScore"], ct["meanScore"], True)
    _numeric(items, "judgeErrors", "JUDGE_ERROR rows", bt["judgeErrors"], ct["judgeErrors"], False)
    base_flags = {f["type"]: f["count"] for f in b["redFlags"]}
    for flag in c["redFlags"]:
        before, now = base_flags.get(flag["type"], 0), flag["count"]
        if before == 0 and now > 0:
            examples = ", ".join(flag["rowIds"][:5])
            items.append(
                _item(
                    REGRESSION,
                    "aggregate",
                    f"redFlags.{flag['type']}",
                    before,
                    now,
                    f"new red flag {flag['type']} in {now} row(s): {examples}",
                )
            )
        else:
            _numeric(
                items,
                f"redFlags.{flag['type']}",
                f"rows with red flag {flag['type']}",
                before,
                now,
                False,
            )
    base_req = {r["id"]: r for r in b["requirements"]}
    for req in c["requirements"]:
        old = base_req.get(req["id"])
        if old is None or (req["category"] != "CASE" and req["id"] not in shared):
            continue
        _numeric(
            items,
            f"compliance.{req['id']}",
            f"compliance of {req['id']}",
            old["compliance"],
            req["compliance"],
            True,
        )
    base_intents = {i["intentKey"]: i for i in b["intents"]}
    for intent in c["intents"]:
        old = base_intents.get(intent["intentKey"])
        if old is not None:
            _numeric(
                items,
                f"intents.{intent['intentKey']}.meanScore",
                f"mean score of intent {intent['intentKey']}",
                old["meanScore"],
                intent["meanScore"],
                True,
            )
    for key, label in (
        ("toolCallsMean", "mean tool calls per row"),
        ("durationMsMean", "mean agent duration (ms)"),
    ):
        _numeric(items, key, label, b["agent"][key], c["agent"][key], False, up_only=True)
    # seed 001 §6: a change in the verifier's verdict distribution is recorded for a person
    b_rules, c_rules = b.get("rules") or {}, c.get("rules") or {}
    for metric, base, cur, label in (
        ("verdictDistribution", bt["verdictDistribution"], ct["verdictDistribution"], "verdicts"),
        (
            "rules.verdictDistribution",
            b_rules.get("verdictDistribution"),
            c_rules.get("verdictDistribution"),
            "verifier verdicts",
        ),
        ("scoreDistribution", bt["scoreDistribution"], ct["scoreDistribution"], "scores"),
        ("warnings", b["warnings"], c["warnings"], "protocol warnings"),
    ):
        if base is None or cur is None:
            continue
        if base != cur:
            items.append(
                _item(
                    CHANGED,
                    "aggregate",
                    metric,
                    base,
                    cur,
                    f"{label} changed: {_pairs(base)} → {_pairs(cur)}",
                )
            )
    if bt["rows"] != ct["rows"]:
        items.append(
            _item(
                CHANGED,
                "aggregate",
                "rows",
                bt["rows"],
                ct["rows"],
                f"row count changed from {bt['rows']} to {ct['rows']}",
            )
        )
    return items


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _case_items(baseline: DiffSide, current: DiffSide, shared: set[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    b_pass = baseline.report["totals"]["passScore"]
    c_pass = current.report["totals"]["passScore"]
    base_rows = {r.row_id: (r, f) for r, f in baseline.rows}
    seen = set()
    for cur, cur_facts in current.rows:
        seen.add(cur.row_id)
        found = base_rows.get(cur.row_id)
        if found is None:
            items.append(
                _item(
                    CHANGED,
                    "case",
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
                    "case",
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
) -> list[dict[str, Any]]:
    rid = cur.row_id
    items: list[dict[str, Any]] = []
    if base.status is not cur.status:
        if cur.status is RowStatus.JUDGE_ERROR:
            why = f" ({cur.error.kind}: {cur.error.message})" if cur.error else ""
            items.append(
                _item(
                    REGRESSION,
                    "case",
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
                    "case",
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
    was = row_verdict(base, b_pass) == "PASS"
    now = row_verdict(cur, c_pass) == "PASS"
    if was != now:
        items.append(
            _item(
                IMPROVEMENT if now else REGRESSION,
                "case",
                "passed",
                was,
                now,
                f"{rid}: {'now passes' if now else 'passed before, fails now'}",
                rid,
            )
        )
    _numeric(
        items, "finalScore", "final score", base.final_score, cur.final_score, True, case_id=rid
    )
    for flag in cur.red_flag_types:
        if flag not in base.red_flag_types:
            items.append(
                _item(
                    REGRESSION,
                    "case",
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
                    "case",
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
                "case",
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
                "case",
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
        False,
        up_only=True,
        case_id=rid,
    )
    _numeric(
        items,
        "durationMs",
        "agent duration (ms)",
        base_facts.duration_ms,
        cur_facts.duration_ms,
        False,
        up_only=True,
        case_id=rid,
    )
    return items


def _rule_items(base: RowResult, cur: RowResult) -> list[dict[str, Any]]:
    """Seed 001 §6 on rule checks: an evidence tool lost, or fewer keywords matched."""
    if base.rules is None or cur.rules is None:
        return []
    rid = cur.row_id
    items: list[dict[str, Any]] = []
    for tool, now in cur.rules.evidence_coverage.items():
        was = base.rules.evidence_coverage.get(tool)
        if was is not None and was != now:
            items.append(
                _item(
                    IMPROVEMENT if now else REGRESSION,
                    "case",
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
        True,
        case_id=rid,
    )
    if base.rules.verdict != cur.rules.verdict:
        items.append(
            _item(
                CHANGED,
                "case",
                "verdict",
                base.rules.verdict,
                cur.rules.verdict,
                f"{rid}: verifier verdict {base.rules.verdict} → {cur.rules.verdict}",
                rid,
            )
        )
    return items
