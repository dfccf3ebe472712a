"""The normalizer's tables (issue 18) change nothing: every result equals the one the
straightforward per-row normalizer gave before them, kept here as the reference (SPEC §5).

Drawn: each demo pack and the mini pack, any intent, unmet and partial lists with cross-intent,
unobservable and repeated IDs, reported red flags, rule results for any applicable ID, case
requirements (behaviours and rule checks, some critical with a cap), evidence turns
(``judge_v3``), and applicable sets that list an ID twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.results.model import (
    BasisSource,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    WarningCode,
)
from rubric_engine.results.normalize import _basis_entry, _evidence, normalize_applicable
from rubric_engine.rubric.case_level import applicable_requirements
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.verdict.model import QuestionsCheck, VerdictBase, verdict_model
from tests.test_normalize_properties import PACKS

V = RequirementStatus


# -- the reference: rubric_engine/results/normalize.py before its tables, unchanged
# ------------------


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


def reference_normalize(
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


# -- the comparison ---------------------------------------------------------------------------

CASE = [
    HardRequirement(id="CASE_EXPECTED_0000AAAA", category="CASE", text="do it", source="case"),
    HardRequirement(id="CASE_NEGATIVE_0000BBBB", category="CASE", text="never", source="case"),
    HardRequirement(id="CASE_RULE_0000CCCC", category="CASE", text="rule", source="rule"),
]


@st.composite
def rows(draw: Any) -> tuple[Any, ...]:
    rubric: EvalRubric = draw(st.sampled_from(PACKS))
    intent = draw(st.sampled_from([i.key for i in rubric.intents]))
    pack = list(applicable_requirements(rubric, intent, ()))
    extra: list[HardRequirement] = []
    for req in draw(st.lists(st.sampled_from(CASE), max_size=3, unique_by=lambda r: r.id)):
        if draw(st.booleans()) and rubric.red_flag_types:  # a case red line with a cap
            req = req.model_copy(
                update={
                    "critical": True,
                    "red_flag_type": draw(st.sampled_from(rubric.red_flag_types)),
                    "violation_score": draw(st.sampled_from([None, rubric.score_scale.min])),
                }
            )
        extra.append(req)
    applicable: Sequence[HardRequirement] = (*pack, *extra)
    if draw(st.integers(0, 9)) == 0:  # an ID listed twice (a case rule named like a pack rule)
        twin = draw(st.sampled_from(pack))
        twin = twin.model_copy(update={"observable_in_data": draw(st.booleans())})
        applicable = (*applicable, twin) if draw(st.booleans()) else [twin, *applicable]
    ids = [*rubric.requirements_by_id, *(r.id for r in extra)]
    pick = st.lists(st.sampled_from(ids), max_size=8)
    unmet, partial = draw(pick), draw(pick)
    evidence = draw(st.booleans())
    fields: dict[str, Any] = {
        "rowId": "r",
        "intentKey": intent,
        "score": draw(st.integers(rubric.score_scale.min, rubric.score_scale.max)),
        "redFlagTypes": draw(st.lists(st.sampled_from(list(rubric.red_flag_types)), max_size=3)),
        "unmetRequirementIds": unmet,
        "partialRequirementIds": partial,
        "questionsCheck": draw(st.sampled_from(list(QuestionsCheck))),
    }
    if evidence:
        fields["evidence"] = {
            rid: draw(st.lists(st.integers(0, 5), max_size=3)) for rid in {*unmet, *partial}
        }
    statuses = st.sampled_from(list(V))
    rules = draw(
        st.dictionaries(st.sampled_from([*ids, "NOT_A_RULE"]), statuses, max_size=4) | st.none()
    )
    warnings_in = tuple(
        ProtocolWarning(code=WarningCode.JUDGE_REASKED, detail=f"why {n}")
        for n in range(draw(st.integers(0, 2)))
    )
    return rubric, fields, evidence, [r.id for r in extra], applicable, warnings_in, rules


@settings(max_examples=600, deadline=None)
@given(rows())
def test_the_tables_give_the_reference_result(row: tuple[Any, ...]) -> None:
    rubric, fields, evidence, case_ids, applicable, warnings_in, rules = row
    model = verdict_model(rubric, evidence)
    verdict = model.model_validate(
        fields, context={"row_id": "r", "case_requirement_ids": case_ids, "turn_count": 6}
    )
    expected = reference_normalize(rubric, verdict, "r", applicable, warnings_in, rules)
    for _ in range(2):  # the second time from the tables worked out the first time
        got = normalize_applicable(rubric, verdict, "r", applicable, warnings_in, rules)
        assert got == expected
        assert got.to_json_dict() == expected.to_json_dict()
        assert [w.code for w in got.warnings] == [w.code for w in expected.warnings]


@settings(max_examples=300, deadline=None)
@given(rows(), st.data())
def test_a_repeated_verdict_shares_its_decision_and_keeps_its_own_row_fields(
    row: tuple[Any, ...], data: st.DataObject
) -> None:
    """Rows whose verdicts repeat (lists, score, turns, questions check) share what the steps
    decided (:func:`rubric_engine.results.normalize._decided`), yet each result is the reference's
    for
    its own rowId, explanation, questions issues and earlier warnings; and a decision found
    again equals the one worked out afresh."""
    import rubric_engine.results.normalize as normalize

    rubric, fields, evidence, case_ids, applicable, warnings_in, rules = row
    model = verdict_model(rubric, evidence)
    context = {"row_id": "r", "case_requirement_ids": case_ids, "turn_count": 6}
    first = model.model_validate(fields, context=context)
    normalize_applicable(rubric, first, "r", applicable, warnings_in, rules)
    other_fields = {
        **fields,
        "rowId": "s",
        "scoreExplanation": data.draw(st.text(max_size=5)),
        "questionsIssues": data.draw(st.lists(st.text(max_size=3), max_size=2)),
    }
    again = model.model_validate(other_fields, context={**context, "row_id": "s"})
    other_in = tuple(
        ProtocolWarning(code=WarningCode.STRAY_THINKING_END, detail=f"turn {n}")
        for n in range(data.draw(st.integers(0, 2)))
    )
    got = normalize_applicable(rubric, again, "s", applicable, other_in, rules)
    assert got == reference_normalize(rubric, again, "s", applicable, other_in, rules)
    normalize._DECISIONS.clear()
    assert got == normalize_applicable(rubric, again, "s", applicable, other_in, rules)


def _same_as_validated(result: RowResult) -> None:
    """``result`` is what ``RowResult(...)`` of its given fields builds: the same values of the
    same types, in the same order, the same fields set, the same JSON."""
    given = {name: getattr(result, name) for name in result.model_fields_set}
    validated = RowResult(**given)
    assert list(result.__dict__) == list(validated.__dict__)
    assert [type(v) for v in result.__dict__.values()] == [
        type(v) for v in validated.__dict__.values()
    ]
    assert result.__dict__ == validated.__dict__
    assert result.model_fields_set == validated.model_fields_set
    assert result.__pydantic_extra__ == validated.__pydantic_extra__
    assert result.__pydantic_private__ == validated.__pydantic_private__
    assert result.model_dump_json() == validated.model_dump_json()
    assert result.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert result.model_copy(update={"row_id": "x"}) == validated.model_copy(update={"row_id": "x"})


@settings(max_examples=300, deadline=None)
@given(rows())
def test_the_result_is_built_as_validation_builds_it(row: tuple[Any, ...]) -> None:
    """The scored result is set up without validating it again (its values are already
    validated): field for field what ``RowResult(...)`` makes of them."""
    rubric, fields, evidence, case_ids, applicable, warnings_in, rules = row
    verdict = verdict_model(rubric, evidence).model_validate(
        fields, context={"row_id": "r", "case_requirement_ids": case_ids, "turn_count": 6}
    )
    _same_as_validated(normalize_applicable(rubric, verdict, "r", applicable, warnings_in, rules))


def test_values_validation_would_change_are_validated() -> None:
    """A caller's warnings given as plain objects, or a row id of another str type, go
    through validation: the result holds what ``RowResult(...)`` makes of them."""
    from enum import StrEnum

    from tests.test_normalize_properties import PACKS

    class Tagged(StrEnum):
        ROW = "row-1"

    rubric = PACKS[0]
    intent = rubric.intents[0]
    verdict = verdict_model(rubric, False).model_validate(
        {"rowId": "row-1", "intentKey": intent.key, "score": rubric.score_scale.max},
        context={"row_id": "row-1", "case_requirement_ids": [], "turn_count": 2},
    )
    applicable = applicable_requirements(rubric, intent.key, ())
    as_dict = [{"code": "JUDGE_REASKED", "detail": "why"}]
    for row_id, warnings_in in ((Tagged.ROW, ()), ("row-1", as_dict)):
        got = normalize_applicable(rubric, verdict, row_id, applicable, warnings_in)  # type: ignore[arg-type]
        _same_as_validated(got)
        assert type(got.row_id) is str
        assert all(type(w) is ProtocolWarning for w in got.warnings)


def test_another_pydantic_layout_falls_back_to_validation(monkeypatch: Any) -> None:
    """Where pydantic's instances hold other attributes than the four the direct build sets,
    every result is validated: the same result either way."""
    import rubric_engine.results.normalize as normalize
    from tests.test_normalize_properties import PACKS

    rubric = PACKS[0]
    intent = rubric.intents[0]
    verdict = verdict_model(rubric, False).model_validate(
        {"rowId": "r", "intentKey": intent.key, "score": rubric.score_scale.min},
        context={"row_id": "r", "case_requirement_ids": [], "turn_count": 2},
    )
    applicable = applicable_requirements(rubric, intent.key, ())
    direct = normalize_applicable(rubric, verdict, "r", applicable)
    monkeypatch.setattr(normalize, "_PLAIN_LAYOUT", False)
    validated = normalize_applicable(rubric, verdict, "r", applicable)
    assert validated == direct == reference_normalize(rubric, verdict, "r", applicable)
    assert validated.reference_basis is not direct.reference_basis  # validation copied it
    _same_as_validated(direct)
