"""Server-side normalization of one validated verdict (SPEC §5 steps 1–5; seed 003 §七, §八).

The judge returns only unmet IDs; the engine expands them into a full ``referenceBasis``,
keeps unobservable rules NOT_APPLICABLE, backfills red flags both ways, and caps the score.
Pure and deterministic: the same snapshot, case requirements and verdict give the same
:class:`RowResult`, whatever the order of, or duplicates in, the judge's lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from rubric_engine.results import (
    BasisEntry,
    BasisSource,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    WarningCode,
)
from rubric_engine.rubric.case_level import applicable_requirements
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.verdict import QuestionsCheck, VerdictBase

V = RequirementStatus


def _dedupe(ids: Sequence[str], warnings: list[ProtocolWarning]) -> list[str]:
    seen: dict[str, None] = {}
    for rid in ids:
        if rid in seen:
            warnings.append(
                ProtocolWarning(code=WarningCode.DUPLICATE_REQUIREMENT_ID, requirement_id=rid)
            )
        seen[rid] = None
    return list(seen)


def _keep_applicable(
    ids: list[str], applicable: dict[str, HardRequirement], warnings: list[ProtocolWarning]
) -> set[str]:
    kept = set()
    for rid in ids:
        if rid in applicable:
            kept.add(rid)
        else:
            warnings.append(
                ProtocolWarning(code=WarningCode.CROSS_INTENT_REQUIREMENT, requirement_id=rid)
            )
    return kept


@lru_cache(maxsize=4096)
def _basis_entry(
    rid: str,
    status: RequirementStatus,
    source: BasisSource,
    evidence_turns: tuple[int, ...] | None = None,
) -> BasisEntry:
    """Entries are frozen values, so equal ones are shared instead of rebuilt per row."""
    return BasisEntry(
        requirement_id=rid, status=status, source=source, evidence_turns=evidence_turns
    )


def _evidence(
    turns: Mapping[str, tuple[int, ...]], rid: str, status: RequirementStatus, source: BasisSource
) -> tuple[int, ...] | None:
    """The judge's turns for an entry it decided unmet (or a red line it called partial).

    A rule's or the default's status is not the judge's, so the judge's turns do not explain it.
    """
    if status in (V.VIOLATED, V.PARTIAL) and source in (BasisSource.JUDGE, BasisSource.BACKFILL):
        return turns.get(rid) or None
    return None


def normalize_verdict(
    rubric: EvalRubric,
    verdict: VerdictBase,
    row_id: str,
    case_requirements: Sequence[HardRequirement] = (),
    warnings_in: Sequence[ProtocolWarning] = (),
    rule_results: Mapping[str, RequirementStatus] | None = None,
) -> RowResult:
    """Expand a validated verdict into a scored :class:`RowResult`.

    Args:
        rubric: the task's snapshot.
        verdict: output of the rubric's :func:`~rubric_engine.verdict.verdict_model`, so its
            intent key, IDs and red-flag types are already the pack's spellings.
        row_id: the row judged.
        case_requirements: the row's case-level requirements (SPEC §5 step 1).
        warnings_in: warnings raised before normalization (e.g. re-asks); kept first.
        rule_results: status decided by a deterministic check, by requirement ID (SPEC §5
            step 6, §7). For an applicable requirement it replaces the judge's status (source
            ``rule``) before red flags and caps are worked out, and red-flag backfill never
            overrides it. IDs that are not applicable are ignored.

    Returns:
        A ``SCORED`` row. Steps: (1) applicable = common ∪ intent ∪ case-level; (2) de-duplicate,
        drop IDs of other intents (warning); (3) one basis entry per applicable requirement,
        ``observableInData: false`` always NOT_APPLICABLE; (4) red-flag backfill both ways —
        a reported flag with no violated requirement of its type marks the least severe
        applicable critical requirement of that type VIOLATED (see ``_backfill_red_flags``),
        orphans are kept and counted; (5) ``finalScore = min(judgeScore, caps of VIOLATED)``.

    Raises:
        KeyError: ``verdict.intent_key`` is not in ``rubric`` (cannot happen for a verdict of
            this rubric's model).
    """
    applicable = applicable_requirements(rubric, verdict.intent_key, tuple(case_requirements))
    return normalize_applicable(rubric, verdict, row_id, applicable, warnings_in, rule_results)


def normalize_applicable(
    rubric: EvalRubric,
    verdict: VerdictBase,
    row_id: str,
    applicable_list: Sequence[HardRequirement],
    warnings_in: Sequence[ProtocolWarning] = (),
    rule_results: Mapping[str, RequirementStatus] | None = None,
) -> RowResult:
    """:func:`normalize_verdict` for a caller that has already worked out the applicable set.

    Args:
        applicable_list: exactly
            :func:`~rubric_engine.rubric.case_level.applicable_requirements` for the
            verdict's intent and the row's case-level requirements (the row-result step
            computes it once and also uses it to pick the rule results).

    The other arguments, the steps and the result are :func:`normalize_verdict`'s.
    """
    warnings = list(warnings_in)
    rule_results = rule_results or {}
    applicable = {r.id: r for r in applicable_list}

    unmet = _dedupe(verdict.unmet_requirement_ids, warnings)
    partial = _dedupe(verdict.partial_requirement_ids, warnings)
    for rid in unmet:
        if rid in partial:
            warnings.append(ProtocolWarning(code=WarningCode.UNMET_AND_PARTIAL, requirement_id=rid))
    partial = [rid for rid in partial if rid not in unmet]
    violated_ids = _keep_applicable(unmet, applicable, warnings)
    partial_ids = _keep_applicable(partial, applicable, warnings)

    status: dict[str, tuple[RequirementStatus, BasisSource]] = {}
    for req in applicable_list:
        if req.id in rule_results:
            status[req.id] = (rule_results[req.id], BasisSource.RULE)
        elif not req.observable_in_data:
            if req.id in violated_ids or req.id in partial_ids:
                warnings.append(
                    ProtocolWarning(code=WarningCode.UNOBSERVABLE_REPORTED, requirement_id=req.id)
                )
            status[req.id] = (V.NOT_APPLICABLE, BasisSource.DEFAULT)
        elif req.id in violated_ids:
            status[req.id] = (V.VIOLATED, BasisSource.JUDGE)
        elif req.id in partial_ids:
            status[req.id] = (V.PARTIAL, BasisSource.JUDGE)
        else:
            status[req.id] = (V.FOLLOWED, BasisSource.DEFAULT)

    flags = _backfill_red_flags(verdict.red_flag_types, applicable_list, status, warnings)
    judge_score = verdict.score
    turns = verdict.evidence_turns()
    final_score, capped_by = _cap(judge_score, applicable_list, status)

    if final_score == rubric.score_scale.min and not flags:
        warnings.append(ProtocolWarning(code=WarningCode.MIN_SCORE_WITHOUT_RED_FLAG))
    explained = any(s is not V.FOLLOWED and s is not V.NOT_APPLICABLE for s, _ in status.values())
    if judge_score <= rubric.score_scale.max - 2 and not explained:
        warnings.append(ProtocolWarning(code=WarningCode.LOW_SCORE_WITHOUT_UNMET_REQUIREMENT))
    if (
        not rubric.output_parsing.questions_card.enabled
        and verdict.questions_check != QuestionsCheck.NOT_PRESENT
    ):
        warnings.append(
            ProtocolWarning(
                code=WarningCode.QUESTIONS_CHECK_WITHOUT_CARD, detail=str(verdict.questions_check)
            )
        )

    order = {t: i for i, t in enumerate(rubric.red_flag_types)}
    return RowResult(
        row_id=row_id,
        status=RowStatus.SCORED,
        intent_key=verdict.intent_key,
        judge_score=judge_score,
        final_score=final_score,
        capped_by=capped_by,
        red_flag_types=tuple(sorted(flags, key=lambda t: (order.get(t, len(order)), t))),
        reference_basis=tuple(
            _basis_entry(r.id, *status[r.id], _evidence(turns, r.id, *status[r.id]))
            for r in applicable_list
        )
        if turns
        else tuple(_basis_entry(r.id, *status[r.id]) for r in applicable_list),
        warnings=tuple(warnings),
        score_explanation=verdict.score_explanation,
        questions_check=str(verdict.questions_check),
        questions_issues=tuple(verdict.questions_issues),
    )


def _backfill_red_flags(
    reported: Sequence[str],
    applicable: Sequence[HardRequirement],
    status: dict[str, tuple[RequirementStatus, BasisSource]],
    warnings: list[ProtocolWarning],
) -> set[str]:
    """SPEC §5 step 4. Mutates ``status`` for backfilled requirements; returns the row's flags.

    A red line is all or nothing: a reported flag first turns every critical requirement of
    its type that the judge called PARTIAL into VIOLATED (source ``backfill``,
    ``RED_FLAG_BACKFILLED``); a critical PARTIAL with no flag reported becomes VIOLATED too
    (``CRITICAL_PARTIAL_VIOLATED``), its flag added. Only when no requirement of a reported
    type is then VIOLATED is the least severe one marked.
    """
    critical = [r for r in applicable if r.critical and r.red_flag_type and r.observable_in_data]
    # a rule's decision is the data's, not the judge's: a reported flag cannot overturn it
    backfillable = [r for r in critical if status[r.id][1] is not BasisSource.RULE]
    reported = list(dict.fromkeys(reported))
    for req in backfillable:
        if req.red_flag_type in reported and status[req.id][0] is V.PARTIAL:
            status[req.id] = (V.VIOLATED, BasisSource.BACKFILL)
            warnings.append(
                ProtocolWarning(
                    code=WarningCode.RED_FLAG_BACKFILLED,
                    requirement_id=req.id,
                    red_flag_type=req.red_flag_type,
                    detail="named as partial by the judge; a red line is all or nothing",
                )
            )
    # the same rule without a reported flag: a critical requirement is never PARTIAL
    upgraded: set[str] = set()
    for req in backfillable:
        if status[req.id][0] is V.PARTIAL:
            status[req.id] = (V.VIOLATED, BasisSource.BACKFILL)
            upgraded.add(req.id)
            warnings.append(
                ProtocolWarning(
                    code=WarningCode.CRITICAL_PARTIAL_VIOLATED,
                    requirement_id=req.id,
                    red_flag_type=req.red_flag_type,
                    detail="named as partial by the judge; a red line is all or nothing, so its "
                    "flag is added and its cap applies",
                )
            )
    violated_types = {r.red_flag_type for r in critical if status[r.id][0] is V.VIOLATED}
    flags: set[str] = set()
    for flag in reported:
        flags.add(flag)
        if flag in violated_types:
            continue
        candidates = [r for r in backfillable if r.red_flag_type == flag]
        if not candidates:
            warnings.append(ProtocolWarning(code=WarningCode.ORPHAN_RED_FLAG, red_flag_type=flag))
            continue
        # The least severe candidate (highest cap; no cap is highest), first in pack order.
        # Marking every candidate would let an extra violation *raise* the score: naming the
        # mildest rule of the type would stop the backfill of a harsher one.
        target = max(candidates, key=lambda r: (r.violation_score is None, r.violation_score or 0))
        status[target.id] = (V.VIOLATED, BasisSource.BACKFILL)
        others = [r.id for r in candidates if r is not target]
        warnings.append(
            ProtocolWarning(
                code=WarningCode.RED_FLAG_BACKFILLED,
                requirement_id=target.id,
                red_flag_type=flag,
                detail=f"also of this type: {', '.join(others)}" if others else None,
            )
        )
    for req in critical:
        if status[req.id][0] is V.VIOLATED and req.red_flag_type not in flags:
            assert req.red_flag_type is not None
            flags.add(req.red_flag_type)
            if req.id in upgraded:
                continue  # its CRITICAL_PARTIAL_VIOLATED warning says the flag was added
            warnings.append(
                ProtocolWarning(
                    code=WarningCode.RED_FLAG_ADDED,
                    requirement_id=req.id,
                    red_flag_type=req.red_flag_type,
                )
            )
    return flags


def _cap(
    judge_score: int,
    applicable: Sequence[HardRequirement],
    status: dict[str, tuple[RequirementStatus, BasisSource]],
) -> tuple[int, tuple[str, ...]]:
    """SPEC §5 step 5: the lowest cap among VIOLATED requirements, and who set it."""
    caps = [
        (r.violation_score, r.id)
        for r in applicable
        if r.violation_score is not None and status[r.id][0] is V.VIOLATED
    ]
    final = min([judge_score, *(cap for cap, _ in caps)])
    if final == judge_score:
        return final, ()
    return final, tuple(rid for cap, rid in caps if cap == final)
