"""Low rows → clusters → ranked action items, and how each cluster moved against a baseline
(``rubric-eval actions``; docs/actions.md). Pure.

A **low row** is one whose outcome is not PASS at the pass score (a red flag, or a final score
below it; a ``--judge none`` row whose checks fail). Each low row goes to exactly one cluster,
decided by the row alone so that the same cluster can be found in another task:

* its **lead**: the most severe requirement the row left unmet — VIOLATED before PARTIAL, red
  lines first, then the lowest cap, then pack order (a case-level ``CASE_…`` requirement only
  when no pack rule is unmet);
* its intent;
* its values of the ``--by`` metadata fields.

A row with nothing unmet (or whose red flag no requirement raised) has no lead: it is a failure
no rule names (:mod:`rubric_engine.actions.failures`). Items are ranked red lines first, then by
impact (rows × severity, see :class:`~rubric_engine.actions.model.ActionItem`), then rows.

Rows are added one at a time (:meth:`LowRows.add`); a cluster keeps its counters, its row ids
and its few lowest rows as evidence, not the rows.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.actions.model import (
    ActionItem,
    ClusterState,
    EvidenceRow,
    EvidenceTurn,
    Involved,
    UnmetSet,
)
from rubric_engine.report.outcome import row_outcome
from rubric_engine.report.rows import RowFacts
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus, WarningCode
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.similarity import DocumentFrequency

#: evidence rows kept per cluster (the lowest), and shown per item
KEPT_EVIDENCE = 8
SHOWN_EVIDENCE = 3
#: explanations of rows no rule explains kept for the text clusters (the first, input order)
MAX_TEXTS = 5000
#: explanations whose terms are counted for the clusters' IDF (the first, input order)
MAX_BACKGROUND = 20000
NO_LEAD = "(no rule)"
_VIOLATED, _PARTIAL = RequirementStatus.VIOLATED, RequirementStatus.PARTIAL


@dataclass
class _Cluster:
    lead: str | None
    intent: str | None
    slice: dict[str, str]
    lead_text: str | None = None
    rows: int = 0
    finals: int = 0  # rows with a final score
    final_sum: int = 0
    points: int = 0  # points lost below the top of the scale, rows with a final score
    flags: Counter[str] = field(default_factory=Counter)
    involved: Counter[str] = field(default_factory=Counter)
    sets: Counter[tuple[str, ...]] = field(default_factory=Counter)
    owners: Counter[str] = field(default_factory=Counter)
    row_ids: list[str] = field(default_factory=list)
    #: the lowest rows: (-final, -seq, evidence) in a min-heap of the highest kept
    lowest: list[tuple[int, int, EvidenceRow]] = field(default_factory=list)


class LowRows:
    """A task's low rows in clusters (see the module docstring), fed one row at a time.

    Args:
        rubric: the task's own rubric snapshot (severities, texts, pack order).
        pass_score: the report's pass score.
        by: metadata fields that split clusters.
        owner_field: the metadata field that names a row's owner.
    """

    def __init__(
        self, rubric: EvalRubric, pass_score: int, by: tuple[str, ...] = (), owner_field: str = ""
    ) -> None:
        self.rubric = rubric
        self.pass_score = pass_score
        self.by = by
        self.owner_field = owner_field
        self.scored = 0
        self.low = 0
        self.clusters: dict[str, _Cluster] = {}
        self.unexplained_ids: list[str] = []
        #: (row id, explanation) of rows no rule explains, at most :data:`MAX_TEXTS`
        self.texts: list[tuple[str, str]] = []
        #: the terms of every scored row's explanation (the first :data:`MAX_BACKGROUND`)
        self.background = DocumentFrequency()
        self._rank = {rid: i for i, rid in enumerate(rubric.requirements_by_id)}

    def add(self, seq: int, result: RowResult, facts: RowFacts) -> None:
        """Count a row; keep it when it is low."""
        if result.status is RowStatus.JUDGE_ERROR:
            return
        self.scored += 1
        if result.score_explanation and self.background.docs < MAX_BACKGROUND:
            self.background.add(result.score_explanation)
        if row_outcome(result, self.pass_score) == "PASS":
            return
        self.low += 1
        unmet = [e for e in result.reference_basis if e.status in (_VIOLATED, _PARTIAL)]
        orphan = any(w.code is WarningCode.ORPHAN_RED_FLAG for w in result.warnings)
        lead = min(unmet, key=self._severity_order).requirement_id if unmet else None
        if lead is None or orphan:
            self.unexplained_ids.append(result.row_id)
            if len(self.texts) < MAX_TEXTS and result.score_explanation:
                self.texts.append((result.row_id, result.score_explanation))
        values = {f: _value(facts.metadata.get(f)) for f in self.by}
        key = cluster_key(lead, result.intent_key, values)
        cluster = self.clusters.get(key)
        if cluster is None:
            cluster = self.clusters[key] = _Cluster(lead, result.intent_key, values)
            if lead is not None and lead not in self.rubric.requirements_by_id:
                cluster.lead_text = facts.case_texts.get(lead)
        self._count(cluster, seq, result, facts, [e.requirement_id for e in unmet], lead)

    def _severity_order(self, entry: Any) -> tuple[int, int, int, int]:
        req = self.rubric.requirements_by_id.get(entry.requirement_id)
        top = self.rubric.score_scale.max + 1
        if req is None:  # a case-level requirement: after every pack rule
            return (entry.status is not _VIOLATED, 1, top, len(self._rank))
        cap = req.violation_score if req.violation_score is not None else top
        return (entry.status is not _VIOLATED, not req.critical, cap, self._rank[req.id])

    def _count(
        self,
        cluster: _Cluster,
        seq: int,
        result: RowResult,
        facts: RowFacts,
        unmet: list[str],
        lead: str | None,
    ) -> None:
        cluster.rows += 1
        cluster.row_ids.append(result.row_id)
        if result.final_score is not None:
            cluster.finals += 1
            cluster.final_sum += result.final_score
            cluster.points += self.rubric.score_scale.max - result.final_score
        cluster.flags.update(result.red_flag_types)
        cluster.involved.update(unmet)
        cluster.sets[tuple(sorted(unmet))] += 1
        owner = facts.metadata.get(self.owner_field) if self.owner_field else None
        if owner not in (None, ""):
            cluster.owners[_value(owner)] += 1
        turns: tuple[EvidenceTurn, ...] = ()
        for entry in result.reference_basis:
            if entry.requirement_id == lead and entry.evidence_turns:
                turns = tuple(EvidenceTurn(turn=t) for t in entry.evidence_turns)
        evidence = EvidenceRow(
            row_id=result.row_id,
            final_score=result.final_score,
            intent_key=result.intent_key,
            red_flag_types=result.red_flag_types,
            unmet_requirement_ids=tuple(unmet),
            explanation=result.score_explanation,
            turns=turns,
        )
        final = result.final_score if result.final_score is not None else self.pass_score
        item = (-final, -seq, evidence)
        if len(cluster.lowest) < KEPT_EVIDENCE:
            heapq.heappush(cluster.lowest, item)
        elif item > cluster.lowest[0]:
            heapq.heapreplace(cluster.lowest, item)

    def severity(self, cluster: _Cluster) -> float:
        """See :class:`~rubric_engine.actions.model.ActionItem`."""
        scale = self.rubric.score_scale
        req = self.rubric.requirements_by_id.get(cluster.lead) if cluster.lead else None
        if cluster.lead is None:
            return round(cluster.points / cluster.finals, 4) if cluster.finals else 1.0
        if req is not None and req.violation_score is not None:
            return float(scale.max - req.violation_score)
        if req is not None and req.critical:
            return float(scale.max - scale.min)
        return 1.0


def cluster_key(lead: str | None, intent: str | None, values: Mapping[str, str]) -> str:
    """``LEAD|INTENT|field=value,…``: the same in every task for the same cluster."""
    parts = ",".join(f"{k}={v}" for k, v in values.items())
    return f"{lead or NO_LEAD}|{intent or '-'}|{parts}"


def _value(value: Any) -> str:
    if value is None or value == "":
        return "(missing)"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def action_items(current: LowRows, baseline: LowRows | None = None) -> list[ActionItem]:
    """The ranked items of ``current``; with ``baseline``, each item's state, and the
    baseline's clusters that are gone (``FIXED``) after the others."""
    items = [_item(current, key, c, baseline) for key, c in current.clusters.items()]
    items.sort(key=lambda i: (not i.critical, -i.impact, -i.rows, i.key))
    if baseline is not None:
        now = {rid: key for key, c in current.clusters.items() for rid in c.row_ids}
        gone = [
            _gone(baseline, key, c, now)
            for key, c in baseline.clusters.items()
            if key not in current.clusters
        ]
        gone.sort(key=lambda i: (not i.critical, -(i.baseline_impact or 0), i.key))
        items += gone
    return [i.model_copy(update={"rank": n}) for n, i in enumerate(items, start=1)]


def _state(rows: int, before: int) -> ClusterState:
    if before == 0:
        return "NEW"
    if rows == 0:
        return "FIXED"
    return "GREW" if rows > before else "SHRANK" if rows < before else "SAME"


def _item(low: LowRows, key: str, c: _Cluster, baseline: LowRows | None) -> ActionItem:
    rubric = low.rubric
    req = rubric.requirements_by_id.get(c.lead) if c.lead else None
    severity = low.severity(c)
    before = baseline.clusters.get(key) if baseline is not None else None
    before_ids = set(before.row_ids) if before is not None else set()
    new_ids = tuple(r for r in c.row_ids if r not in before_ids) if baseline is not None else ()
    lowest = sorted(c.lowest, reverse=True)  # lowest final first, then input order
    evidence = [e.model_copy(update={"new": e.row_id in new_ids}) for _, _, e in lowest]
    evidence.sort(key=lambda e: not e.new)  # rows new to a grown cluster first (stable)
    return ActionItem(
        rank=0,
        key=key,
        title=_title(c, req is not None and req.critical, req.red_flag_type if req else None),
        state=None if baseline is None else _state(c.rows, before.rows if before else 0),
        lead_requirement_id=c.lead,
        text=req.text if req else c.lead_text,
        category=req.category if req else None,
        critical=bool(req and req.critical),
        red_flag_type=req.red_flag_type if req else None,
        violation_score=req.violation_score if req else None,
        intent_key=c.intent,
        slice=c.slice,
        rows=c.rows,
        baseline_rows=None if baseline is None else (before.rows if before else 0),
        severity=severity,
        impact=round(c.rows * severity, 4),
        baseline_impact=None
        if baseline is None
        else (round(before.rows * baseline.severity(before), 4) if before else 0.0),
        mean_final_score=round(c.final_sum / c.finals, 4) if c.finals else None,
        red_flag_types=dict(sorted(c.flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        involved=_involved(c.involved, rubric),
        unmet_sets=tuple(
            UnmetSet(ids=ids, rows=n)
            for ids, n in sorted(c.sets.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        ),
        owner=_owner(c.owners),
        evidence=tuple(evidence[:SHOWN_EVIDENCE]),
        row_ids=tuple(c.row_ids),
        new_row_ids=new_ids,
    )


def _gone(baseline: LowRows, key: str, c: _Cluster, now: Mapping[str, str]) -> ActionItem:
    """A baseline cluster with no row in the current task: MOVED when some of its rows are
    low under other clusters now, else FIXED."""
    item = _item(baseline, key, c, None)
    moved = Counter(now[rid] for rid in c.row_ids if rid in now)
    return item.model_copy(
        update={
            "state": "MOVED" if moved else "FIXED",
            "rows": 0,
            "baseline_rows": c.rows,
            "impact": 0.0,
            "baseline_impact": item.impact,
            "mean_final_score": None,
            "evidence": (),
            "row_ids": (),
            "red_flag_types": {},
            "moved_to": dict(sorted(moved.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
    )


def _title(c: _Cluster, critical: bool, flag: str | None) -> str:
    where = f" in {c.intent}" if c.intent else ""
    where += "".join(f", {k}={v}" for k, v in c.slice.items())
    if c.lead is None:
        return f"Low rows no rule explains{where}"
    kind = f"red line {flag}" if critical else "rule"
    return f"{c.lead} ({kind}){where}"


def _involved(counts: Counter[str], rubric: EvalRubric) -> tuple[Involved, ...]:
    reqs = rubric.requirements_by_id
    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(
        Involved(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None) for rid, n in order
    )


def _owner(owners: Counter[str]) -> str | None:
    if not owners:
        return None
    return min(owners, key=lambda o: (-owners[o], o))


def states(items: Iterable[ActionItem]) -> dict[str, int]:
    """How many items are in each state (none without a baseline)."""
    found: Counter[str] = Counter(i.state for i in items if i.state is not None)
    order = ("NEW", "GREW", "SHRANK", "SAME", "MOVED", "FIXED")
    return {s: found[s] for s in order if found[s]}
