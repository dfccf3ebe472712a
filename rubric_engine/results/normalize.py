"""Server-side normalization of one validated verdict (SPEC §5 steps 1–5; seed 003 §七, §八).

The judge returns only unmet IDs; the engine expands them into a full ``referenceBasis``,
keeps unobservable rules NOT_APPLICABLE, backfills red flags both ways, and caps the score.
Pure and deterministic: the same snapshot, case requirements and verdict give the same
:class:`RowResult`, whatever the order of, or duplicates in, the judge's lists.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from rubric_engine.results.model import (
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
from rubric_engine.verdict.model import QuestionsCheck, VerdictBase

V = RequirementStatus


def _dedupe(ids: Sequence[str], warnings: list[ProtocolWarning]) -> list[str]:
    once = dict.fromkeys(ids)
    if len(once) == len(ids):  # the usual list: nothing listed twice
        return list(once)
    seen: dict[str, None] = {}
    for rid in ids:
        if rid in seen:
            warnings.append(
                ProtocolWarning(code=WarningCode.DUPLICATE_REQUIREMENT_ID, requirement_id=rid)
            )
        seen[rid] = None
    return list(seen)


def _keep_applicable(
    ids: list[str], applicable: Container[str], warnings: list[ProtocolWarning]
) -> set[str]:
    """The applicable ``ids`` (already distinct); one warning per ID of another intent."""
    kept = {rid for rid in ids if rid in applicable}
    if len(kept) == len(ids):
        return kept
    for rid in ids:
        if rid not in applicable:
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
        verdict: output of the rubric's :func:`~rubric_engine.verdict.model.verdict_model`, so its
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


@dataclass(frozen=True)
class _Table:
    """What normalization needs of one applicable set, worked out once per set, not per row.

    Keyed by ID where a row's status is (one status per ID: the last requirement listed under
    an ID decides, as a dict of statuses does), by position where the referenceBasis, the caps
    and the red lines are (one per requirement listed).

    Attributes:
        positions: requirement ID -> its indexes in the applicable set (referenceBasis order).
        unobservable: IDs marked ``observableInData: false``: always NOT_APPLICABLE.
        unobservable_at: ``(index, ID)`` of every unobservable requirement, in order.
        basis: the referenceBasis when neither the judge nor a rule decides anything: FOLLOWED,
            or NOT_APPLICABLE for an unobservable requirement (source ``default``).
        critical: the observable critical requirements with a red-flag type, in order.
        critical_ids: their IDs.
        critical_at: ID -> ``(index in critical, requirement)`` of each of them.
        critical_by_flag: red-flag type -> its critical requirements, in order.
        caps: ID -> ``(index, violationScore, ID)`` of its requirements that have a cap.
    """

    reqs: tuple[HardRequirement, ...]
    positions: dict[str, tuple[int, ...]]
    unobservable: frozenset[str]
    unobservable_at: tuple[tuple[int, str], ...]
    basis: tuple[BasisEntry, ...]
    critical: tuple[HardRequirement, ...]
    critical_ids: frozenset[str]
    critical_at: dict[str, tuple[tuple[int, HardRequirement], ...]]
    critical_by_flag: dict[str | None, tuple[HardRequirement, ...]]
    caps: dict[str, tuple[tuple[int, int, str], ...]]

    @classmethod
    def of(cls, reqs: Sequence[HardRequirement]) -> _Table:
        observable = {r.id: r.observable_in_data for r in reqs}  # the last one listed decides
        positions: dict[str, tuple[int, ...]] = {}
        caps: dict[str, tuple[tuple[int, int, str], ...]] = {}
        for n, r in enumerate(reqs):
            positions[r.id] = (*positions.get(r.id, ()), n)
            if r.violation_score is not None:
                caps[r.id] = (*caps.get(r.id, ()), (n, r.violation_score, r.id))
        critical = tuple(r for r in reqs if r.critical and r.red_flag_type and r.observable_in_data)
        critical_at: dict[str, tuple[tuple[int, HardRequirement], ...]] = {}
        by_flag: dict[str | None, tuple[HardRequirement, ...]] = {}
        for n, r in enumerate(critical):
            critical_at[r.id] = (*critical_at.get(r.id, ()), (n, r))
            by_flag[r.red_flag_type] = (*by_flag.get(r.red_flag_type, ()), r)
        return cls(
            reqs=tuple(reqs),
            positions=positions,
            unobservable=frozenset(rid for rid, seen in observable.items() if not seen),
            unobservable_at=tuple(
                (n, r.id) for n, r in enumerate(reqs) if not r.observable_in_data
            ),
            basis=tuple(
                _basis_entry(r.id, _FOLLOWED if observable[r.id] else _NOT_APPLICABLE, _DEFAULT)
                for r in reqs
            ),
            critical=critical,
            critical_ids=frozenset(critical_at),
            critical_at=critical_at,
            critical_by_flag=by_flag,
            caps=caps,
        )

    def decided_critical(
        self, changed: Mapping[str, tuple[RequirementStatus, BasisSource]]
    ) -> list[HardRequirement]:
        """The critical requirements (:attr:`critical`) whose status is in ``changed``, in
        order: the only ones that can be PARTIAL or VIOLATED."""
        hit = self.critical_ids.intersection(changed)
        if len(hit) == 1:
            return [r for _, r in self.critical_at[next(iter(hit))]]
        return [r for _, r in sorted(at for rid in hit for at in self.critical_at[rid])]


_FOLLOWED, _PARTIAL, _VIOLATED, _NOT_APPLICABLE = (
    V.FOLLOWED,
    V.PARTIAL,
    V.VIOLATED,
    V.NOT_APPLICABLE,
)
_JUDGE, _RULE, _DEFAULT, _BACKFILL = (
    BasisSource.JUDGE,
    BasisSource.RULE,
    BasisSource.DEFAULT,
    BasisSource.BACKFILL,
)
#: the status of an observable requirement nobody decided
_FOLLOWED_BY_DEFAULT = (_FOLLOWED, _DEFAULT)

#: tables by the identities of their requirements (the table holds them, so an identity is
#: never another object's while its entry lives): one per intent, plus rows with case rules
_TABLES: dict[tuple[int, ...], _Table] = {}
_TABLES_MAX = 256


#: the last table found, by the identity of the sequence asked with (an intent's rows share
#: one tuple, :func:`~rubric_engine.rubric.case_level.applicable_requirements`)
_LAST: list[tuple[Sequence[HardRequirement], _Table]] = []


def _table(reqs: Sequence[HardRequirement]) -> _Table:
    for seen, table in _LAST:
        if seen is reqs:
            return table
    key = tuple(map(id, reqs))
    found = _TABLES.get(key)
    if found is None:
        found = _Table.of(reqs)
        if len(_TABLES) >= _TABLES_MAX:
            _TABLES.clear()
        _TABLES[key] = found
    if isinstance(reqs, tuple):  # a list may change: only a tuple is known by identity
        _LAST[:] = [(reqs, found), *_LAST[:7]]
    return found


#: the red-flag order of a rubric's rows, by the identity of its flag tuple (kept alive here)
_FLAG_ORDER: dict[int, tuple[tuple[str, ...], dict[str, int]]] = {}


def _flag_order(types: tuple[str, ...]) -> dict[str, int]:
    found = _FLAG_ORDER.get(id(types))
    if found is None or found[0] is not types:
        if len(_FLAG_ORDER) >= 64:
            _FLAG_ORDER.clear()
        found = _FLAG_ORDER[id(types)] = (types, {t: i for i, t in enumerate(types)})
    return found[1]


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

    The other arguments, the steps and the result are :func:`normalize_verdict`'s. What
    depends only on the applicable set (the default entries, red lines, caps) is worked out
    once per set (:class:`_Table`); a row works only on the statuses the judge or a rule
    decides (``changed``), every other entry keeping its default. What the steps decide
    (:class:`_Decided`) depends only on the set, the rubric and the verdict's lists, score,
    evidence turns and questions check (and the rule results): rows that repeat all of them
    share one decision (:func:`_decided`), only their rowId, explanation, questions issues
    and earlier warnings being their own.
    """
    table = _table(applicable_list)
    decided = _decided(rubric, table, verdict, rule_results)
    values = {
        "row_id": row_id,
        "status": RowStatus.SCORED,
        "intent_key": verdict.intent_key,
        "judge_score": verdict.score,
        "final_score": decided.final_score,
        "capped_by": decided.capped_by,
        "red_flag_types": decided.red_flag_types,
        "reference_basis": decided.basis,
        "warnings": (*warnings_in, *decided.warnings) if warnings_in else decided.warnings,
        "score_explanation": verdict.score_explanation,
        "questions_check": str(verdict.questions_check),
        "questions_issues": tuple(verdict.questions_issues),
    }
    if not _PLAIN_LAYOUT or not _validated_already(values, warnings_in):
        return RowResult(**values)
    return _scored_result(values)


#: the fields a SCORED result is given (its ``__pydantic_fields_set__``, as ``RowResult(...)``
#: of them records it); ``error`` and ``rules`` keep their default ``None``
_SCORED_FIELDS = frozenset(
    (
        "row_id",
        "status",
        "intent_key",
        "judge_score",
        "final_score",
        "capped_by",
        "red_flag_types",
        "reference_basis",
        "warnings",
        "score_explanation",
        "questions_check",
        "questions_issues",
    )
)
_set_attribute = object.__setattr__
#: a pydantic model instance holds exactly these (pydantic 2's documented instance
#: attributes); with another layout every result is validated instead
_PLAIN_LAYOUT = BaseModel.__slots__ == (
    "__dict__",
    "__pydantic_fields_set__",
    "__pydantic_extra__",
    "__pydantic_private__",
) and not (RowResult.__private_attributes__ or RowResult.__pydantic_post_init__)


def _validated_already(values: dict[str, Any], warnings_in: Sequence[ProtocolWarning]) -> bool:
    """Whether ``RowResult(**values)`` would keep every value as it is: the strings and the
    score of exactly those types (a validated verdict's are), the earlier warnings
    :class:`ProtocolWarning` objects. The rest is built here from the pack's validated values:
    tuples of str, ints, :class:`BasisEntry` and :class:`ProtocolWarning` objects."""
    explanation, issues = values["score_explanation"], values["questions_issues"]
    return (
        type(values["row_id"]) is str
        and type(values["intent_key"]) is str
        and type(values["judge_score"]) is int
        and (explanation is None or type(explanation) is str)
        and (not issues or all(type(issue) is str for issue in issues))
        and (not warnings_in or all(type(w) is ProtocolWarning for w in warnings_in))
    )


def _scored_result(values: dict[str, Any]) -> RowResult:
    """``RowResult(**values)`` for values it would keep as they are
    (:func:`_validated_already`), set as pydantic's own construction sets them: equal field
    for field, the same fields set. Validation would copy each tuple and check each of its
    objects again, per row; kept, the referenceBasis tuple of rows decided alike stays one
    object, which the report counts by identity
    (:class:`~rubric_engine.report.accumulate.ReportAccumulator`)."""
    result = RowResult.__new__(RowResult)
    _set_attribute(result, "__dict__", {**values, "error": None, "rules": None})
    _set_attribute(result, "__pydantic_fields_set__", set(_SCORED_FIELDS))
    _set_attribute(result, "__pydantic_extra__", None)
    _set_attribute(result, "__pydantic_private__", None)
    return result


@dataclass(frozen=True, slots=True)
class _Decided:
    """What normalization decides for one verdict: the warnings it raises (after the row's
    earlier ones), the referenceBasis, the final score, who capped it and the red flags.
    Frozen values only, so rows that share it share nothing they could change."""

    warnings: tuple[ProtocolWarning, ...]
    basis: tuple[BasisEntry, ...]
    final_score: int
    capped_by: tuple[str, ...]
    red_flag_types: tuple[str, ...]


#: decisions by (rubric, table, the verdict's inputs, rule results); the rubric and table are
#: kept beside each one, so an identity in a key is never another object's while it lives
_DECISIONS: dict[tuple[Any, ...], tuple[EvalRubric, _Table, _Decided]] = {}
#: distinct verdicts kept (about 1 KB each with their key); past it the cache starts again
_DECISIONS_MAX = 1024


def _decided(
    rubric: EvalRubric,
    table: _Table,
    verdict: VerdictBase,
    rule_results: Mapping[str, RequirementStatus] | None,
) -> _Decided:
    """:func:`_decide`, found again when a row repeats an earlier row's inputs exactly: the
    same rubric and applicable set (by identity), the verdict's unmet, partial and red-flag
    lists as listed (order and repeats included), score, evidence turns and questions check,
    and the same rule results in the same order."""
    turns = verdict.evidence_turns()
    key = (
        id(rubric),
        id(table),
        tuple(verdict.unmet_requirement_ids),
        tuple(verdict.partial_requirement_ids),
        tuple(verdict.red_flag_types),
        verdict.score,
        tuple(turns.items()) if turns else None,
        verdict.questions_check,
        tuple(rule_results.items()) if rule_results else None,
    )
    found = _DECISIONS.get(key)
    if found is not None and found[0] is rubric and found[1] is table:
        return found[2]
    decided = _decide(rubric, table, verdict, turns, rule_results)
    if len(_DECISIONS) >= _DECISIONS_MAX:
        _DECISIONS.clear()
    _DECISIONS[key] = (rubric, table, decided)
    return decided


def _decide(
    rubric: EvalRubric,
    table: _Table,
    verdict: VerdictBase,
    turns: Mapping[str, tuple[int, ...]],
    rule_results: Mapping[str, RequirementStatus] | None,
) -> _Decided:
    """SPEC §5 steps 2-5 for one verdict (``turns``: its :meth:`~VerdictBase.evidence_turns`)."""
    warnings: list[ProtocolWarning] = []
    applicable = table.positions
    unmet = _dedupe(verdict.unmet_requirement_ids, warnings)
    partial = _dedupe(verdict.partial_requirement_ids, warnings)
    if unmet and partial:
        for rid in unmet:
            if rid in partial:
                warnings.append(
                    ProtocolWarning(code=WarningCode.UNMET_AND_PARTIAL, requirement_id=rid)
                )
        partial = [rid for rid in partial if rid not in unmet]
    violated_ids = _keep_applicable(unmet, applicable, warnings)
    partial_ids = _keep_applicable(partial, applicable, warnings)

    # the statuses that are not the default: a rule's first, then the judge's
    changed: dict[str, tuple[RequirementStatus, BasisSource]] = (
        {rid: (rule_results[rid], _RULE) for rid in rule_results if rid in applicable}
        if rule_results
        else {}
    )
    if table.unobservable_at and (violated_ids or partial_ids):
        for _, rid in table.unobservable_at:
            if rid not in changed and (rid in violated_ids or rid in partial_ids):
                warnings.append(
                    ProtocolWarning(code=WarningCode.UNOBSERVABLE_REPORTED, requirement_id=rid)
                )
    unobservable = table.unobservable
    for rid in partial_ids:
        if rid not in changed and rid not in unobservable:
            changed[rid] = (_PARTIAL, _JUDGE)
    for rid in violated_ids:
        if rid not in changed and rid not in unobservable:
            changed[rid] = (_VIOLATED, _JUDGE)
    reported = verdict.red_flag_types
    if reported or not table.critical_ids.isdisjoint(changed):
        flags = _backfill_red_flags(reported, table, changed, warnings)
    else:
        flags = set()  # no flag reported and no red line decided: nothing to backfill
    judge_score = verdict.score
    final_score, capped_by = _cap(judge_score, table.caps, changed)

    if final_score == rubric.score_scale.min and not flags:
        warnings.append(ProtocolWarning(code=WarningCode.MIN_SCORE_WITHOUT_RED_FLAG))
    basis = list(table.basis)
    explained = False
    for rid, chosen in changed.items():
        if chosen[0] is not _FOLLOWED and chosen[0] is not _NOT_APPLICABLE:
            explained = True
        entry = _basis_entry(rid, *chosen, _evidence(turns, rid, *chosen) if turns else None)
        for n in applicable[rid]:
            basis[n] = entry
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

    if len(flags) > 1:
        order = _flag_order(rubric.red_flag_types)
        red_flag_types = tuple(sorted(flags, key=lambda t: (order.get(t, len(order)), t)))
    else:
        red_flag_types = tuple(flags)
    return _Decided(tuple(warnings), tuple(basis), final_score, capped_by, red_flag_types)


def _backfill_red_flags(
    reported: Sequence[str],
    table: _Table,
    changed: dict[str, tuple[RequirementStatus, BasisSource]],
    warnings: list[ProtocolWarning],
) -> set[str]:
    """SPEC §5 step 4. Records backfilled requirements in ``changed``; returns the row's flags.

    Args:
        table: the applicable set's; its :attr:`_Table.critical` requirements are the red
            lines (observable, critical, with a red-flag type); one nobody decided is FOLLOWED.
        changed: the statuses decided so far (by a rule or the judge), by ID.

    A red line is all or nothing: a reported flag first turns every critical requirement of
    its type that the judge called PARTIAL into VIOLATED (source ``backfill``,
    ``RED_FLAG_BACKFILLED``); a critical PARTIAL with no flag reported becomes VIOLATED too
    (``CRITICAL_PARTIAL_VIOLATED``), its flag added. Only when no requirement of a reported
    type is then VIOLATED is the least severe one marked.
    """
    decided = table.decided_critical(changed)  # only these can be PARTIAL or VIOLATED
    # a rule's decision is the data's, not the judge's: a reported flag cannot overturn it
    backfillable = [r for r in decided if changed[r.id][1] is not _RULE]
    reported = list(dict.fromkeys(reported))
    for req in backfillable:
        if req.red_flag_type in reported and changed[req.id][0] is _PARTIAL:
            changed[req.id] = (_VIOLATED, _BACKFILL)
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
        if changed[req.id][0] is _PARTIAL:
            changed[req.id] = (_VIOLATED, _BACKFILL)
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
    violated_types = {r.red_flag_type for r in decided if changed[r.id][0] is _VIOLATED}
    flags: set[str] = set()
    status = changed.get
    for flag in reported:
        flags.add(flag)
        if flag in violated_types:
            continue
        candidates = [
            r
            for r in table.critical_by_flag.get(flag, ())
            if status(r.id, _FOLLOWED_BY_DEFAULT)[1] is not _RULE
        ]
        if not candidates:
            warnings.append(ProtocolWarning(code=WarningCode.ORPHAN_RED_FLAG, red_flag_type=flag))
            continue
        # The least severe candidate (highest cap; no cap is highest), first in pack order.
        # Marking every candidate would let an extra violation *raise* the score: naming the
        # mildest rule of the type would stop the backfill of a harsher one.
        target = max(candidates, key=lambda r: (r.violation_score is None, r.violation_score or 0))
        changed[target.id] = (_VIOLATED, _BACKFILL)
        others = [r.id for r in candidates if r is not target]
        warnings.append(
            ProtocolWarning(
                code=WarningCode.RED_FLAG_BACKFILLED,
                requirement_id=target.id,
                red_flag_type=flag,
                detail=f"also of this type: {', '.join(others)}" if others else None,
            )
        )
    for req in table.decided_critical(changed):  # the backfilled ones included
        if changed[req.id][0] is _VIOLATED and req.red_flag_type not in flags:
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
    caps_of: Mapping[str, tuple[tuple[int, int, str], ...]],
    changed: Mapping[str, tuple[RequirementStatus, BasisSource]],
) -> tuple[int, tuple[str, ...]]:
    """SPEC §5 step 5: the lowest cap among VIOLATED requirements, and who set it (in
    applicable order). ``caps_of``: :attr:`_Table.caps`; only a decided status is VIOLATED."""
    caps: list[tuple[int, int, str]] = []
    for rid, (status, _) in changed.items():
        if status is _VIOLATED and rid in caps_of:
            caps.extend(caps_of[rid])
    if not caps:
        return judge_score, ()
    caps.sort()
    final = min(judge_score, *(cap for _, cap, _ in caps))
    if final == judge_score:
        return final, ()
    return final, tuple(rid for _, cap, rid in caps if cap == final)
