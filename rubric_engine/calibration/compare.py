"""Compare a judge's row views with reference views: the calibration result (pure given the
seed; docs/calibration.md).

A (row, requirement) pair is compared when both sides give it FOLLOWED, PARTIAL or VIOLATED;
"unmet" (PARTIAL or VIOLATED) is the positive class. NOT_APPLICABLE or UNSURE on either side,
and requirements only one side judged, are outside every denominator and counted under
``excluded``. Rates carry Wilson intervals, κ and F1 seeded bootstrap intervals.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from rubric_engine.calibration.agreement import cohen_kappa, krippendorff_alpha
from rubric_engine.calibration.binary import Confusion, binary_metrics, confusion, ratio
from rubric_engine.calibration.correction import labels_needed, rogan_gladen
from rubric_engine.calibration.intervals import bootstrap_intervals, wilson
from rubric_engine.calibration.scores import score_agreement
from rubric_engine.calibration.views import RowView
from rubric_engine.labels.model import UNMET, LabelStatus
from rubric_engine.rubric.model import EvalRubric

__all__ = ["calibrate_views"]

Pair = tuple[str, str, bool, bool]  # row, requirement, reference unmet, judge unmet
_RATES: dict[str, Callable[[Confusion], tuple[int, int]]] = {  # rate → (successes, trials)
    "accuracy": lambda c: (c.tp + c.tn, c.n),
    "precisionUnmet": lambda c: (c.tp, c.tp + c.fp),
    "recallUnmet": lambda c: (c.tp, c.tp + c.fn),
    "tnr": lambda c: (c.tn, c.tn + c.fp),
}


def _unmet(status: LabelStatus) -> bool | None:
    if status in UNMET:
        return True
    return False if status is LabelStatus.FOLLOWED else None


def _block(pairs: list[tuple[bool, bool]], seed: int, boot: bool = True) -> dict[str, Any]:
    c = confusion(pairs)
    out: dict[str, Any] = binary_metrics(c)
    intervals: dict[str, Any] = {}
    for name, parts in _RATES.items():
        interval = wilson(*parts(c))
        intervals[name] = None if interval is None else list(interval)
    if boot:
        ci = bootstrap_intervals(pairs, seed=seed)
        intervals["kappa"] = None if ci["kappa"] is None else list(ci["kappa"])
        intervals["f1Unmet"] = None if ci["f1Unmet"] is None else list(ci["f1Unmet"])
    out["intervals95"] = intervals
    return out


def _pairs(
    reference: Mapping[str, RowView], judge: Mapping[str, RowView]
) -> tuple[list[Pair], Counter[str]]:
    pairs: list[Pair] = []
    excluded: Counter[str] = Counter()
    for row_id, ref in reference.items():
        other = judge.get(row_id)
        if other is None:
            excluded["rowsWithoutJudgment"] += 1
            continue
        for rid, status in ref.statuses.items():
            theirs = other.statuses.get(rid)
            if theirs is None:
                excluded["notJudgedByJudge"] += 1
                continue
            a, b = _unmet(status), _unmet(theirs)
            if status is LabelStatus.UNSURE or theirs is LabelStatus.UNSURE:
                excluded["unsure"] += 1
            elif a is None and b is None:
                excluded["bothNotApplicable"] += 1
            elif a is None or b is None:
                excluded["applicabilityDisagreements"] += 1
            else:
                pairs.append((row_id, rid, a, b))
    return pairs, excluded


def _red_flags(
    reference: Mapping[str, RowView], judge: Mapping[str, RowView], types: list[str]
) -> dict[str, Any]:
    per: dict[str, Counter[str]] = defaultdict(Counter)
    missed: dict[str, list[str]] = defaultdict(list)
    false: dict[str, list[str]] = defaultdict(list)
    for row_id, ref in reference.items():
        other = judge.get(row_id)
        if other is None or ref.red_flag_types is None or other.red_flag_types is None:
            continue
        scope = (
            ref.flag_scope
            if ref.flag_scope is not None
            else {*types, *ref.red_flag_types, *other.red_flag_types}
        )
        for t in scope:
            mine, theirs = t in ref.red_flag_types, t in other.red_flag_types
            key = "tp" if mine and theirs else "fn" if mine else "fp" if theirs else "tn"
            per[t][key] += 1
            if key == "fn":
                missed[t].append(row_id)
            elif key == "fp":
                false[t].append(row_id)

    def figures(c: Counter[str]) -> dict[str, Any]:
        rec, prec = wilson(c["tp"], c["tp"] + c["fn"]), wilson(c["tp"], c["tp"] + c["fp"])
        return {
            "tp": c["tp"],
            "fn": c["fn"],
            "fp": c["fp"],
            "tn": c["tn"],
            "recall": ratio(c["tp"], c["tp"] + c["fn"]),
            "precision": ratio(c["tp"], c["tp"] + c["fp"]),
            "recallInterval95": None if rec is None else list(rec),
            "precisionInterval95": None if prec is None else list(prec),
        }

    total: Counter[str] = sum(per.values(), Counter())
    ordered = [*types, *sorted(set(per) - set(types))]
    return {
        "overall": figures(total),
        "types": [
            {"type": t, **figures(per[t]), "missedRows": missed[t], "falseRows": false[t]}
            for t in ordered
            if t in per
        ],
    }


def _intents(reference: Mapping[str, RowView], judge: Mapping[str, RowView]) -> dict[str, Any]:
    ref_keys, judge_keys = [], []
    for row_id, ref in reference.items():
        other = judge.get(row_id)
        if other is not None and ref.intent_key and other.intent_key:
            ref_keys.append(ref.intent_key)
            judge_keys.append(other.intent_key)
    matrix: dict[str, Counter[str]] = defaultdict(Counter)
    for a, b in zip(ref_keys, judge_keys, strict=True):
        matrix[a][b] += 1
    right = sum(1 for a, b in zip(ref_keys, judge_keys, strict=True) if a == b)
    interval = wilson(right, len(ref_keys))
    return {
        "n": len(ref_keys),
        "accuracy": ratio(right, len(ref_keys)),
        "accuracyInterval95": None if interval is None else list(interval),
        "kappa": cohen_kappa(ref_keys, judge_keys),
        "confusion": {a: dict(sorted(row.items())) for a, row in sorted(matrix.items())},
    }


def _omission(reference: Mapping[str, RowView], judge: Mapping[str, RowView]) -> dict[str, Any]:
    found = omitted = 0
    rows = []
    for row_id, ref in reference.items():
        other = judge.get(row_id)
        if other is None or not any(s in UNMET for s in ref.statuses.values()):
            continue
        found += 1
        if not any(s in UNMET for s in other.statuses.values()):
            omitted += 1
            rows.append(row_id)
    interval = wilson(omitted, found)
    return {
        "rowsWithViolation": found,
        "omitted": omitted,
        "rate": ratio(omitted, found),
        "interval95": None if interval is None else list(interval),
        "rows": rows,
    }


def _observed_rates(judge_all: Mapping[str, RowView]) -> dict[str, tuple[int, int]]:
    rates: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for view in judge_all.values():
        for rid, status in view.statuses.items():
            unmet = _unmet(status)
            if unmet is not None:
                rates[rid][0] += int(unmet)
                rates[rid][1] += 1
    return {rid: (a, b) for rid, (a, b) in rates.items()}


def _alpha(
    raters: Mapping[str, Mapping[str, RowView]], judge: Mapping[str, RowView] | None
) -> float | None:
    sides = [*raters.values(), *([judge] if judge is not None else [])]
    units = sorted(
        {(row, rid) for side in raters.values() for row, v in side.items() for rid in v.statuses}
    )
    data = []
    for side in sides:
        column: list[float | str | None] = []
        for row, rid in units:
            status = side[row].statuses.get(rid) if row in side else None
            unmet = None if status is None else _unmet(status)
            column.append(None if unmet is None else float(unmet))
        data.append(column)
    return krippendorff_alpha(data, "nominal") if len(sides) >= 2 else None


def _category(rid: str, reqs: Mapping[str, Any]) -> str:
    if rid in reqs:
        return str(reqs[rid].category)
    return "CASE" if rid.startswith("CASE_") else "(unknown)"  # case-level IDs (docs/inputs.md)


def calibrate_views(
    reference: Mapping[str, RowView],
    judge: Mapping[str, RowView],
    *,
    rubric: EvalRubric | None = None,
    judge_all: Mapping[str, RowView] | None = None,
    reviewers: Mapping[str, Mapping[str, RowView]] | None = None,
    half_width: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The calibration result of ``judge`` against ``reference`` (see the module docstring).

    Args:
        reference / judge: rowId → view. Rows only one side has are counted, not compared.
        rubric: requirement categories, red lines, intent order and score scale when known.
        judge_all: every judged row (the whole task), for the observed and corrected violation
            rates and the planner; default ``judge``.
        reviewers: reviewer → views, for Krippendorff's α among reviewers and with the judge.
        half_width: when given, add the label-count plan for intervals of ±half_width.
        seed: the bootstrap's seed.

    Returns:
        A JSON-ready dict: ``overall``, ``requirements``, ``intents``, ``categories``,
        ``redFlags``, ``intentAgreement``, ``scores``, ``omission``, ``violationRate``,
        ``krippendorffAlpha``, ``excluded``, ``rows``, ``seed`` and ``plan`` (with half_width).
    """
    pairs, excluded = _pairs(reference, judge)
    reqs = rubric.requirements_by_id if rubric is not None else {}
    overall = _block([(a, b) for _, _, a, b in pairs], seed)
    by_req: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_intent: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_cat: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for row_id, rid, a, b in pairs:
        by_req[rid].append((a, b))
        intent = reference[row_id].intent_key or judge[row_id].intent_key or "(none)"
        by_intent[intent].append((a, b))
        by_cat[_category(rid, reqs)].append((a, b))
    observed = _observed_rates(judge_all if judge_all is not None else judge)
    requirements = []
    order = [*reqs, *sorted(set(by_req) - set(reqs))]
    for rid in order:
        if rid not in by_req and rid not in observed:
            continue
        block = _block(by_req.get(rid, []), seed)
        unmet, applicable = observed.get(rid, (0, 0))
        rate = ratio(unmet, applicable)
        entry = {
            "id": rid,
            "category": _category(rid, reqs),
            "critical": bool(reqs[rid].critical) if rid in reqs else None,
            **block,
            "observedViolationRate": rate,
            "correctedViolationRate": None
            if rate is None
            else rogan_gladen(rate, block["recallUnmet"], block["tnr"]),
        }
        if half_width is not None:
            plan = labels_needed(rate, half_width, tpr=block["recallUnmet"], tnr=block["tnr"])
            needed = plan["labelsNeeded"]
            plan["available"] = applicable
            plan["tooRare"] = bool(
                plan["tooRare"] or (isinstance(needed, int) and needed > applicable)
            )
            plan["labelled"] = block["n"]
            entry["plan"] = plan
        requirements.append(entry)
    total_unmet = sum(a for a, _ in observed.values())
    total_applicable = sum(b for _, b in observed.values())
    rate = ratio(total_unmet, total_applicable)
    intent_order = list(rubric.intents_by_key) if rubric is not None else []
    refs_with_score: list[tuple[float, float]] = []
    for k, r in reference.items():
        theirs = judge[k].score if k in judge else None
        if r.score is not None and theirs is not None:
            refs_with_score.append((r.score, theirs))
    scale = (rubric.score_scale.min, rubric.score_scale.max) if rubric is not None else None
    result: dict[str, Any] = {
        "seed": seed,
        "rows": {
            "reference": len(reference),
            "judge": len(judge),
            "compared": len({row for row, *_ in pairs}),
        },
        "overall": overall,
        "excluded": dict(sorted(excluded.items())),
        "requirements": requirements,
        "intents": [
            {"intentKey": k, **_block(by_intent[k], seed, boot=False)}
            for k in [*intent_order, *sorted(set(by_intent) - set(intent_order))]
            if k in by_intent
        ],
        "categories": [
            {"category": k, **_block(v, seed, boot=False)} for k, v in sorted(by_cat.items())
        ],
        "redFlags": _red_flags(reference, judge, list(rubric.red_flag_types) if rubric else []),
        "intentAgreement": _intents(reference, judge),
        "scores": score_agreement(
            [a for a, _ in refs_with_score], [b for _, b in refs_with_score], scale
        ),
        "omission": _omission(reference, judge),
        "violationRate": {
            "observed": rate,
            "corrected": None
            if rate is None
            else rogan_gladen(rate, overall["recallUnmet"], overall["tnr"]),
        },
        "krippendorffAlpha": {
            "reviewers": None if not reviewers or len(reviewers) < 2 else _alpha(reviewers, None),
            "withJudge": None if not reviewers else _alpha(reviewers, judge),
            "reviewerCount": len(reviewers or {}),
        },
    }
    if half_width is not None:
        result["plan"] = {
            "halfWidth": half_width,
            "level": 0.95,
            "tooRare": [r["id"] for r in requirements if r["plan"]["tooRare"]],
        }
    return result
