"""Slices of a report: per-group outcomes and per-requirement compliance (SPEC §9, issue 5).

``--by intent`` groups rows by the intent the judge chose; ``--by <field>`` groups them by a row
metadata field (``scenario``, ``risk_level`` …; a list value such as ``tags`` puts the row in one
group per element, a missing value in ``(missing)``); ``--by category`` groups the
referenceBasis entries by their requirement's category instead of grouping rows. Every group
carries the same counts as the whole report, so a slice reads like a small report. Pure.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.model import Slice, SliceGroup, SliceRequirement
from rubric_engine.report.outcome import ROUNDED, STATUS_FIELD, Figures, row_outcome
from rubric_engine.results import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

BUILTIN_SLICES = ("intent", "category")
MISSING = "(missing)"


def slice_names(metadata: list[dict[str, Any]]) -> list[str]:
    """Valid ``--by`` names for these rows: the built-ins, then metadata fields, sorted."""
    return [*BUILTIN_SLICES, *sorted({key for m in metadata for key in m})]


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
                f"valid: {', '.join(slice_names(metadata))}"
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


def status_counts(counter: Counter[str], fig: Figures = ROUNDED) -> dict[str, Any]:
    """The ``followed … notApplicable, compliance`` fields (snake_case) of a status counter
    keyed as :data:`~rubric_engine.report.outcome.STATUS_FIELD` says."""
    judged = counter["followed"] + counter["partial"] + counter["violated"]
    return {
        "followed": counter["followed"],
        "partial": counter["partial"],
        "violated": counter["violated"],
        "not_applicable": counter["not_applicable"],
        "compliance": fig.ratio(counter["followed"], judged),
    }
