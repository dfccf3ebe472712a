"""Issue clusters: low-scoring rows grouped by the requirements they violate (seed 003 closing
paragraph: turn hundreds of low-score samples into problem clusters and then action items).

A **low row** is a SCORED row whose outcome is not ``PASS`` (below the pass score, or any red
flag; see :mod:`rubric_engine.report.outcome`). Clusters are formed greedily and do not
overlap: the requirement violated by the most remaining low rows leads the next cluster and takes
all of them (ties: red lines first, then the lower ``violationScore`` cap, then pack order);
repeat until every low row with a violated requirement is placed. Low rows that violate nothing
(only PARTIAL entries, or a low score the judge did not explain) form one last cluster with no
lead. Clusters are ranked by size, then red-flag share, then lowest mean score. Pure.
"""

from __future__ import annotations

from collections import Counter

from rubric_engine.report.model import CoViolated, IssueCluster
from rubric_engine.report.outcome import ROUNDED, Figures, row_outcome
from rubric_engine.results import RequirementStatus, RowResult
from rubric_engine.rubric.model import EvalRubric

EXAMPLE_ROWS = 5


def _violated(row: RowResult) -> list[str]:
    return [e.requirement_id for e in row.reference_basis if e.status is RequirementStatus.VIOLATED]


def issue_clusters(
    rubric: EvalRubric, scored: list[RowResult], pass_score: int, fig: Figures = ROUNDED
) -> tuple[IssueCluster, ...]:
    """Ranked clusters (see :class:`~rubric_engine.report.model.IssueCluster`).

    Args:
        scored: the task's SCORED rows in input order.
        pass_score: rows at or above it without a red flag are not low.

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

    low = [r for r in scored if row_outcome(r, pass_score) != "PASS"]
    violated = {r.row_id: set(_violated(r)) for r in low}  # rowIds are unique in a task
    remaining = [r for r in low if violated[r.row_id]]
    groups: list[tuple[str | None, list[RowResult]]] = []
    while remaining:
        counts = Counter(rid for r in remaining for rid in violated[r.row_id])
        lead = min(counts, key=lambda rid: (-counts[rid], *severity(rid), rid))
        members = [r for r in remaining if lead in violated[r.row_id]]
        remaining = [r for r in remaining if lead not in violated[r.row_id]]
        groups.append((lead, members))
    unexplained = [r for r in low if not violated[r.row_id]]
    if unexplained:
        groups.append((None, unexplained))

    clusters = [_cluster(lead, members, rubric, violated, fig) for lead, members in groups]
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
    members: list[RowResult],
    rubric: EvalRubric,
    violated: dict[str, set[str]],
    fig: Figures,
) -> IssueCluster:
    reqs = rubric.requirements_by_id
    req = reqs.get(lead) if lead else None
    finals = [r.final_score for r in members if r.final_score is not None]
    others = Counter(rid for r in members for rid in violated[r.row_id] if rid != lead)
    flags = Counter(flag for r in members for flag in r.red_flag_types)
    lowest = sorted(enumerate(members), key=lambda ir: (ir[1].final_score or 0, ir[0]))
    return IssueCluster(
        rank=0,  # set once the clusters are ranked
        lead_requirement_id=lead,
        text=req.text if req else None,
        critical=bool(req and req.critical),
        category=req.category if req else None,
        size=len(members),
        row_ids=tuple(r.row_id for r in members),
        example_row_ids=tuple(r.row_id for _, r in lowest[:EXAMPLE_ROWS]),
        mean_score=fig.mean(finals),
        red_flag_share=fig.ratio(sum(1 for r in members if r.red_flag_types), len(members)) or 0.0,
        red_flag_types=dict(sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))),
        co_violated=tuple(
            CoViolated(id=rid, rows=n, text=reqs[rid].text if rid in reqs else None)
            for rid, n in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
