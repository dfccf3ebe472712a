"""Aggregate a task's stored rows into the report structure (SPEC §9; seed 003 §四).

Input is only what the store holds: the task record (with its rubric snapshot) and its rows.
Output is a JSON-ready dict whose key order and number formatting are fixed, so rebuilding a
report from the same task gives the same bytes. Pure: no I/O, no clock.

Rules: mean scores use SCORED rows only; compliance per requirement is
FOLLOWED / (FOLLOWED + PARTIAL + VIOLATED) with NOT_APPLICABLE and JUDGE_ERROR rows outside
every denominator (SPEC §5 step 7); ``null`` when the denominator is 0. Pass, pass rate and a
row's verdict are defined in :mod:`rubric_engine.report.outcome`. A referenceBasis entry's
``source`` (judge, rule, default, backfill) does not change how it is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.report.clusters import issue_clusters
from rubric_engine.report.outcome import (
    STATUS_FIELD,
    VERDICTS,
    default_pass_score,
    mean,
    ratio,
    row_verdict,
)
from rubric_engine.report.slices import slice_report
from rubric_engine.results import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rules.evidence import as_number
from rubric_engine.rules.report import diagnosis_report

__all__ = ["VERDICTS", "RowFacts", "RowUsage", "build_report", "default_pass_score", "row_verdict"]

LOWEST_ROWS = 10


@dataclass(frozen=True)
class RowUsage:
    """Per-row judge usage as stored."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float


@dataclass(frozen=True)
class RowFacts:
    """What the agent did in a row, read from the stored dialogue (seed 001 §3).

    Attributes:
        tool_calls: tool calls the agent made (assistant ``tool_calls``; else the trace's
            ``toolInvocations``), 0 when none.
        duration_ms: the agent's own run time from the trace, ``None`` when not recorded.
        metadata: the row's metadata (scenario, risk_level, tags …) for ``--by`` slices.
        case_texts: the row's case-level requirements (``CASE_…`` IDs) and their texts, so the
            report can show what each one asks; empty for rows without any.
    """

    tool_calls: int = 0
    duration_ms: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    case_texts: dict[str, str] = field(default_factory=dict)


def row_facts(dialogue: dict[str, Any]) -> RowFacts:
    """Read :class:`RowFacts` from a stored dialogue (camelCase JSON of ``DialogueRow``).

    Duration is the first number among ``trace.durationMs``, ``trace.totalDurationMs`` and
    ``trace.session.totalDurationMs`` (the seed-001 trace fixture).
    """
    calls = sum(len(m.get("toolCalls") or ()) for m in dialogue.get("messages") or ())
    trace: dict[str, Any] = dialogue.get("trace") or {}
    if not calls and isinstance(trace.get("toolInvocations"), list):
        calls = len(trace["toolInvocations"])
    session: dict[str, Any] = trace["session"] if isinstance(trace.get("session"), dict) else {}
    duration = None
    for value in (
        trace.get("durationMs"),
        trace.get("totalDurationMs"),
        session.get("totalDurationMs"),
    ):
        if as_number(value) is not None:  # numbers, or strings holding one, as checks read them
            duration = as_number(value)
            break
    return RowFacts(calls, duration, dict(dialogue.get("metadata") or {}), _case_texts(dialogue))


def _case_texts(dialogue: dict[str, Any]) -> dict[str, str]:
    if not (
        dialogue.get("expected")
        or dialogue.get("expectedBehavior")
        or dialogue.get("negativeBehavior")
    ):
        return {}
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.rubric.case_level import case_requirements
    from rubric_engine.rules.run import case_rule_requirements

    row = DialogueRow.model_validate(dialogue)
    found = case_requirements(row.expected_behavior, row.negative_behavior)
    return {r.id: r.text for r in (*found, *case_rule_requirements(row.expected))}


def build_report(
    task: dict[str, Any],
    rubric: EvalRubric,
    rows: Iterable[tuple[RowResult, RowUsage, RowFacts]],
    *,
    pass_score: int | None = None,
    by: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Build the report dict.

    Args:
        task: the ``task`` section (id, rubric key/version/hash, prompt, model …) as stored.
        rubric: the task's own snapshot, never the current file.
        rows: results in input order with their judge usage and agent facts.
        pass_score: the lowest passing final score; default :func:`default_pass_score`.
        by: slice names for the ``slices`` section (``intent``, ``category`` or a metadata
            field); the section is left out when empty.

    Returns:
        ``{task, totals, redFlags, intents, requirements, [slices], issueClusters, lowestRows,
        judgeErrors, warnings, agent, usage}`` — see README "Reports" — plus ``rules`` (seed
        001's report, :mod:`rubric_engine.rules.report`) when rows carry rule checks, and
        ``totals.checked`` when rows were decided by rules alone (``--judge none``: status
        CHECKED, no score; they count in ``redFlags``, ``requirements`` and the pass rate).

    Raises:
        ConfigurationError: ``pass_score`` outside the scale, or a ``by`` name that is neither
            ``intent``, ``category`` nor a metadata field of any row (the valid names are listed).
    """
    threshold = default_pass_score(rubric) if pass_score is None else pass_score
    scale = rubric.score_scale
    if not scale.min <= threshold <= scale.max:
        from rubric_engine.errors import ConfigurationError

        raise ConfigurationError(
            f"pass score {threshold} is outside the pack's scale {scale.min}..{scale.max}; "
            f"choose a value in that range"
        )
    results: list[RowResult] = []
    facts: list[RowFacts] = []
    usage = Counter[str]()
    cost = 0.0
    costed = 0
    latencies: list[float] = []
    for result, row_usage, row_fact in rows:
        results.append(result)
        facts.append(row_fact)
        usage["calls"] += row_usage.calls
        usage["promptTokens"] += row_usage.prompt_tokens
        usage["completionTokens"] += row_usage.completion_tokens
        if row_usage.cost_usd is not None:
            cost += row_usage.cost_usd
            costed += 1
        latencies.append(row_usage.latency_ms)

    scored = [r for r in results if r.status is RowStatus.SCORED]
    errors = [r for r in results if r.status is RowStatus.JUDGE_ERROR]
    checked = [r for r in results if r.status is RowStatus.CHECKED]
    finals = [r.final_score for r in scored if r.final_score is not None]
    verdicts = Counter(row_verdict(r, threshold) for r in results)
    durations = [f.duration_ms for f in facts if f.duration_ms is not None]
    report: dict[str, Any] = {
        "task": task,
        "totals": {
            "rows": len(results),
            "scored": len(scored),
            "judgeErrors": len(errors),
            "meanScore": mean(finals),
            "meanJudgeScore": mean([r.judge_score for r in scored if r.judge_score is not None]),
            "cappedRows": sum(1 for r in scored if r.capped_by),
            "rowsWithRedFlags": sum(1 for r in scored if r.red_flag_types),
            "passScore": threshold,
            "passedRows": verdicts["PASS"],
            "passRate": ratio(verdicts["PASS"], len(scored) + len(checked)),
            "scoreDistribution": {
                str(s): finals.count(s)
                for s in range(rubric.score_scale.min, rubric.score_scale.max + 1)
            },
            "verdictDistribution": {v: verdicts[v] for v in VERDICTS},
            "judgeErrorsByKind": dict(
                sorted(Counter(str(r.error.kind) for r in errors if r.error).items())
            ),
        },
        "redFlags": _red_flags(rubric, scored + checked),
        "intents": _intents(rubric, scored, threshold),
        "requirements": _requirements(
            rubric, scored + checked, {k: v for f in facts for k, v in f.case_texts.items()}
        ),
    }
    if by:
        report["slices"] = [
            slice_report(name, rubric, results, [f.metadata for f in facts], threshold)
            for name in by
        ]
    report |= {
        "issueClusters": issue_clusters(rubric, scored, threshold),
        "lowestRows": _lowest(scored),
        "judgeErrors": [
            {
                "rowId": r.row_id,
                "kind": str(r.error.kind) if r.error else None,
                "message": r.error.message if r.error else None,
            }
            for r in errors
        ],
        "warnings": dict(sorted(Counter(str(w.code) for r in results for w in r.warnings).items())),
        "agent": {
            "toolCallsTotal": sum(f.tool_calls for f in facts),
            "toolCallsMean": round(sum(f.tool_calls for f in facts) / len(facts), 4)
            if facts
            else None,
            "rowsWithDuration": len(durations),
            "durationMsMean": round(sum(durations) / len(durations), 1) if durations else None,
        },
        "usage": {
            "calls": usage["calls"],
            "promptTokens": usage["promptTokens"],
            "completionTokens": usage["completionTokens"],
            "costUsd": round(cost, 6) if costed else None,
            "latencyMsMean": round(sum(latencies) / len(latencies), 1) if latencies else None,
            "latencyMsP95": _p95(latencies),
        },
    }
    if checked:  # --judge none: rows decided by rule checks alone (SPEC §7)
        report["totals"]["checked"] = len(checked)
    rules = diagnosis_report(results)
    if rules is not None:  # seed 001's DiagnosisEvalReport over the rows' rule checks
        report["rules"] = rules
    return report


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)


def _red_flags(rubric: EvalRubric, scored: list[RowResult]) -> list[dict[str, Any]]:
    """Every declared type (zero counts too) plus orphans; most frequent first."""
    texts = {f.type: f.text for f in rubric.red_flags}
    order = {t: i for i, t in enumerate(rubric.red_flag_types)}
    hits: dict[str, list[str]] = {t: [] for t in rubric.red_flag_types}
    for r in scored:
        for flag in r.red_flag_types:
            hits.setdefault(flag, []).append(r.row_id)
    return [
        {"type": t, "text": texts.get(t), "count": len(ids), "rowIds": ids}
        for t, ids in sorted(hits.items(), key=lambda kv: (-len(kv[1]), order.get(kv[0], 1e9)))
    ]


def _intents(rubric: EvalRubric, scored: list[RowResult], pass_score: int) -> list[dict[str, Any]]:
    out = []
    for intent in rubric.intents:
        mine = [r for r in scored if r.intent_key == intent.key]
        passed = sum(1 for r in mine if row_verdict(r, pass_score) == "PASS")
        out.append(
            {
                "intentKey": intent.key,
                "name": intent.name,
                "rows": len(mine),
                "meanScore": mean([r.final_score for r in mine if r.final_score is not None]),
                "passRate": ratio(passed, len(mine)),
                "redFlagCount": sum(len(r.red_flag_types) for r in mine),
                "rowsWithRedFlags": sum(1 for r in mine if r.red_flag_types),
            }
        )
    return out


def _requirements(
    rubric: EvalRubric, scored: list[RowResult], case_texts: dict[str, str]
) -> list[dict[str, Any]]:
    """Pack requirements in pack order (zeros included), then case-level ones as first seen
    (their texts from the rows that carry them)."""
    counts: dict[str, Counter[str]] = {}
    for r in scored:
        for entry in r.reference_basis:
            counts.setdefault(entry.requirement_id, Counter())[STATUS_FIELD[entry.status]] += 1
    rows: list[dict[str, Any]] = []
    known = set()
    owners: list[tuple[str | None, Any]] = [(None, req) for req in rubric.common_requirements]
    for intent in rubric.intents:
        owners.extend((intent.key, req) for req in intent.requirements)
    for intent_key, req in owners:
        known.add(req.id)
        rows.append(
            _requirement_row(
                req.id,
                intent_key,
                req.category,
                req.critical,
                req.text,
                counts.get(req.id, Counter()),
            )
        )
    for rid, counter in counts.items():
        if rid not in known:
            rows.append(_requirement_row(rid, None, "CASE", False, case_texts.get(rid), counter))
    return rows


def _requirement_row(
    rid: str,
    intent_key: str | None,
    category: str,
    critical: bool,
    text: str | None,
    counter: Counter[str],
) -> dict[str, Any]:
    judged = counter["followed"] + counter["partial"] + counter["violated"]
    return {
        "id": rid,
        "intentKey": intent_key,
        "category": category,
        "critical": critical,
        "followed": counter["followed"],
        "partial": counter["partial"],
        "violated": counter["violated"],
        "notApplicable": counter["notApplicable"],
        "compliance": ratio(counter["followed"], judged),
        "text": text,
    }


def _lowest(scored: list[RowResult]) -> list[dict[str, Any]]:
    indexed = sorted(enumerate(scored), key=lambda ir: (ir[1].final_score or 0, ir[0]))
    return [
        {
            "rowId": r.row_id,
            "finalScore": r.final_score,
            "judgeScore": r.judge_score,
            "intentKey": r.intent_key,
            "violatedRequirementIds": [
                e.requirement_id
                for e in r.reference_basis
                if e.status is RequirementStatus.VIOLATED
            ],
            "partialRequirementIds": [
                e.requirement_id for e in r.reference_basis if e.status is RequirementStatus.PARTIAL
            ],
            "redFlagTypes": list(r.red_flag_types),
            "cappedBy": list(r.capped_by),
            "scoreExplanation": r.score_explanation,
        }
        for _, r in indexed[:LOWEST_ROWS]
    ]
