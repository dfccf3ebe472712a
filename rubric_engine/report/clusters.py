"""Issue clusters: low-scoring rows grouped by the requirements they violate (docs/reports.md:
turn hundreds of low-score samples into problem clusters and then action items).

A **low row** is a SCORED row whose outcome is not ``PASS`` (below the pass score, or any red
flag; see :mod:`rubric_engine.report.outcome`). Clusters are formed greedily and do not
overlap: the requirement violated by the most remaining low rows leads the next cluster and takes
all of them (ties: red lines first, then the lower ``violationScore`` cap, then pack order);
repeat until every low row with a violated requirement is placed. Low rows that violate nothing
(only PARTIAL entries, or a low score the judge did not explain) form one last cluster with no
lead. Clusters are ranked by size, then red-flag share, then lowest mean score. Pure.

The rows arrive one at a time (:class:`ListedRows`, fed by the streaming report, in any order).
Memory holds what the clusters add up per distinct set of violated IDs (a task has few), so
the greedy passes count distinct sets, never rows; each row's seq and rowId go to the report's
:class:`~rubric_engine.report.per_row.Listed` table (a temporary database for a report streamed
from a store), from which the clusters' and red flags' rowIds
(:class:`~rubric_engine.report.row_ids.RowIds`) are read when the report is written.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator
from typing import Generic, Literal, TypeVar

from rubric_engine.report.model import CoViolated, IssueCluster
from rubric_engine.report.outcome import ROUNDED, Figures
from rubric_engine.report.per_row import NOT_LOW, Listed
from rubric_engine.report.row_ids import RowIds
from rubric_engine.results.model import RequirementStatus, RowResult
from rubric_engine.rubric.model import EvalRubric

EXAMPLE_ROWS = 5


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


class _Group:
    """What the clusters add up of the low rows violating one set of IDs: how many, the sum of
    their final scores (a missing one as 0) and how many have none, their rows per red-flag
    set, and their :data:`EXAMPLE_ROWS` lowest (final score, seq, rowId)."""

    __slots__ = ("flag_sets", "lowest", "rows", "total", "unscored")

    def __init__(self) -> None:
        self.rows = self.total = self.unscored = 0
        self.flag_sets: Counter[int] = Counter()
        self.lowest: list[tuple[int, int, str]] = []  # max-heap by (final, seq), negated

    def add(self, seq: int, row: RowResult, flag_set: int) -> None:
        final = row.final_score or 0
        self.rows += 1
        self.total += final
        self.unscored += row.final_score is None
        self.flag_sets[flag_set] += 1
        key = (-final, -seq, row.row_id)
        if len(self.lowest) < EXAMPLE_ROWS:
            heapq.heappush(self.lowest, key)
        elif key > self.lowest[0]:
            heapq.heapreplace(self.lowest, key)


class ListedRows:
    """The rows whose rowId a report lists, each once, added in any order: the low rows
    (:func:`issue_clusters`) and the red-flagged ones (``redFlags``; a flagged SCORED row is
    always low, a flagged CHECKED row is listed for its flags alone).

    Each row's seq, rowId, group (:meth:`group_of` its violated IDs; :data:`NOT_LOW` for a
    flagged CHECKED row) and red-flag set (an index into interned sets) go to ``table``; memory
    holds a :class:`_Group` per distinct set of violated IDs, whatever the number of rows. The
    lists of rowIds are read back from ``table`` as they are written (:meth:`row_ids`).
    """

    def __init__(self, table: Listed) -> None:
        self.table = table
        self.groups: dict[int, _Group] = {}  # by group, low rows only
        self.flag_rows: Counter[int] = Counter()  # rows by red-flag set, every listed row
        self.violated_sets: _Interned[frozenset[str]] = _Interned()
        self.flag_sets: _Interned[tuple[str, ...]] = _Interned()
        self.flag_sets.of(())  # index 0: no red flag
        self.low = 0

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
        flag_set = self._add(seq, row, group)
        found = self.groups.get(group)
        if found is None:
            found = self.groups[group] = _Group()
        found.add(seq, row, flag_set)
        self.low += 1

    def add_flagged(self, seq: int, row: RowResult) -> None:
        """Keep a CHECKED row with red flags (listed under them, in no cluster)."""
        self._add(seq, row, NOT_LOW)

    def _add(self, seq: int, row: RowResult, group: int) -> int:
        flag_set = self.flag_sets.of(tuple(row.red_flag_types)) if row.red_flag_types else 0
        self.flag_rows[flag_set] += 1
        self.table.add(seq, row.row_id, group, flag_set)
        return flag_set

    def row_ids(
        self,
        count: int,
        column: Literal["group", "flag_set"],
        values: tuple[int, ...],
        times: dict[int, int],
    ) -> RowIds:
        """The rowIds of the ``count`` rows whose ``column`` is one of ``values``, each
        ``times[flag set]`` times (1 when not given), in listing order: low rows in input
        (seq) order, then the flagged CHECKED rows in input order."""
        table = self.table

        def read() -> Iterator[str]:
            for row_id, flag_set in table.read(column, values):
                for _ in range(times.get(flag_set, 1)):
                    yield row_id

        return RowIds(count, read)

    def flagged(self) -> dict[str, RowIds]:
        """The rows listed under each red-flag type seen (a row that names a type twice is
        listed twice, as the report always did)."""
        out: dict[str, RowIds] = {}
        sets = self.flag_sets.values
        for flag in dict.fromkeys(f for flags in sets for f in flags):
            times = {i: flags.count(flag) for i, flags in enumerate(sets) if flag in flags}
            count = sum(self.flag_rows[i] * n for i, n in times.items())
            out[flag] = self.row_ids(count, "flag_set", tuple(times), times)
        return out


def issue_clusters(
    rubric: EvalRubric,
    listed: ListedRows,
    fig: Figures = ROUNDED,
) -> tuple[IssueCluster, ...]:
    """Ranked clusters (see :class:`~rubric_engine.report.model.IssueCluster`).

    Args:
        listed: the task's listed rows; its low rows (SCORED, outcome not ``PASS`` at the
            report's pass score) are clustered.

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
    rows_per_set = {g: group.rows for g, group in listed.groups.items()}
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

    clusters = [_cluster(lead, members, listed, rubric, fig) for lead, members in groups]
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
    lead: str | None, members: set[int], listed: ListedRows, rubric: EvalRubric, fig: Figures
) -> IssueCluster:
    """One cluster: the low rows of the ``members`` groups."""
    reqs = rubric.requirements_by_id
    req = reqs.get(lead) if lead else None
    groups = [listed.groups[g] for g in sorted(members)]
    size = sum(group.rows for group in groups)
    unscored = sum(group.unscored for group in groups)
    total = sum(group.total for group in groups)
    others: Counter[str] = Counter()
    for g in members:
        for rid in listed.violated_sets.values[g - 1]:
            if rid != lead:
                others[rid] += listed.groups[g].rows
    flags: Counter[str] = Counter()
    flagged = 0
    for group in groups:
        for flag_set, n in group.flag_sets.items():
            for flag in listed.flag_sets.values[flag_set]:
                flags[flag] += n
            flagged += n if flag_set else 0
    lowest = heapq.nlargest(EXAMPLE_ROWS, (key for group in groups for key in group.lowest))
    return IssueCluster(
        rank=0,  # set once the clusters are ranked
        lead_requirement_id=lead,
        text=req.text if req else None,
        critical=bool(req and req.critical),
        category=req.category if req else None,
        size=size,
        row_ids=listed.row_ids(size, "group", tuple(sorted(members)), {}),
        example_row_ids=tuple(row_id for _, _, row_id in lowest),
        mean_score=fig.mean_of(total, size - unscored),
        red_flag_share=fig.ratio(flagged, size) or 0.0,
        red_flag_types=dict(sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        co_violated=tuple(
            CoViolated(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None)
            for rid, n in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
