"""How a metric moves across the tasks of a name or tag: ``rubric-eval trend`` (pure).

A :class:`Trend` holds one :class:`TrendPoint` per task, oldest first: the task's figures for
the chosen metrics (any name of the gate's table, :mod:`rubric_engine.report.metrics`), its
red-flag rate per type and mean score per intent, and what changed since the task before —
the rubric version, the judge model or the prompt — since a figure that moves with the
instrument is not the agent moving. ``drops`` lists each metric's changes for the worse
between neighbours (by the metric's better direction), which the terminal marks and the
chart shows.

**Run-to-run agreement**: given each task's rows as :data:`RowMark` values, a point also says
how many rows it shares with the task before (judged in both, neither a JUDGE_ERROR) and how
many of those changed their outcome (PASS, FAIL, RED_FLAG) or final score. Two runs of the
same agent, rubric and judge that disagree on many rows say the figures move with the judge's
noise, not the agent (docs/ci.md). (This is not "stability", which is the agreement of one
row's repeated samples within a task, docs/stability.md.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.metrics import Better, find_metric, metric_names
from rubric_engine.report.model import Report

#: the metrics shown when none is asked for
DEFAULT_METRICS = ("meanScore", "passRate", "redFlagRate", "judgeErrors")
#: a row as run-to-run agreement compares it: (outcome, final score), by rowId in a task's marks
RowMark = tuple[str, int | None]


@dataclass(frozen=True)
class RunAgreement:
    """Rows judged in a task and in the one before it (``shared``: neither a JUDGE_ERROR),
    and how many of them changed outcome or final score."""

    shared: int
    outcome_changed: int
    score_changed: int

    @property
    def same_outcome_rate(self) -> float | None:
        """Share of the shared rows that kept their outcome; ``None`` with none shared."""
        return (self.shared - self.outcome_changed) / self.shared if self.shared else None


def run_agreement(before: Mapping[str, RowMark], after: Mapping[str, RowMark]) -> RunAgreement:
    """Compare the rows two tasks share by rowId (JUDGE_ERROR rows have no outcome)."""
    shared = [
        (before[row_id], mark)
        for row_id, mark in after.items()
        if row_id in before and "JUDGE_ERROR" not in (mark[0], before[row_id][0])
    ]
    return RunAgreement(
        shared=len(shared),
        outcome_changed=sum(old[0] != new[0] for old, new in shared),
        score_changed=sum(old[1] != new[1] for old, new in shared),
    )


@dataclass(frozen=True)
class TrendPoint:
    """One task of the trend.

    Attributes:
        values: the chosen metrics in order (``None`` where the task has no value).
        red_flag_rates: red-flag type → rows with it / scored rows (types of the task's pack).
        intent_means: intent key → mean final score (intents with scored rows).
        changes: what differs from the task before (``rubric health_cs@1→@2``, ``model …``).
        agreement: rows shared with the task before and how many changed (``None`` for the
            first task, or when no marks were given).
    """

    task_id: str
    created_at: str
    label: str
    rubric: str
    model: str
    prompt: str
    rows: int
    values: tuple[float | None, ...]
    red_flag_rates: dict[str, float] = field(default_factory=dict)
    intent_means: dict[str, float] = field(default_factory=dict)
    changes: tuple[str, ...] = ()
    agreement: RunAgreement | None = None


@dataclass(frozen=True)
class Drop:
    """A change for the worse of one metric between a task and the one before it."""

    metric: str
    before_task: str
    task_id: str
    before: float
    after: float


@dataclass(frozen=True)
class Trend:
    ref: str
    metrics: tuple[str, ...]
    points: tuple[TrendPoint, ...]
    drops: tuple[Drop, ...]

    def series(self, metric: str) -> list[float | None]:
        index = self.metrics.index(metric)
        return [p.values[index] for p in self.points]


def check_metrics(names: Sequence[str]) -> tuple[str, ...]:
    """The metric names, checked against the gate's table (defaults when empty).

    Raises:
        ConfigurationError: an unknown name (the valid ones listed).
    """
    for name in names:
        if find_metric(name) is None:
            raise ConfigurationError(
                f"--metric {name!r} is not a metric; use one of {', '.join(metric_names())}"
            )
    return tuple(dict.fromkeys(names)) or DEFAULT_METRICS


def build_trend(ref: str, tasks: Sequence[tuple[str, str, str, Report]],
                metrics: Sequence[str],
                marks: Sequence[Mapping[str, RowMark]] | None = None) -> Trend:  # fmt: skip
    """The trend of ``tasks`` — ``(task id, label, prompt version, report)`` oldest first;
    ``marks``, one mapping per task in the same order, adds each point's run-to-run agreement."""
    chosen = check_metrics(metrics)
    points: list[TrendPoint] = []
    for index, (task_id, label, prompt, report) in enumerate(tasks):
        task, totals = report.task, report.totals
        values = []
        for name in chosen:
            found = find_metric(name)
            assert found is not None  # checked above
            value = found[0].value(report, found[1])
            values.append(float(value) if value is not None else None)
        scored = totals.scored or 0
        point = TrendPoint(
            task_id=task_id, created_at=task.created_at, label=label,
            rubric=f"{task.rubric_key}@{task.rubric_version}", model=task.model, prompt=prompt,
            rows=totals.rows, values=tuple(values),
            red_flag_rates={f.type: f.count / scored for f in report.red_flags} if scored else {},
            intent_means={i.intent_key: i.mean_score for i in report.intents
                          if i.mean_score is not None},
        )  # fmt: skip
        if points:
            point = _with_changes(points[-1], point)
            if marks is not None:
                point = replace(point, agreement=run_agreement(marks[index - 1], marks[index]))
        points.append(point)
    return Trend(ref, chosen, tuple(points), tuple(_drops(chosen, points)))


def _with_changes(before: TrendPoint, point: TrendPoint) -> TrendPoint:
    changes = [
        f"{what} {old}→{new}"
        for what, old, new in (
            ("rubric", before.rubric, point.rubric),
            ("model", before.model, point.model),
            ("prompt", before.prompt, point.prompt),
        )
        if old != new
    ]
    return replace(point, changes=tuple(changes))


def _drops(metrics: tuple[str, ...], points: list[TrendPoint]) -> list[Drop]:
    out = []
    for index, name in enumerate(metrics):
        found = find_metric(name)
        assert found is not None
        better = found[0].better
        for before, after in pairwise(points):
            old, new = before.values[index], after.values[index]
            if old is None or new is None or better is Better.NEITHER or old == new:
                continue
            if (new < old) == (better is Better.HIGHER):
                out.append(Drop(name, before.task_id, after.task_id, old, new))
    return out
