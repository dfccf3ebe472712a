"""The list-based report builder as it was before the streaming accumulator (main ec8b7ef),
kept verbatim as the oracle the streaming report is compared with (tests/test_report_stream.py).

Not used by the package. Only the function names changed (``list_build_report``,
``list_drilldown_rows``); shared helpers that did not change (``status_counts``,
``rules_section``, ``router_section``, the models) are imported.
"""

# ruff: noqa
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.model import (
    AgentSummary,
    CoViolated,
    IntentSummary,
    IssueCluster,
    JudgeErrorEntry,
    LowRow,
    RedFlagCount,
    Report,
    RequirementSummary,
    Slice,
    SliceGroup,
    SliceRequirement,
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
from rubric_engine.report.rows import RowFacts, RowUsage
from rubric_engine.report.rules_section import rules_section
from rubric_engine.report.slices import MISSING, slice_names, status_counts
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

DRILLDOWN_ROWS = 500

LOWEST_ROWS = 10


def list_build_report(
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
        "Reports"), with ``rules`` (the diagnosis report) when rows carry rule checks, and
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
        # --judge none: rows decided by rule checks alone (docs/rule-checks.md)
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
        # the DiagnosisEvalReport over the rows' rule checks (docs/cases.md)
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
    return UsageSummary(
        calls=sum(u.calls for u in usages),
        prompt_tokens=sum(u.prompt_tokens for u in usages),
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


def slice_report(
    name: str,
    rubric: EvalRubric,
    results: list[RowResult],
    metadata: list[dict[str, Any]],
    pass_score: int,
    fig: Figures = ROUNDED,
) -> Slice:
    """One slice: its groups, each with the counts of a small report (see
    :class:`~rubric_engine.report.model.SliceGroup`).

    Args:
        name: ``intent``, ``category`` or a metadata field.
        results: every row of the task, in input order (JUDGE_ERROR rows count in ``rows``
            only; they are outside every score and compliance denominator).
        metadata: each row's metadata, aligned with ``results``.

    Raises:
        ConfigurationError: ``name`` is none of the valid names (which are listed).
    """
    order = _requirement_order(rubric)
    category_of = {rid: req.category for rid, req in rubric.requirements_by_id.items()}
    groups: dict[str, list[int]] = {}
    if name == "intent":
        for intent in rubric.intents:
            groups[intent.key] = []
        for i, r in enumerate(results):
            groups.setdefault(r.intent_key or MISSING, []).append(i)
    elif name == "category":
        for category in dict.fromkeys(category_of.values()):
            groups[category] = []
        for i, r in enumerate(results):
            for category in dict.fromkeys(
                category_of.get(e.requirement_id, "CASE") for e in r.reference_basis
            ):
                groups.setdefault(category, []).append(i)
    else:
        if not any(name in m for m in metadata):
            raise ConfigurationError(
                f"slice {name!r} (--by, or a gate metric such as minPassRateBy.{name}) is "
                "neither a built-in slice nor a metadata field of any row; "
                f"valid: {', '.join(slice_names(k for m in metadata for k in m))}"
            )
        for i, m in enumerate(metadata):
            for value in _values(m.get(name)):
                groups.setdefault(value, []).append(i)
        groups = dict(sorted(groups.items(), key=lambda kv: (kv[0] == MISSING, kv[0])))

    out = []
    for value, members in groups.items():
        rows = [results[i] for i in members]
        only = (
            (lambda rid, v=value: category_of.get(rid, "CASE") == v) if name == "category" else None
        )
        out.append(_group(value, rows, pass_score, order, only, fig))
    return Slice(by=name, groups=tuple(out))


def _values(value: Any) -> list[str]:
    if value is None:
        return [MISSING]
    if isinstance(value, list | tuple):
        return [_text(v) for v in value] or [MISSING]
    return [_text(value)]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _requirement_order(rubric: EvalRubric) -> dict[str, int]:
    ids = [r.id for r in rubric.common_requirements]
    for intent in rubric.intents:
        ids.extend(r.id for r in intent.requirements)
    return {rid: i for i, rid in enumerate(ids)}


def _group(
    value: str,
    rows: list[RowResult],
    pass_score: int,
    order: dict[str, int],
    only: Any,
    fig: Figures,
) -> SliceGroup:
    scored = [r for r in rows if r.status is RowStatus.SCORED]
    counts: dict[str, Counter[str]] = {}
    for r in scored:
        for entry in r.reference_basis:
            if only is None or only(entry.requirement_id):
                counts.setdefault(entry.requirement_id, Counter())[STATUS_FIELD[entry.status]] += 1
    total: Counter[str] = Counter()
    for counter in counts.values():
        total.update(counter)
    ranked = sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    return SliceGroup(
        value=value,
        rows=len(rows),
        scored=len(scored),
        mean_score=fig.mean([r.final_score for r in scored if r.final_score is not None]),
        pass_rate=fig.ratio(sum(row_outcome(r, pass_score) == "PASS" for r in scored), len(scored)),
        red_flag_rows=sum(1 for r in scored if r.red_flag_types),
        **status_counts(total, fig),
        requirements=tuple(SliceRequirement(id=rid, **status_counts(c, fig)) for rid, c in ranked),
    )


EXAMPLE_ROWS = 5


def _violated(row: RowResult) -> list[str]:
    return [e.requirement_id for e in row.reference_basis if e.status is RequirementStatus.VIOLATED]


def issue_clusters(
    rubric: EvalRubric, scored: list[RowResult], pass_score: int, fig: Figures = ROUNDED
) -> tuple[IssueCluster, ...]:
    """Ranked clusters (see :class:`~rubric_engine.report.model.IssueCluster`).

    Args:
        scored: the task's SCORED rows in input order.
        pass_score: rows at or above it without a red flag are not low.

    Returns:
        Empty when no row is low. ``rowIds`` are in input order; ``exampleRowIds`` are
        the lowest-scoring first. Case-level requirements (``CASE_…``) have no text or category
        in the pack and show ``null``.
    """
    reqs = rubric.requirements_by_id
    order = {rid: i for i, rid in enumerate(reqs)}
    top = rubric.score_scale.max + 1

    def severity(rid: str) -> tuple[int, int, int]:
        req = reqs.get(rid)
        if req is None:
            return (1, top, len(order))
        cap = req.violation_score if req.violation_score is not None else top
        return (0 if req.critical else 1, cap, order[rid])

    low = [r for r in scored if row_outcome(r, pass_score) != "PASS"]
    violated = {r.row_id: set(_violated(r)) for r in low}  # rowIds are unique in a task
    remaining = [r for r in low if violated[r.row_id]]
    groups: list[tuple[str | None, list[RowResult]]] = []
    while remaining:
        counts = Counter(rid for r in remaining for rid in violated[r.row_id])
        lead = min(counts, key=lambda rid: (-counts[rid], *severity(rid), rid))
        members = [r for r in remaining if lead in violated[r.row_id]]
        remaining = [r for r in remaining if lead not in violated[r.row_id]]
        groups.append((lead, members))
    unexplained = [r for r in low if not violated[r.row_id]]
    if unexplained:
        groups.append((None, unexplained))

    clusters = [_cluster(lead, members, rubric, violated, fig) for lead, members in groups]
    clusters.sort(
        key=lambda c: (
            c.lead_requirement_id is None,
            -c.size,
            -c.red_flag_share,
            c.mean_score,
            order.get(c.lead_requirement_id or "", len(order)),
        )
    )
    return tuple(c.model_copy(update={"rank": rank}) for rank, c in enumerate(clusters, start=1))


def _cluster(
    lead: str | None,
    members: list[RowResult],
    rubric: EvalRubric,
    violated: dict[str, set[str]],
    fig: Figures,
) -> IssueCluster:
    reqs = rubric.requirements_by_id
    req = reqs.get(lead) if lead else None
    finals = [r.final_score for r in members if r.final_score is not None]
    others = Counter(rid for r in members for rid in violated[r.row_id] if rid != lead)
    flags = Counter(flag for r in members for flag in r.red_flag_types)
    lowest = sorted(enumerate(members), key=lambda ir: (ir[1].final_score or 0, ir[0]))
    return IssueCluster(
        rank=0,  # set once the clusters are ranked
        lead_requirement_id=lead,
        text=req.text if req else None,
        critical=bool(req and req.critical),
        category=req.category if req else None,
        size=len(members),
        row_ids=tuple(r.row_id for r in members),
        example_row_ids=tuple(r.row_id for _, r in lowest[:EXAMPLE_ROWS]),
        mean_score=fig.mean(finals),
        red_flag_share=fig.ratio(sum(1 for r in members if r.red_flag_types), len(members)) or 0.0,
        red_flag_types=dict(sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        co_violated=tuple(
            CoViolated(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None)
            for rid, n in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )


def list_drilldown_rows(results: list[RowResult], pass_score: int) -> list[RowResult]:
    """Every row when they fit; else the worst first (red flag, JUDGE_ERROR, failing, lowest
    score), kept in input order."""
    if len(results) <= DRILLDOWN_ROWS:
        return results
    rank = {"RED_FLAG": 0, "JUDGE_ERROR": 1, "FAIL": 2}
    order = sorted(
        range(len(results)),
        key=lambda i: (
            rank.get(row_outcome(results[i], pass_score), 3),
            results[i].final_score if results[i].final_score is not None else 0,
            i,
        ),
    )
    return [results[i] for i in sorted(order[:DRILLDOWN_ROWS])]
