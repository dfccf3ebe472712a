"""Whether a row result could have come out of normalization at all (docs/verify.md).

A result edited by hand can say things no verdict leads to: a final score above the judge's,
above the cap of a violated requirement, a red line violated without its flag, a score on a
row the judge never answered. :func:`impossibilities` lists them; ``rubric-eval verify`` runs
it on every stored row besides re-deriving it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric, HardRequirement


def impossibilities(
    result: RowResult, rubric: EvalRubric, case: Sequence[HardRequirement] = ()
) -> list[str]:
    """What about ``result`` no normalization under ``rubric`` can produce; empty when none.

    Args:
        case: the row's case-level requirements (their caps count like the pack's).
    """
    found: list[str] = []
    scored = result.status is RowStatus.SCORED
    if not scored:
        if result.judge_score is not None or result.final_score is not None:
            found.append(f"a {result.status} row has a score")
        if result.status is RowStatus.JUDGE_ERROR and result.error is None:
            found.append("a JUDGE_ERROR row has no error")
        return found
    final, judge = result.final_score, result.judge_score
    if final is None or judge is None:
        return ["a SCORED row without a judge score and a final score"]
    scale = rubric.score_scale
    if not scale.min <= final <= scale.max or not scale.min <= judge <= scale.max:
        found.append(f"a score outside the scale {scale.min}..{scale.max}")
    if final > judge:
        found.append(f"finalScore {final} is above judgeScore {judge}")
    requirements = {**rubric.requirements_by_id, **{r.id: r for r in case}}
    violated = [
        requirements[e.requirement_id]
        for e in result.reference_basis
        if e.status is RequirementStatus.VIOLATED and e.requirement_id in requirements
    ]
    for req in violated:
        if req.violation_score is not None and final > req.violation_score:
            found.append(f"finalScore {final} is above {req.id}'s cap {req.violation_score}")
        if req.critical and req.red_flag_type and req.red_flag_type not in result.red_flag_types:
            found.append(f"{req.id} is VIOLATED but its red flag {req.red_flag_type} is not raised")
    caps = [r.violation_score for r in violated if r.violation_score is not None]
    if getattr(result, "samples", None):
        return found  # an aggregate's score is the samples' median: only bounded by the caps
    if final != min([judge, *caps]):
        found.append(f"finalScore {final} is not min(judgeScore, caps) = {min([judge, *caps])}")
    capping = tuple(r.id for r in violated if r.violation_score == final) if final < judge else ()
    if tuple(result.capped_by) != capping:
        found.append(f"cappedBy {list(result.capped_by)} is not the capping rules {list(capping)}")
    return found
