"""The action list's one type (``rubric-eval actions``; docs/actions.md): what ``--format
json`` writes and every renderer reads. camelCase JSON through the project's alias generator.
Pure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rubric_engine.results.model import _Wire

#: how a cluster moved against the baseline task (``None`` without one)
#: (``MOVED``: gone from the task, its rows still low under other clusters; ``FIXED``: gone,
#: and none of its rows is low any more)
ClusterState = Literal["NEW", "GREW", "SHRANK", "SAME", "MOVED", "FIXED"]


class EvidenceTurn(_Wire):
    """A turn the judge named for the cluster's lead requirement (``judge_v3``): its index
    (0-based, as on the referenceBasis), role and the start of its text."""

    turn: int
    role: str | None = None
    text: str | None = None


class EvidenceRow(_Wire):
    row_id: str
    final_score: int | None
    intent_key: str | None
    red_flag_types: tuple[str, ...]
    unmet_requirement_ids: tuple[str, ...]
    explanation: str | None
    turns: tuple[EvidenceTurn, ...] = ()
    #: the row was not in this cluster in the baseline task
    new: bool = False


class Involved(_Wire):
    """A requirement unmet in the cluster's rows, with how many."""

    id: str
    rows: int
    text: str | None


class UnmetSet(_Wire):
    """An exact set of unmet requirements and how many of the cluster's rows have it."""

    ids: tuple[str, ...]
    rows: int


class ActionItem(_Wire):
    """One cluster of low rows as a schedulable action (docs/actions.md).

    Attributes:
        key: ``lead|intent|field=value…``: what identifies the cluster in any task.
        lead_requirement_id: the most severe unmet requirement its rows share (red lines
            first, then the lowest cap, then pack order); ``None`` for rows no rule explains.
        severity: the points a row loses to the lead at most: top of the scale minus its cap
            (minus the bottom for an uncapped red line, 1 for an uncapped rule); for rows no
            rule explains, their mean points lost.
        impact: ``rows × severity``.
        baseline_rows / baseline_impact: the same cluster in the baseline task (0 when absent).
        owner: the most frequent value of the owner field in the rows' metadata, if any.
    """

    rank: int
    key: str
    title: str
    state: ClusterState | None
    lead_requirement_id: str | None
    text: str | None
    category: str | None
    critical: bool
    red_flag_type: str | None
    violation_score: int | None
    intent_key: str | None
    slice: dict[str, str]
    rows: int
    baseline_rows: int | None
    severity: float
    impact: float
    baseline_impact: float | None
    mean_final_score: float | None
    red_flag_types: dict[str, int]
    involved: tuple[Involved, ...]
    unmet_sets: tuple[UnmetSet, ...]
    owner: str | None
    evidence: tuple[EvidenceRow, ...]
    row_ids: tuple[str, ...]
    new_row_ids: tuple[str, ...] = ()
    #: a MOVED cluster: the current clusters its baseline rows are in, and how many
    moved_to: dict[str, int] = Field(default_factory=dict)


class TextCluster(_Wire):
    """A cluster of the judge's explanations of rows no rule explains, proposed as a
    candidate requirement for the next version."""

    rank: int
    rows: int
    terms: tuple[str, ...]
    row_ids: tuple[str, ...]
    examples: tuple[str, ...]
    #: a one-line criterion (``rubric init`` format) for a person to finish
    candidate: str
    #: the model's candidate rule for the cluster (``--summarize``), when asked
    summary: str | None = None


class Unexplained(_Wire):
    """Low rows that no unmet requirement explains (nothing VIOLATED or PARTIAL, or a red
    flag no requirement raised), and the clusters of their explanations."""

    rows: int
    row_ids: tuple[str, ...]
    clustered: int
    seed: int
    clusters: tuple[TextCluster, ...]


class ActionsReport(_Wire):
    task_id: str
    rubric: str
    baseline_task_id: str | None
    baseline_rubric: str | None
    pass_score: int
    scored_rows: int
    low_rows: int
    baseline_low_rows: int | None
    by: tuple[str, ...]
    owner_field: str
    states: dict[str, int]
    items: tuple[ActionItem, ...]
    unexplained: Unexplained
