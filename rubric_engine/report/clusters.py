"""Issue clusters: low-scoring rows grouped by the requirements they violate (seed 003 closing
paragraph: turn hundreds of low-score samples into problem clusters and then action items).

A **low row** is a SCORED row whose outcome is not ``PASS`` (below the pass score, or any red
flag; see :mod:`rubric_engine.report.outcome`). Clusters are formed greedily and do not
overlap: the requirement violated by the most remaining low rows leads the next cluster and takes
all of them (ties: red lines first, then the lower ``violationScore`` cap, then pack order);
repeat until every low row with a violated requirement is placed. Low rows that violate nothing
(only PARTIAL entries, or a low score the judge did not explain) form one last cluster with no
lead. Clusters are ranked by size, then red-flag share, then lowest mean score. Pure.

The rows arrive one at a time (:class:`LowRows`, fed by the streaming report, in any order) and
are kept compactly: per low row its seq, rowId and final score in arrays, its violated IDs and
red-flag types as indexes into interned sets (a task has few distinct sets), so the greedy
passes count distinct sets, never rows.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from typing import Generic, TypeVar

from rubric_engine.report.model import CoViolated, IssueCluster
from rubric_engine.report.outcome import ROUNDED, Figures
from rubric_engine.results import RequirementStatus, RowResult
from rubric_engine.rubric.model import EvalRubric

EXAMPLE_ROWS = 5
#: a final score of ``None`` in :attr:`LowRows.finals`
_NO_SCORE = -(2**31)


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


class CompactStrings:
    """Strings appended one by one and read back by position, held as one UTF-8 buffer and
    the end offset of each: the string's bytes + 8 bytes each (a ``str`` object is ~50 bytes
    more), for the rowIds a report lists."""

    __slots__ = ("_data", "_ends")

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")

    def __len__(self) -> int:
        return len(self._ends)

    def append(self, value: str) -> None:
        self._data += value.encode("utf-8")
        self._ends.append(len(self._data))

    def __getitem__(self, i: int) -> str:
        start = self._ends[i - 1] if i > 0 else 0
        return self._data[start : self._ends[i]].decode("utf-8")


class LowRows:
    """A task's low rows as :func:`issue_clusters` reads them, added in any order.

    Per row: 8 bytes of seq, 4 of final score, 4 + 4 of set indexes and the rowId in a
    :class:`CompactStrings` (its bytes + 8: the clusters list every low row's id).
    """

    def __init__(self) -> None:
        self.seqs = array("q")
        self.ids = CompactStrings()
        self.finals = array("i")
        self.violated = array("I")  # index into self.sets
        self.flags = array("I")  # index into self.flag_sets
        self.sets: _Interned[frozenset[str]] = _Interned()
        self.flag_sets: _Interned[tuple[str, ...]] = _Interned()

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, seq: int, row: RowResult) -> None:
        """Keep one low row (``seq``: its input position; ``row``: SCORED, outcome not PASS)."""
        ids = frozenset(
            e.requirement_id for e in row.reference_basis if e.status is RequirementStatus.VIOLATED
        )
        self.seqs.append(seq)
        self.ids.append(row.row_id)
        self.finals.append(_NO_SCORE if row.final_score is None else row.final_score)
        self.violated.append(self.sets.of(ids))
        self.flags.append(self.flag_sets.of(tuple(row.red_flag_types)))

    def in_order(self) -> list[int]:
        """Row indexes in input (seq) order."""
        return sorted(range(len(self.ids)), key=self.seqs.__getitem__)

    def final(self, i: int) -> int | None:
        value = self.finals[i]
        return None if value == _NO_SCORE else value


def issue_clusters(
    rubric: EvalRubric, low: LowRows, fig: Figures = ROUNDED
) -> tuple[IssueCluster, ...]:
    """Ranked clusters (see :class:`~rubric_engine.report.model.IssueCluster`).

    Args:
        low: the task's low rows (SCORED, outcome not ``PASS`` at the report's pass score).

    Returns:
        Empty when no row is low. ``rowIds`` are in input order; ``exampleRowIds`` are
        the lowest-scoring first. Case-level requirements (``CASE_…``) have no text or category
        in the pack and show ``null``.
    """
    reqs = rubric.requirements_by_id
    order = {rid: i for i, rid in enumerate(reqs)}
    top = rubric.score_scale.max + 1

    def severity(rid: str) -> tuple[int, int, int]:
        req = reqs.get(rid)
        if req is None:
            return (1, top, len(order))
        cap = req.violation_score if req.violation_score is not None else top
        return (0 if req.critical else 1, cap, order[rid])

    sets = low.sets.values
    rows_per_set = Counter(low.violated)
    remaining = {s: n for s, n in rows_per_set.items() if sets[s]}
    groups: list[tuple[str | None, set[int]]] = []
    while remaining:
        counts: Counter[str] = Counter()
        for s, n in remaining.items():
            for rid in sets[s]:
                counts[rid] += n
        lead = min(counts, key=lambda rid: (-counts[rid], *severity(rid), rid))
        members = {s for s in remaining if lead in sets[s]}
        for s in members:
            del remaining[s]
        groups.append((lead, members))
    unexplained = {s for s in rows_per_set if not sets[s]}
    if unexplained:
        groups.append((None, unexplained))

    group_of = {s: g for g, (_, members) in enumerate(groups) for s in members}
    member_rows: list[list[int]] = [[] for _ in groups]
    for i in low.in_order():
        member_rows[group_of[low.violated[i]]].append(i)
    clusters = [
        _cluster(lead, member_rows[g], members, rows_per_set, low, rubric, fig)
        for g, (lead, members) in enumerate(groups)
    ]
    clusters.sort(
        key=lambda c: (
            c.lead_requirement_id is None,
            -c.size,
            -c.red_flag_share,
            c.mean_score,
            order.get(c.lead_requirement_id or "", len(order)),
        )
    )
    return tuple(c.model_copy(update={"rank": rank}) for rank, c in enumerate(clusters, start=1))


def _cluster(
    lead: str | None,
    rows: list[int],
    member_sets: set[int],
    rows_per_set: Counter[int],
    low: LowRows,
    rubric: EvalRubric,
    fig: Figures,
) -> IssueCluster:
    """One cluster of ``rows`` (indexes into ``low``, in input order)."""
    reqs = rubric.requirements_by_id
    req = reqs.get(lead) if lead else None
    finals = [f for f in map(low.final, rows) if f is not None]
    others: Counter[str] = Counter()
    for s in member_sets:
        for rid in low.sets.values[s]:
            if rid != lead:
                others[rid] += rows_per_set[s]
    flags: Counter[str] = Counter()
    flagged = 0
    for i in rows:
        types = low.flag_sets.values[low.flags[i]]
        flags.update(types)
        flagged += bool(types)
    lowest = heapq.nsmallest(EXAMPLE_ROWS, rows, key=lambda i: (low.final(i) or 0, low.seqs[i]))
    return IssueCluster(
        rank=0,  # set once the clusters are ranked
        lead_requirement_id=lead,
        text=req.text if req else None,
        critical=bool(req and req.critical),
        category=req.category if req else None,
        size=len(rows),
        row_ids=tuple(low.ids[i] for i in rows),
        example_row_ids=tuple(low.ids[i] for i in lowest),
        mean_score=fig.mean(finals),
        red_flag_share=fig.ratio(flagged, len(rows)) or 0.0,
        red_flag_types=dict(sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        co_violated=tuple(
            CoViolated(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None)
            for rid, n in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
