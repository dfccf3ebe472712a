"""Issue clusters: low-scoring rows grouped by the requirements they violate (docs/reports.md:
turn hundreds of low-score samples into problem clusters and then action items).

A **low row** is a SCORED row whose outcome is not ``PASS`` (below the pass score, or any red
flag; see :mod:`rubric_engine.report.outcome`). Clusters are formed greedily and do not
overlap: the requirement violated by the most remaining low rows leads the next cluster and takes
all of them (ties: red lines first, then the lower ``violationScore`` cap, then pack order);
repeat until every low row with a violated requirement is placed. Low rows that violate nothing
(only PARTIAL entries, or a low score the judge did not explain) form one last cluster with no
lead. Clusters are ranked by size, then red-flag share, then lowest mean score. Pure.

The rows arrive one at a time (:class:`ListedRows`, fed by the streaming report, in any order)
and are kept compactly: per listed row its seq, rowId and final score in arrays, its violated
IDs and red-flag types as indexes into interned sets (a task has few distinct sets), so the
greedy passes count distinct sets, never rows. The clusters' rowIds are
:class:`~rubric_engine.report.row_ids.RowIds` views into the rows' one buffer of ids.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from itertools import chain
from typing import Generic, TypeVar

from rubric_engine.report.model import CoViolated, IssueCluster
from rubric_engine.report.outcome import ROUNDED, Figures
from rubric_engine.report.row_ids import CompactStrings, RowIds, append_int, positions_in
from rubric_engine.results.model import RequirementStatus, RowResult
from rubric_engine.rubric.model import EvalRubric

EXAMPLE_ROWS = 5
#: a listed row that is not a low row (a CHECKED row with a red flag) in :attr:`ListedRows.sets`
NOT_LOW = 0


_T = TypeVar("_T", frozenset[str], tuple[str, ...])


class _Interned(Generic[_T]):
    """Distinct values by first appearance; each value stored once, rows hold its index."""

    def __init__(self) -> None:
        self.index: dict[_T, int] = {}
        self.values: list[_T] = []

    def of(self, value: _T) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found


class ListedRows:
    """The rows whose rowId a report lists, each once, added in any order: the low rows
    (:func:`issue_clusters`) and the red-flagged ones (``redFlags``; a flagged SCORED row is
    always low, a flagged CHECKED row is listed for its flags alone).

    Per row: its rowId in a :class:`~rubric_engine.report.row_ids.CompactStrings` (its bytes
    + 4), its seq (4 bytes), and its final score, violated-ID set and red-flag set (indexes
    into interned sets) in arrays of the smallest item size that holds them (1 byte each for
    the usual pack): about 20 bytes plus the id's.
    """

    def __init__(self) -> None:
        self.ids = CompactStrings()
        self.seqs = array("I")
        self.finals = array("b")
        self.sets = array("B")  # 1 + index into self.violated_sets, or NOT_LOW
        self.flags = array("B")  # index into self.flag_sets
        self.no_final: set[int] = set()  # rows (positions) without a final score
        self.violated_sets: _Interned[frozenset[str]] = _Interned()
        self.flag_sets: _Interned[tuple[str, ...]] = _Interned()
        self.flag_sets.of(())  # index 0: no red flag
        self.low = 0

    def __len__(self) -> int:
        return len(self.ids)

    def group_of(self, violated: frozenset[str]) -> int:
        """The group of low rows violating exactly ``violated`` (interned)."""
        return 1 + self.violated_sets.of(violated)

    def add_low(self, seq: int, row: RowResult, group: int | None = None) -> None:
        """Keep a low row (``seq``: its input position; ``row``: SCORED, outcome not PASS;
        ``group``: :meth:`group_of` its VIOLATED IDs, when the caller has it)."""
        if group is None:
            group = self.group_of(
                frozenset(
                    e.requirement_id
                    for e in row.reference_basis
                    if e.status is RequirementStatus.VIOLATED
                )
            )
        self._add(seq, row, group)
        self.low += 1

    def add_flagged(self, seq: int, row: RowResult) -> None:
        """Keep a CHECKED row with red flags (listed under them, in no cluster)."""
        self._add(seq, row, NOT_LOW)

    def _add(self, seq: int, row: RowResult, group: int) -> None:
        position = self.ids.append(row.row_id)
        self.seqs = append_int(self.seqs, seq)
        if row.final_score is None:
            self.no_final.add(position)
        self.finals = append_int(self.finals, row.final_score or 0)
        self.sets = append_int(self.sets, group)
        flags = self.flag_sets.of(tuple(row.red_flag_types)) if row.red_flag_types else 0
        self.flags = append_int(self.flags, flags)

    def listing(self) -> array[int]:
        """Row positions in listing order: low rows in input (seq) order, then the flagged
        CHECKED rows in input order (the order ``redFlags`` lists them in)."""
        order = positions_in(self.seqs)
        if self.low == len(self):
            return order
        sets = self.sets
        low = (p for p in order if sets[p] != NOT_LOW)
        return array("I", chain(low, (p for p in order if sets[p] == NOT_LOW)))

    def final(self, i: int) -> int | None:
        return None if i in self.no_final else self.finals[i]

    def flagged(self, order: array[int]) -> dict[str, RowIds]:
        """The rows listed under each red-flag type seen, in ``order`` (a row that names a
        type twice is listed twice, as the report always did)."""
        positions: dict[str, array[int]] = {}
        flags, flag_sets = self.flags, self.flag_sets.values
        for p in order:
            if flags[p]:
                for flag in flag_sets[flags[p]]:
                    found = positions.get(flag)
                    if found is None:
                        found = positions[flag] = array("I")
                    found.append(p)
        return {flag: RowIds(self.ids, at) for flag, at in positions.items()}


def issue_clusters(
    rubric: EvalRubric,
    listed: ListedRows,
    fig: Figures = ROUNDED,
    order: array[int] | None = None,
) -> tuple[IssueCluster, ...]:
    """Ranked clusters (see :class:`~rubric_engine.report.model.IssueCluster`).

    Args:
        listed: the task's listed rows; its low rows (SCORED, outcome not ``PASS`` at the
            report's pass score) are clustered.
        order: ``listed.listing()``, when the caller has it already.

    Returns:
        Empty when no row is low. ``rowIds`` are in input order; ``exampleRowIds`` are
        the lowest-scoring first. Case-level requirements (``CASE_…``) have no text or category
        in the pack and show ``null``.
    """
    reqs = rubric.requirements_by_id
    rank_of = {rid: i for i, rid in enumerate(reqs)}
    top = rubric.score_scale.max + 1

    def severity(rid: str) -> tuple[int, int, int]:
        req = reqs.get(rid)
        if req is None:
            return (1, top, len(rank_of))
        cap = req.violation_score if req.violation_score is not None else top
        return (0 if req.critical else 1, cap, rank_of[rid])

    sets = listed.violated_sets.values  # a row's group is 1 + its set's index
    rows_per_set = Counter(listed.sets)
    rows_per_set.pop(NOT_LOW, None)
    remaining = {g: n for g, n in rows_per_set.items() if sets[g - 1]}
    groups: list[tuple[str | None, set[int]]] = []
    while remaining:
        counts: Counter[str] = Counter()
        for g, n in remaining.items():
            for rid in sets[g - 1]:
                counts[rid] += n
        lead = min(counts, key=lambda rid: (-counts[rid], *severity(rid), rid))
        members = {g for g in remaining if lead in sets[g - 1]}
        for g in members:
            del remaining[g]
        groups.append((lead, members))
    unexplained = {g for g in rows_per_set if not sets[g - 1]}
    if unexplained:
        groups.append((None, unexplained))

    cluster_of = {g: c for c, (_, members) in enumerate(groups) for g in members}
    member_rows = [array("I") for _ in groups]
    row_sets = listed.sets
    for i in listed.listing() if order is None else order:
        if row_sets[i] != NOT_LOW:
            member_rows[cluster_of[row_sets[i]]].append(i)
    clusters = [
        _cluster(lead, member_rows[c], members, rows_per_set, listed, rubric, fig)
        for c, (lead, members) in enumerate(groups)
    ]
    clusters.sort(
        key=lambda c: (
            c.lead_requirement_id is None,
            -c.size,
            -c.red_flag_share,
            c.mean_score,
            rank_of.get(c.lead_requirement_id or "", len(rank_of)),
        )
    )
    return tuple(c.model_copy(update={"rank": rank}) for rank, c in enumerate(clusters, start=1))


def _cluster(
    lead: str | None,
    rows: array[int],
    member_sets: set[int],
    rows_per_set: Counter[int],
    listed: ListedRows,
    rubric: EvalRubric,
    fig: Figures,
) -> IssueCluster:
    """One cluster of ``rows`` (positions in ``listed``, in input order)."""
    reqs = rubric.requirements_by_id
    req = reqs.get(lead) if lead else None
    no_final, finals = listed.no_final, listed.finals
    unscored = sum(i in no_final for i in rows) if no_final else 0
    total = sum(map(finals.__getitem__, rows))  # a missing final is kept as 0
    others: Counter[str] = Counter()
    for g in member_sets:
        for rid in listed.violated_sets.values[g - 1]:
            if rid != lead:
                others[rid] += rows_per_set[g]
    flags: Counter[str] = Counter()
    flagged = 0
    for flag_set, n in Counter(map(listed.flags.__getitem__, rows)).items():
        for flag in listed.flag_sets.values[flag_set]:
            flags[flag] += n
        flagged += n if flag_set else 0
    lowest = heapq.nsmallest(
        EXAMPLE_ROWS, rows, key=lambda i: (listed.final(i) or 0, listed.seqs[i])
    )
    return IssueCluster(
        rank=0,  # set once the clusters are ranked
        lead_requirement_id=lead,
        text=req.text if req else None,
        critical=bool(req and req.critical),
        category=req.category if req else None,
        size=len(rows),
        row_ids=RowIds(listed.ids, rows),
        example_row_ids=tuple(listed.ids[i] for i in lowest),
        mean_score=fig.mean_of(total, len(rows) - unscored),
        red_flag_share=fig.ratio(flagged, len(rows)) or 0.0,
        red_flag_types=dict(sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        co_violated=tuple(
            CoViolated(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None)
            for rid, n in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
