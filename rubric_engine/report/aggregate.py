"""Aggregate a task's stored rows into the report structure (SPEC §9; seed 003 §四).

Input is only what the store holds: the task section (from the task record), its rubric
snapshot and its rows. Output is a :class:`~rubric_engine.report.model.Report` whose JSON key
order and number formatting are fixed, so rebuilding a report from the same task gives the same
bytes. Pure: no I/O, no clock.

Rules: mean scores use SCORED rows only; compliance per requirement is
FOLLOWED / (FOLLOWED + PARTIAL + VIOLATED) with NOT_APPLICABLE and JUDGE_ERROR rows outside
every denominator (SPEC §5 step 7); ``null`` when the denominator is 0. Pass, pass rate and a
row's outcome are defined in :mod:`rubric_engine.report.outcome`. A referenceBasis entry's
``source`` (judge, rule, default, backfill) does not change how it is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rubric_engine.report.clusters import issue_clusters
from rubric_engine.report.model import (
    AgentSummary,
    IntentSummary,
    JudgeErrorEntry,
    LowRow,
    RedFlagCount,
    Report,
    RequirementSummary,
    TaskSection,
    Totals,
    UsageSummary,
)
from rubric_engine.report.outcome import (
    EXACT,
    OUTCOMES,
    ROUNDED,
    STATUS_FIELD,
    Figures,
    default_pass_score,
    row_outcome,
)
from rubric_engine.report.router import router_section
from rubric_engine.report.rows import RowFacts, RowUsage, row_facts
from rubric_engine.report.rules_section import rules_section
from rubric_engine.report.slices import slice_report, status_counts
from rubric_engine.results import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

__all__ = [
    "OUTCOMES",
    "RowFacts",
    "RowUsage",
    "build_report",
    "default_pass_score",
    "row_facts",
    "row_outcome",
]

LOWEST_ROWS = 10


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
        The report (sections in :class:`~rubric_engine.report.model.Report`; README
        "Reports"), with ``rules`` (seed 001's report) when rows carry rule checks, and
        ``totals.checked`` when rows were decided by rules alone (``--judge none``: status
        CHECKED, no score; they count in ``redFlags``, ``requirements`` and the pass rate).

    Raises:
        ConfigurationError: ``pass_score`` outside the scale, or a ``by`` name that is neither
            ``intent``, ``category`` nor a metadata field of any row (the valid names are listed).
    """
    fig = EXACT if exact else ROUNDED
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
    usages: list[RowUsage] = []
    for result, row_usage, row_fact in rows:
        results.append(result)
        facts.append(row_fact)
        usages.append(row_usage)

    scored = [r for r in results if r.status is RowStatus.SCORED]
    errors = [r for r in results if r.status is RowStatus.JUDGE_ERROR]
    checked = [r for r in results if r.status is RowStatus.CHECKED]
    finals = [r.final_score for r in scored if r.final_score is not None]
    outcomes = Counter(row_outcome(r, threshold) for r in results)
    totals = Totals(
        rows=len(results),
        scored=len(scored),
        judge_errors=len(errors),
        mean_score=fig.mean(finals),
        mean_judge_score=fig.mean([r.judge_score for r in scored if r.judge_score is not None]),
        capped_rows=sum(1 for r in scored if r.capped_by),
        rows_with_red_flags=sum(1 for r in scored if r.red_flag_types),
        pass_score=threshold,
        passed_rows=outcomes["PASS"],
        pass_rate=fig.ratio(outcomes["PASS"], len(scored) + len(checked)),
        score_distribution={str(s): finals.count(s) for s in range(scale.min, scale.max + 1)},
        outcome_distribution={o: outcomes[o] for o in OUTCOMES},
        judge_errors_by_kind=dict(
            sorted(Counter(str(r.error.kind) for r in errors if r.error).items())
        ),
        # --judge none: rows decided by rule checks alone (SPEC §7)
        checked=len(checked) if checked else None,
    )
    slices = (
        tuple(
            slice_report(name, rubric, results, [f.metadata for f in facts], threshold, fig)
            for name in by
        )
        if by
        else None
    )
    return Report(
        task=task,
        totals=totals,
        red_flags=_red_flags(rubric, scored + checked),
        intents=_intents(rubric, scored, threshold, fig),
        requirements=_requirements(
            rubric, scored + checked, {k: v for f in facts for k, v in f.case_texts.items()}, fig
        ),
        slices=slices,
        issue_clusters=issue_clusters(rubric, scored, threshold, fig),
        lowest_rows=_lowest(scored),
        judge_errors=tuple(
            JudgeErrorEntry(
                row_id=r.row_id,
                kind=str(r.error.kind) if r.error else None,
                message=r.error.message if r.error else None,
            )
            for r in errors
        ),
        warnings=dict(sorted(Counter(str(w.code) for r in results for w in r.warnings).items())),
        agent=_agent(facts),
        usage=_usage(usages),
        # seed 001's DiagnosisEvalReport over the rows' rule checks
        rules=rules_section(results),
        router=router_section([f.metadata for f in facts], fig),
    )


def _agent(facts: list[RowFacts]) -> AgentSummary:
    durations = [f.duration_ms for f in facts if f.duration_ms is not None]
    calls = sum(f.tool_calls for f in facts)
    return AgentSummary(
        tool_calls_total=calls,
        tool_calls_mean=round(calls / len(facts), 4) if facts else None,
        rows_with_duration=len(durations),
        duration_ms_mean=round(sum(durations) / len(durations), 1) if durations else None,
    )


def _usage(usages: list[RowUsage]) -> UsageSummary:
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    latencies = [u.latency_ms for u in usages]
    cache_read = sum(u.cache_read_tokens for u in usages)
    cache_creation = sum(u.cache_creation_tokens for u in usages)
    cached = bool(cache_read or cache_creation)  # else the keys stay out (UsageSummary)
    return UsageSummary(
        calls=sum(u.calls for u in usages),
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        cache_read_tokens=cache_read if cached else None,
        cache_creation_tokens=cache_creation if cached else None,
        completion_tokens=sum(u.completion_tokens for u in usages),
        cost_usd=round(sum(costs, 0.0), 6) if costs else None,
        latency_ms_mean=round(sum(latencies) / len(latencies), 1) if latencies else None,
        latency_ms_p95=_p95(latencies),
    )


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)


def _red_flags(rubric: EvalRubric, scored: list[RowResult]) -> tuple[RedFlagCount, ...]:
    """Every declared type (zero counts too) plus orphans; most frequent first."""
    texts = {f.type: f.text for f in rubric.red_flags}
    order = {t: i for i, t in enumerate(rubric.red_flag_types)}
    hits: dict[str, list[str]] = {t: [] for t in rubric.red_flag_types}
    for r in scored:
        for flag in r.red_flag_types:
            hits.setdefault(flag, []).append(r.row_id)
    return tuple(
        RedFlagCount(type=t, text=texts.get(t), count=len(ids), row_ids=tuple(ids))
        for t, ids in sorted(hits.items(), key=lambda kv: (-len(kv[1]), order.get(kv[0], 1e9)))
    )


def _intents(
    rubric: EvalRubric, scored: list[RowResult], pass_score: int, fig: Figures
) -> tuple[IntentSummary, ...]:
    out = []
    for intent in rubric.intents:
        mine = [r for r in scored if r.intent_key == intent.key]
        passed = sum(1 for r in mine if row_outcome(r, pass_score) == "PASS")
        out.append(
            IntentSummary(
                intent_key=intent.key,
                name=intent.name,
                rows=len(mine),
                mean_score=fig.mean([r.final_score for r in mine if r.final_score is not None]),
                pass_rate=fig.ratio(passed, len(mine)),
                red_flag_count=sum(len(r.red_flag_types) for r in mine),
                rows_with_red_flags=sum(1 for r in mine if r.red_flag_types),
            )
        )
    return tuple(out)


def _requirements(
    rubric: EvalRubric, scored: list[RowResult], case_texts: dict[str, str], fig: Figures
) -> tuple[RequirementSummary, ...]:
    """Pack requirements in pack order (zeros included), then case-level ones as first seen
    (their texts from the rows that carry them)."""
    counts: dict[str, Counter[str]] = {}
    for r in scored:
        for entry in r.reference_basis:
            counts.setdefault(entry.requirement_id, Counter())[STATUS_FIELD[entry.status]] += 1
    rows: list[RequirementSummary] = []
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
                fig,
            )
        )
    for rid, counter in counts.items():
        if rid not in known:
            rows.append(
                _requirement_row(rid, None, "CASE", False, case_texts.get(rid), counter, fig)
            )
    return tuple(rows)


def _requirement_row(
    rid: str,
    intent_key: str | None,
    category: str,
    critical: bool,
    text: str | None,
    counter: Counter[str],
    fig: Figures,
) -> RequirementSummary:
    return RequirementSummary(
        id=rid,
        intent_key=intent_key,
        category=category,
        critical=critical,
        **status_counts(counter, fig),
        text=text,
    )


def _lowest(scored: list[RowResult]) -> tuple[LowRow, ...]:
    indexed = sorted(enumerate(scored), key=lambda ir: (ir[1].final_score or 0, ir[0]))
    return tuple(
        LowRow(
            row_id=r.row_id,
            final_score=r.final_score,
            judge_score=r.judge_score,
            intent_key=r.intent_key,
            violated_requirement_ids=tuple(
                e.requirement_id
                for e in r.reference_basis
                if e.status is RequirementStatus.VIOLATED
            ),
            partial_requirement_ids=tuple(
                e.requirement_id for e in r.reference_basis if e.status is RequirementStatus.PARTIAL
            ),
            red_flag_types=tuple(r.red_flag_types),
            capped_by=tuple(r.capped_by),
            score_explanation=r.score_explanation,
            evidence_turns={
                e.requirement_id: e.evidence_turns for e in r.reference_basis if e.evidence_turns
            }
            or None,
        )
        for _, r in indexed[:LOWEST_ROWS]
    )
