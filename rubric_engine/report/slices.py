"""Slices of a report: per-group outcomes and per-requirement compliance (docs/reports.md).

``--by intent`` groups rows by the intent the judge chose; ``--by <field>`` groups them by a row
metadata field (``scenario``, ``risk_level`` …; a list value such as ``tags`` puts the row in one
group per element, a missing value in ``(missing)``); ``--by category`` groups the
referenceBasis entries by their requirement's category instead of grouping rows. Every group
carries the same counts as the whole report, so a slice reads like a small report. Pure.

Built as a stream (:class:`SliceAccumulator`): counters per group, nothing kept per row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.model import Slice, SliceGroup, SliceRequirement
from rubric_engine.report.outcome import ROUNDED, STATUS_FIELD, Figures, row_outcome
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

BUILTIN_SLICES = ("intent", "category")
MISSING = "(missing)"


def slice_names(metadata_keys: Iterable[str]) -> list[str]:
    """Valid ``--by`` names for rows with these metadata keys: the built-ins, then the metadata
    fields, sorted."""
    return [*BUILTIN_SLICES, *sorted(set(metadata_keys))]


class _Group:
    """One group's counters (the counts of a small report)."""

    __slots__ = ("counts", "final_total", "finals", "first", "flagged", "passed", "rows", "scored")

    def __init__(self, first: tuple[int, int]) -> None:
        self.first = first  # (seq, position in the row) of its first row; pack groups first
        self.rows = self.scored = self.final_total = self.finals = self.passed = self.flagged = 0
        self.counts: dict[str, Counter[str]] = {}


class SliceAccumulator:
    """One ``--by`` slice built a row at a time, rows in any order; :meth:`finish` gives the
    same slice as grouping the task's rows in input order.

    Args:
        name: ``intent``, ``category`` or a metadata field (checked by :meth:`finish`).
        pass_score: the report's pass score.

    Memory: counters per group and per requirement within it, nothing per row.
    """

    def __init__(
        self, name: str, rubric: EvalRubric, pass_score: int, fig: Figures = ROUNDED
    ) -> None:
        self.name = name
        self._pass_score = pass_score
        self._fig = fig
        self._order = _requirement_order(rubric)
        self._category_of = {rid: req.category for rid, req in rubric.requirements_by_id.items()}
        self._groups: dict[str, _Group] = {}
        self._field_seen = False
        if name == "intent":
            for i, intent in enumerate(rubric.intents):
                self._groups[intent.key] = _Group((-1, i))
        elif name == "category":
            for i, category in enumerate(dict.fromkeys(self._category_of.values())):
                self._groups[category] = _Group((-1, i))

    def add(self, seq: int, result: RowResult, metadata: dict[str, Any]) -> None:
        """Count one row (``seq``: its input position) in each group it belongs to."""
        if self.name == "intent":
            keys = [result.intent_key or MISSING]
        elif self.name == "category":
            keys = list(
                dict.fromkeys(
                    self._category_of.get(e.requirement_id, "CASE") for e in result.reference_basis
                )
            )
        else:
            self._field_seen = self._field_seen or self.name in metadata
            keys = _values(metadata.get(self.name))  # a repeated list value counts twice
        for position, key in enumerate(keys):
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group((seq, position))
            elif group.first > (seq, position):  # pack groups are (-1, i): always first
                group.first = (seq, position)
            self._count(group, key, result)

    def _count(self, group: _Group, key: str, result: RowResult) -> None:
        group.rows += 1
        if result.status is not RowStatus.SCORED:
            return
        group.scored += 1
        if result.final_score is not None:
            group.final_total += result.final_score
            group.finals += 1
        group.passed += row_outcome(result, self._pass_score) == "PASS"
        group.flagged += bool(result.red_flag_types)
        only_category = self.name == "category"
        for entry in result.reference_basis:
            rid = entry.requirement_id
            if not only_category or self._category_of.get(rid, "CASE") == key:
                group.counts.setdefault(rid, Counter())[STATUS_FIELD[entry.status]] += 1

    def finish(self, metadata_keys: Iterable[str]) -> Slice:
        """The slice (see :class:`~rubric_engine.report.model.SliceGroup`).

        Args:
            metadata_keys: every metadata key of the task's rows (for the error message).

        Raises:
            ConfigurationError: the name is none of the valid names (which are listed).
        """
        if self.name not in BUILTIN_SLICES:
            if not self._field_seen:
                raise ConfigurationError(
                    f"slice {self.name!r} (--by, or a gate metric such as "
                    f"minPassRateBy.{self.name}) is neither a built-in slice nor a metadata "
                    f"field of any row; valid: {', '.join(slice_names(metadata_keys))}"
                )
            ranked = sorted(self._groups.items(), key=lambda kv: (kv[0] == MISSING, kv[0]))
        else:  # pack groups in pack order, then the others as first seen in input order
            ranked = sorted(self._groups.items(), key=lambda kv: kv[1].first)
        return Slice(by=self.name, groups=tuple(self._group(v, g) for v, g in ranked))

    def _group(self, value: str, group: _Group) -> SliceGroup:
        fig, order = self._fig, self._order
        total: Counter[str] = Counter()
        for counter in group.counts.values():
            total.update(counter)
        ranked = sorted(group.counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
        return SliceGroup(
            value=value,
            rows=group.rows,
            scored=group.scored,
            mean_score=fig.mean_of(group.final_total, group.finals),
            pass_rate=fig.ratio(group.passed, group.scored),
            red_flag_rows=group.flagged,
            **status_counts(total, fig),
            requirements=tuple(
                SliceRequirement(id=rid, **status_counts(c, fig)) for rid, c in ranked
            ),
        )


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
