"""A sampled row's result from its samples' results, by the rules of docs/stability.md
"From samples to one row result".

Each sample went through the one row → result path on its own; :func:`aggregate_samples`
votes them into the row's result: the error of the first failed sample (a judge failure never
becomes a score); else the modal intent, each requirement's majority status (a tie goes to the
stricter status), the red flags raised by at least half the samples (a dropped one is warned
about, never silent), the lower median of the scores, and the row's ``samples`` and
``stability``. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    SampleSummary,
    Stability,
    WarningCode,
)
from rubric_engine.rubric.model import HardRequirement

__all__ = ["STRICTNESS", "Sample", "aggregate_samples", "lower_median", "summary"]

S = RequirementStatus
#: a tie between statuses goes to the stricter: the higher here
STRICTNESS = {S.NOT_APPLICABLE: 0, S.FOLLOWED: 1, S.PARTIAL: 2, S.VIOLATED: 3}


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample's result and where it came from (``judge``, ``sample``: from 1)."""

    judge: int
    sample: int
    result: RowResult


def lower_median(values: Sequence[int]) -> int:
    """The median; of an even count the lower middle value (the stricter score)."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def summary(sample: Sample) -> SampleSummary:
    """What the aggregate keeps of a sample."""
    r = sample.result
    return SampleSummary(
        judge=sample.judge,
        sample=sample.sample,
        status=r.status,
        intent_key=r.intent_key,
        judge_score=r.judge_score,
        final_score=r.final_score,
        red_flag_types=r.red_flag_types,
        statuses={e.requirement_id: e.status for e in r.reference_basis},
    )


def aggregate_samples(
    samples: Sequence[Sample],
    requirements: Mapping[str, HardRequirement],
    flag_order: Mapping[str, int],
) -> RowResult:
    """The row's result from its samples' (docs/stability.md, rules 1–7).

    Args:
        samples: in order (judge by judge, samples 1..K); at least one.
        requirements: every requirement the rows may name by ID (the pack's and the row's
            case-level ones): caps and red lines.
        flag_order: red-flag type → its place in the pack.
    """
    listed = tuple(summary(s) for s in samples)
    failed = next((s for s in samples if s.result.status is not RowStatus.SCORED), None)
    if failed is not None:  # rule 1
        return failed.result.model_copy(update={"samples": listed, "stability": None})
    results = [s.result for s in samples]
    n = len(results)
    own: list[ProtocolWarning] = []

    # rule 2: the intent
    intents = Counter(r.intent_key for r in results)
    intent = max(intents, key=lambda i: intents[i])  # Counter keeps first-seen order on ties
    if len(intents) > 1:
        counts = ", ".join(f"{i}: {c}" for i, c in intents.items())
        own.append(ProtocolWarning(code=WarningCode.INTENT_SPLIT, detail=f"{counts} of {n}"))
    voters = [r for r in results if r.intent_key == intent]

    # rule 3: each requirement's majority status among the voters
    order = list(dict.fromkeys(e.requirement_id for r in voters for e in r.reference_basis))
    votes = {rid: [_entry(r, rid) for r in voters] for rid in order}
    basis: dict[str, BasisEntry] = {}
    agreement: dict[str, float] = {}
    flips: list[str] = []
    for rid, entries in votes.items():
        given = [e for e in entries if e is not None]
        tally = Counter(e.status for e in given)
        status = max(tally, key=lambda st: (tally[st], STRICTNESS[st]))
        basis[rid] = next(e for e in given if e.status is status)
        agreement[rid] = round(tally[status] / len(entries), 4)
        if len(tally) > 1 or len(given) < len(entries):
            flips.append(rid)

    # rule 4: red flags
    raised = Counter(f for r in results for f in r.red_flag_types)
    kept = {f for f, c in raised.items() if 2 * c >= n}
    for rid, entry in basis.items():
        req = requirements.get(rid)
        if entry.status is S.VIOLATED and req is not None and req.critical and req.red_flag_type:
            kept.add(req.red_flag_type)  # a requirement kept VIOLATED keeps its flag
    for flag in sorted(raised, key=lambda f: (flag_order.get(f, len(flag_order)), f)):
        if flag not in kept:
            own.append(
                ProtocolWarning(
                    code=WarningCode.RED_FLAG_SPLIT,
                    red_flag_type=flag,
                    detail=f"raised by {raised[flag]} of {n} samples; dropped by the vote",
                )
            )
    for flag in sorted(kept, key=lambda f: (flag_order.get(f, len(flag_order)), f)):
        backfilled = _backfill(flag, basis, votes, requirements)
        if backfilled is not None:
            basis[backfilled] = BasisEntry(
                requirement_id=backfilled, status=S.VIOLATED, source=BasisSource.BACKFILL
            )
            own.append(
                ProtocolWarning(
                    code=WarningCode.RED_FLAG_BACKFILLED,
                    requirement_id=backfilled,
                    red_flag_type=flag,
                    detail="kept by the samples' vote while its red lines were outvoted",
                )
            )

    # rule 5: the scores
    judge_score = lower_median([r.judge_score for r in results if r.judge_score is not None])
    final_score = lower_median([r.final_score for r in results if r.final_score is not None])
    violated = [requirements[rid] for rid, e in basis.items() if _violated(e, rid, requirements)]
    caps = [r.violation_score for r in violated if r.violation_score is not None]
    final_score = min([final_score, *caps])
    capped_by = (
        tuple(r.id for r in violated if r.violation_score == final_score)
        if final_score < judge_score
        else ()
    )

    # rule 6: the representative sample
    rep = next((r for r in voters if r.final_score == final_score), voters[0])

    # rule 7: stability
    reasons = []
    if len(intents) > 1:
        reasons.append("intent")
    if len({r.red_flag_types for r in results}) > 1:
        reasons.append("redFlags")
    if flips:
        reasons.append("requirements")
    if len({r.final_score for r in results}) > 1:
        reasons.append("score")
    return rep.model_copy(
        update={
            "judge_score": judge_score,
            "final_score": final_score,
            "capped_by": capped_by,
            "red_flag_types": tuple(
                sorted(kept, key=lambda f: (flag_order.get(f, len(flag_order)), f))
            ),
            "reference_basis": tuple(basis[rid] for rid in order),
            "warnings": (*rep.warnings, *own),
            "samples": listed,
            "stability": Stability(
                stable=not reasons, reasons=tuple(reasons), flips=tuple(flips), agreement=agreement
            ),
        }
    )


def _entry(result: RowResult, rid: str) -> BasisEntry | None:
    return next((e for e in result.reference_basis if e.requirement_id == rid), None)


def _violated(entry: BasisEntry, rid: str, requirements: Mapping[str, HardRequirement]) -> bool:
    return entry.status is S.VIOLATED and rid in requirements


def _backfill(
    flag: str,
    basis: Mapping[str, BasisEntry],
    votes: Mapping[str, list[BasisEntry | None]],
    requirements: Mapping[str, HardRequirement],
) -> str | None:
    """The red line to mark VIOLATED for a kept ``flag`` whose red lines all lost their vote:
    the one with the most VIOLATED votes (the first in basis order on a tie); ``None`` when
    one of its type is VIOLATED already or none can carry it (an orphan flag stays)."""
    of_type = [
        rid
        for rid in basis
        if (req := requirements.get(rid)) is not None
        and req.critical
        and req.red_flag_type == flag
        and req.observable_in_data
    ]
    if any(basis[rid].status is S.VIOLATED for rid in of_type):
        return None
    lines = [rid for rid in of_type if basis[rid].source is not BasisSource.RULE]
    if not lines:
        return None

    def violated_votes(rid: str) -> int:
        return sum(1 for e in votes[rid] if e is not None and e.status is S.VIOLATED)

    return max(lines, key=violated_votes)  # max keeps the first of equals
