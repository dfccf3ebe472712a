"""Normalization: one validated verdict becomes a scored :class:`RowResult`.

The judge returns only the IDs of the requirements it found unmet or partial, and the red
flags it saw. The engine turns that into the row's full ``referenceBasis`` and final score,
in the steps ``docs/protocol.md`` describes (normalization):

1. the applicable set: common requirements, the intent's, the row's case-level ones;
2. the judge's lists cleaned: repeats dropped, an ID both unmet and partial counted unmet,
   IDs of another intent dropped (each with a warning);
3. one status per applicable requirement: a rule check's decides, an unobservable
   requirement is NOT_APPLICABLE, then the judge's VIOLATED / PARTIAL, else FOLLOWED;
4. red-flag backfill both ways (:func:`_backfill_red_flags`);
5. the score capped by the lowest ``violationScore`` of a VIOLATED requirement;
6. the warnings that point a reviewer at an odd verdict.

Pure and deterministic: the same snapshot, applicable set and verdict give the same result,
whatever the order of, or repeats in, the judge's lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    WarningCode,
)
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.verdict.model import QuestionsCheck, VerdictBase

V = RequirementStatus
#: a requirement's status and who decided it
Decision = tuple[RequirementStatus, BasisSource]


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
        verdict: output of the rubric's :func:`~rubric_engine.verdict.model.verdict_model`, so its
            intent key, IDs and red-flag types are already the pack's spellings.
        row_id: the row judged.
        case_requirements: the row's case-level requirements (step 1).
        warnings_in: warnings raised before normalization (e.g. re-asks); kept first.
        rule_results: status decided by a deterministic check, by requirement ID. For an
            applicable requirement it replaces the judge's status (source ``rule``) before red
            flags and caps are worked out, and red-flag backfill never overrides it. IDs that
            are not applicable are ignored.

    Raises:
        KeyError: ``verdict.intent_key`` is not in ``rubric`` (cannot happen for a verdict of
            this rubric's model).
    """
    compiled = CompiledRubric.of(rubric)
    applicable = compiled.applicable(verdict.intent_key, tuple(case_requirements))
    return normalize_applicable(compiled, verdict, row_id, applicable, warnings_in, rule_results)


def normalize_applicable(
    rubric: CompiledRubric,
    verdict: VerdictBase,
    row_id: str,
    applicable: Sequence[HardRequirement],
    warnings_in: Sequence[ProtocolWarning] = (),
    rule_results: Mapping[str, RequirementStatus] | None = None,
) -> RowResult:
    """:func:`normalize_verdict` for a caller that has the task's compiled rubric and the
    row's applicable set (step 1: :meth:`CompiledRubric.applicable` for the verdict's intent
    and the row's case-level requirements). An ID listed twice in ``applicable`` has one
    status (the last one listed decides whether it is observable) and one basis entry per
    listing."""
    warnings = list(warnings_in)
    by_id = {r.id: r for r in applicable}

    # step 2: the judge's lists, cleaned
    unmet = _dedupe(verdict.unmet_requirement_ids, warnings)
    partial = _dedupe(verdict.partial_requirement_ids, warnings)
    for rid in unmet:
        if rid in partial:
            warnings.append(ProtocolWarning(code=WarningCode.UNMET_AND_PARTIAL, requirement_id=rid))
    partial = [rid for rid in partial if rid not in unmet]
    violated_ids = _keep_applicable(unmet, by_id, warnings)
    partial_ids = _keep_applicable(partial, by_id, warnings)

    # step 3: one status per applicable requirement
    rule_results = rule_results or {}
    status: dict[str, Decision] = {}
    for req in applicable:
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

    # steps 4 and 5
    flags = _backfill_red_flags(verdict.red_flag_types, applicable, status, warnings)
    final_score, capped_by = _cap(verdict.score, applicable, status)

    # step 6
    warnings += _odd_verdict_warnings(rubric.rubric, verdict, final_score, flags, status)
    turns = verdict.evidence_turns()
    return RowResult(
        row_id=row_id,
        status=RowStatus.SCORED,
        intent_key=verdict.intent_key,
        judge_score=verdict.score,
        final_score=final_score,
        capped_by=capped_by,
        red_flag_types=rubric.in_flag_order(flags),
        reference_basis=tuple(
            _basis_entry(r.id, *status[r.id], _evidence(turns, r.id, *status[r.id]))
            for r in applicable
        ),
        warnings=tuple(warnings),
        score_explanation=verdict.score_explanation,
        questions_check=str(verdict.questions_check),
        questions_issues=tuple(verdict.questions_issues),
    )


def _dedupe(ids: Sequence[str], warnings: list[ProtocolWarning]) -> list[str]:
    """``ids`` in order, each once; one warning per repeat."""
    seen: dict[str, None] = {}
    for rid in ids:
        if rid in seen:
            warnings.append(
                ProtocolWarning(code=WarningCode.DUPLICATE_REQUIREMENT_ID, requirement_id=rid)
            )
        seen[rid] = None
    return list(seen)


def _keep_applicable(
    ids: list[str], applicable: Mapping[str, HardRequirement], warnings: list[ProtocolWarning]
) -> set[str]:
    """The applicable ``ids``; one warning per ID of another intent."""
    kept = set()
    for rid in ids:
        if rid in applicable:
            kept.add(rid)
        else:
            warnings.append(
                ProtocolWarning(code=WarningCode.CROSS_INTENT_REQUIREMENT, requirement_id=rid)
            )
    return kept


def _backfill_red_flags(
    reported: Sequence[str],
    applicable: Sequence[HardRequirement],
    status: dict[str, Decision],
    warnings: list[ProtocolWarning],
) -> set[str]:
    """Step 4. Changes ``status`` for backfilled requirements; returns the row's flags.

    The red lines are the applicable requirements that are critical, observable and have a
    red-flag type. A red line is all or nothing: a reported flag first turns every red line
    of its type that the judge called PARTIAL into VIOLATED (source ``backfill``,
    ``RED_FLAG_BACKFILLED``); a critical PARTIAL with no flag reported becomes VIOLATED too
    (``CRITICAL_PARTIAL_VIOLATED``), its flag added. Only when no red line of a reported type
    is then VIOLATED is the least severe one marked. A VIOLATED red line whose flag was not
    reported adds it (``RED_FLAG_ADDED``). A reported flag no red line can carry is kept and
    warned about (``ORPHAN_RED_FLAG``).
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
    # every violated red line whose flag the judge left out adds it, and each says so: which
    # rule of a type comes first in the pack changes nothing
    added = {r.red_flag_type for r in critical if status[r.id][0] is V.VIOLATED} - flags
    for req in critical:
        if status[req.id][0] is V.VIOLATED and req.red_flag_type in added:
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
    judge_score: int, applicable: Sequence[HardRequirement], status: Mapping[str, Decision]
) -> tuple[int, tuple[str, ...]]:
    """Step 5: the lowest cap among VIOLATED requirements, and who set it (in applicable
    order; none when the judge's score is already at or below it)."""
    caps = [
        (r.violation_score, r.id)
        for r in applicable
        if r.violation_score is not None and status[r.id][0] is V.VIOLATED
    ]
    final = min([judge_score, *(cap for cap, _ in caps)])
    if final == judge_score:
        return final, ()
    return final, tuple(rid for cap, rid in caps if cap == final)


def _odd_verdict_warnings(
    rubric: EvalRubric,
    verdict: VerdictBase,
    final_score: int,
    flags: set[str],
    status: Mapping[str, Decision],
) -> list[ProtocolWarning]:
    """Step 6: a minimum score with no red flag, a low score with nothing unmet, a questions
    check from a pack with no questions card."""
    found = []
    if final_score == rubric.score_scale.min and not flags:
        found.append(ProtocolWarning(code=WarningCode.MIN_SCORE_WITHOUT_RED_FLAG))
    explained = any(s is not V.FOLLOWED and s is not V.NOT_APPLICABLE for s, _ in status.values())
    if verdict.score <= rubric.score_scale.max - 2 and not explained:
        found.append(ProtocolWarning(code=WarningCode.LOW_SCORE_WITHOUT_UNMET_REQUIREMENT))
    if (
        not rubric.output_parsing.questions_card.enabled
        and verdict.questions_check != QuestionsCheck.NOT_PRESENT
    ):
        found.append(
            ProtocolWarning(
                code=WarningCode.QUESTIONS_CHECK_WITHOUT_CARD, detail=str(verdict.questions_check)
            )
        )
    return found


def _evidence(
    turns: Mapping[str, tuple[int, ...]], rid: str, status: RequirementStatus, source: BasisSource
) -> tuple[int, ...] | None:
    """The judge's evidence turns for an entry, only where the judge decided its status
    (VIOLATED or PARTIAL, by the judge or a backfill of its flag): a rule's or the default's
    status is not the judge's, so the judge's turns do not explain it."""
    judged = status in (V.VIOLATED, V.PARTIAL) and source in (
        BasisSource.JUDGE,
        BasisSource.BACKFILL,
    )
    return (turns.get(rid) or None) if judged else None


@lru_cache(maxsize=4096)
def _basis_entry(
    rid: str, status: RequirementStatus, source: BasisSource, evidence: tuple[int, ...] | None
) -> BasisEntry:
    """One referenceBasis entry. Entries are frozen values, so equal ones are shared rather
    than validated again for every row (a pack's requirements times their statuses: about a
    third of a row's normalization time otherwise)."""
    return BasisEntry(requirement_id=rid, status=status, source=source, evidence_turns=evidence)
