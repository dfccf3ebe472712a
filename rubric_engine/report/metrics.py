"""The one metric table: every named figure of a report, what it means and which way is better.

``gate`` checks thresholds on these metrics and ``diff`` compares them between two tasks, so
both read this table (docs/reports.md, docs/ci.md). A definition names the metric
(``passRate``; a name with ``<…>`` takes one parameter, e.g. ``compliance.<REQUIREMENT_ID>``),
says what it is, its :class:`MetricKind` and :class:`Better` direction, and reads its value from
a typed :class:`~rubric_engine.report.model.Report`. A value is ``None`` when the report has
none (``meanScore`` with nothing scored, ``costUsd`` for replayed calls, an unknown parameter).

To add a metric, add one :class:`MetricDef` to :data:`METRICS`; gate, diff, ``metric_table``
and the README check pick it up. ``calibration.<METRIC>`` reads the calibration section the edge
attaches to the report (:mod:`rubric_engine.report.calibration`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from rubric_engine.report.calibration import (
    calibration_choices,
    calibration_value,
    why_no_calibration_value,
)
from rubric_engine.report.model import IntentSummary, PanelSection, Report, SliceGroup
from rubric_engine.report.outcome import EXACT
from rubric_engine.results.model import JudgeErrorKind, WarningCode

Value = int | float | None
Reader = Callable[[Report, str], Value]


class MetricKind(StrEnum):
    """What a metric's number is."""

    #: a share from 0 to 1 (thresholds must be written 0.9, not 90)
    SHARE = "share"
    #: a count of rows, flags, warnings, calls or tokens
    COUNT = "count"
    #: a score on the pack's scale
    SCORE = "score"
    #: a measured amount with a unit (ms, USD, tool calls per row)
    QUANTITY = "quantity"
    #: a judge-calibration figure: an agreement statistic (κ, MCC, α from −1 to 1), a rate or
    #: one of its 95% bounds (0 to 1), a count or a score error; no range is enforced
    STATISTIC = "statistic"


class Better(StrEnum):
    """Which change is an improvement."""

    HIGHER = "higher"
    LOWER = "lower"
    #: neither: a change is for a person to judge (``rows``)
    NEITHER = "neither"


@dataclass(frozen=True)
class MetricDef:
    """One metric.

    Attributes:
        name: the name thresholds use; at most one ``<PARAM>`` placeholder.
        description: one line for the README, ``--help`` and error messages.
        read: the value in a report for a parameter (``""`` without one).
        choices: the valid parameters for a report, or ``None`` when any value is checked
            elsewhere (a slice field is checked while slicing); a function returning ``None``
            means the report cannot tell (no current calibration: the check fails and says
            why).
        label: the phrase a diff message uses, ``{param}`` replaced.
        in_diff: ``diff`` compares it (an aggregate comparison of docs/reports.md).
        credits_improvement: a change the better way is an IMPROVEMENT; ``False`` for cost
            signals (fewer tool calls may mean a skipped step), where it is only CHANGED.
        unit: the unit of a QUANTITY.
        param: the regex the parameter matches (one dotted segment unless said otherwise).
        why_missing: why the report has no value for it, when it can say (the check's
            message adds it).
    """

    name: str
    description: str
    kind: MetricKind
    better: Better
    read: Reader
    choices: Callable[[Report], list[str] | None] | None = None
    label: str = ""
    in_diff: bool = False
    credits_improvement: bool = True
    unit: str | None = None
    param: str = r"[^.]+"
    why_missing: Callable[[Report], str | None] | None = None

    def pattern(self) -> re.Pattern[str]:
        """The regex a concrete name matches; group 1 is the parameter."""
        return re.compile(
            "^" + re.sub(r"<[A-Z_]+>", lambda _: f"({self.param})", re.escape(self.name)) + "$"
        )

    @property
    def takes_param(self) -> bool:
        return "<" in self.name

    def concrete(self, param: str = "") -> str:
        """The name with its placeholder replaced (``compliance.<REQUIREMENT_ID>`` →
        ``compliance.X``)."""
        return re.sub(r"<[A-Z_]+>", lambda _: param, self.name)

    def value(self, report: Report, param: str = "") -> Value:
        return self.read(report, param)


@dataclass(frozen=True)
class MetricValue:
    """One row of :func:`metric_table`: a concrete metric and its value in one report."""

    name: str
    param: str
    definition: MetricDef
    value: Value


def _totals(read: Callable[[Report], Value]) -> Reader:
    return lambda report, _: read(report)


def _why_no_stability(report: Report) -> str | None:
    """Why a ``stability.*`` metric has no value: the task asked the judge once per row."""
    if report.stability is not None:
        return None
    return (
        f"no row of task {report.task.id} has samples to compare: it was scored without "
        "--samples, each row asked once (docs/stability.md); score it again with --samples K "
        "(K >= 2, e.g. --samples 3) to gate on stability.*"
    )


def _why_no_panel(report: Report) -> str | None:
    """Why a ``panel.*`` metric has no value: the task was judged by one judge."""
    if report.panel is not None or report.task.judges:
        return None
    return (
        f"task {report.task.id} was judged by one judge (docs/panels.md): score it again with "
        "--judge MODEL given once per judge to gate on panel.*"
    )


def _lowest_kappa(panel: PanelSection) -> float | None:
    """The lowest defined Cohen's κ between two judges of a panel."""
    kappas = [p.kappa for p in panel.pairs if p.kappa is not None]
    return min(kappas) if kappas else None


def _share(num: Callable[[Report], int], den: Callable[[Report], int]) -> Reader:
    # a share derived here is exact: a gate decides on it (the report's own are as built)
    return lambda report, _: EXACT.ratio(num(report), den(report))


def _red_flag_rows(report: Report, flag: str) -> int:
    """Rows with the type; 0 for a type the report does not list (no row had it)."""
    return next((f.count for f in report.red_flags if f.type == flag), 0)


def _compliance(report: Report, rid: str) -> Value:
    return next((r.compliance for r in report.requirements if r.id == rid), None)


def _intent(read: Callable[[IntentSummary], Value]) -> Reader:
    def value(report: Report, key: str) -> Value:
        return next((read(i) for i in report.intents if i.intent_key == key), None)

    return value


def _worst_group(read: Callable[[SliceGroup], float | None]) -> Reader:
    """Lowest value over the groups of the slice named by the parameter; groups without a value
    (nothing scored) are left out; ``None`` when the report has no such slice."""

    def value(report: Report, by: str) -> Value:
        cut = next((c for c in report.slices or () if c.by == by), None)
        values = [v for g in (cut.groups if cut else ()) if (v := read(g)) is not None]
        return min(values) if values else None

    return value


def _intent_keys(report: Report) -> list[str]:
    return [i.intent_key for i in report.intents]


S, C, SC, Q = MetricKind.SHARE, MetricKind.COUNT, MetricKind.SCORE, MetricKind.QUANTITY
HI, LO, NONE = Better.HIGHER, Better.LOWER, Better.NEITHER

#: Every metric, in the order the README and error messages list them (and diff items appear).
METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        "passRate",
        "passed / scored rows, 0–1 (the pass rule: docs/reports.md)",
        S,
        HI,
        _totals(lambda r: r.totals.pass_rate),
        label="pass rate",
        in_diff=True,
    ),
    MetricDef(
        "passedRows",
        "rows with no red flag and final score ≥ passScore",
        C,
        HI,
        _totals(lambda r: r.totals.passed_rows),
    ),
    MetricDef(
        "meanScore",
        "mean final score of scored rows",
        SC,
        HI,
        _totals(lambda r: r.totals.mean_score),
        label="mean final score",
        in_diff=True,
    ),
    MetricDef(
        "meanJudgeScore",
        "mean judge score before caps",
        SC,
        HI,
        _totals(lambda r: r.totals.mean_judge_score),
    ),
    MetricDef("rows", "rows in the task", C, NONE, _totals(lambda r: r.totals.rows)),
    MetricDef("scored", "SCORED rows", C, NONE, _totals(lambda r: r.totals.scored)),
    MetricDef(
        "judgeErrors",
        "JUDGE_ERROR rows",
        C,
        LO,
        _totals(lambda r: r.totals.judge_errors),
        label="JUDGE_ERROR rows",
        in_diff=True,
    ),
    MetricDef(
        "judgeErrorRate",
        "JUDGE_ERROR rows / rows, 0–1",
        S,
        LO,
        _share(lambda r: r.totals.judge_errors, lambda r: r.totals.rows),
    ),
    MetricDef(
        "judgeErrors.<KIND>",
        "JUDGE_ERROR rows of one kind",
        C,
        LO,
        lambda r, kind: r.totals.judge_errors_by_kind.get(kind, 0),
        lambda _: [str(k) for k in JudgeErrorKind],
    ),
    MetricDef(
        "cappedRows",
        "rows whose score a violationScore capped",
        C,
        LO,
        _totals(lambda r: r.totals.capped_rows),
    ),
    MetricDef(
        "rowsWithRedFlags",
        "scored rows with any red flag",
        C,
        LO,
        _totals(lambda r: r.totals.rows_with_red_flags),
    ),
    MetricDef(
        "redFlagRate",
        "rows with red flags / scored, 0–1",
        S,
        LO,
        _share(lambda r: r.totals.rows_with_red_flags, lambda r: r.totals.scored),
    ),
    MetricDef(
        "redFlags.total",
        "red flags over all rows (a row may carry several)",
        C,
        LO,
        _totals(lambda r: sum(f.count for f in r.red_flags)),
    ),
    MetricDef(
        "redFlags.<TYPE>",
        "rows with this red-flag type",
        C,
        LO,
        _red_flag_rows,
        lambda r: [f.type for f in r.red_flags],
        label="rows with red flag {param}",
        in_diff=True,
    ),
    MetricDef(
        "compliance.<REQUIREMENT_ID>",
        "followed / (followed + partial + violated), 0–1",
        S,
        HI,
        _compliance,
        lambda r: [q.id for q in r.requirements],
        label="compliance of {param}",
        in_diff=True,
    ),
    MetricDef(
        "intents.<INTENT_KEY>.meanScore",
        "mean final score of the intent's rows",
        SC,
        HI,
        _intent(lambda i: i.mean_score),
        _intent_keys,
        label="mean score of intent {param}",
        in_diff=True,
    ),
    MetricDef(
        "intents.<INTENT_KEY>.passRate",
        "pass rate of the intent's rows, 0–1",
        S,
        HI,
        _intent(lambda i: i.pass_rate),
        _intent_keys,
    ),
    MetricDef(
        "intents.<INTENT_KEY>.redFlags",
        "red flags in the intent's rows",
        C,
        LO,
        _intent(lambda i: i.red_flag_count),
        _intent_keys,
    ),
    MetricDef(
        "warnings.total",
        "protocol warnings over all rows",
        C,
        LO,
        _totals(lambda r: sum(r.warnings.values())),
    ),
    MetricDef(
        "warnings.<CODE>",
        "protocol warnings of one code",
        C,
        LO,
        lambda r, code: r.warnings.get(code, 0),
        lambda _: [str(c) for c in WarningCode],
    ),
    MetricDef(
        "minPassRateBy.<FIELD>",
        "lowest pass rate over the groups of a slice (intent, category or a row metadata "
        "field): every slice must pass",
        S,
        HI,
        _worst_group(lambda g: g.pass_rate),
    ),
    MetricDef(
        "minMeanScoreBy.<FIELD>",
        "lowest mean final score over the groups of a slice",
        SC,
        HI,
        _worst_group(lambda g: g.mean_score),
    ),
    MetricDef(
        "minComplianceBy.<FIELD>",
        "lowest overall compliance over the groups of a slice",
        S,
        HI,
        _worst_group(lambda g: g.compliance),
    ),
    MetricDef(
        "router.macroF1",
        "routing macro F1 over the expected classes, 0–1 (rows with metadata.expectedRoute)",
        S,
        HI,
        _totals(lambda r: r.router.macro_f1 if r.router else None),
    ),
    MetricDef(
        "router.recall.<CLASS>",
        "routing recall of one expected class, 0–1",
        S,
        HI,
        lambda r, c: (
            next((k.recall for k in r.router.classes if k.label == c), None) if r.router else None
        ),
        lambda r: [k.label for k in r.router.classes] if r.router else [],
    ),
    MetricDef(
        "stability.unstableRate",
        "sampled rows whose samples disagreed / sampled rows scored, 0–1 (score --samples)",
        S,
        LO,
        _totals(lambda r: r.stability.unstable_rate if r.stability else None),
        why_missing=_why_no_stability,
    ),
    MetricDef(
        "stability.flipRate",
        "requirement statuses that flipped between samples / statuses voted on, 0–1",
        S,
        LO,
        _totals(lambda r: r.stability.flip_rate if r.stability else None),
        why_missing=_why_no_stability,
    ),
    MetricDef(
        "stability.kappa",
        "Fleiss' kappa of the requirement statuses across samples (-1 to 1)",
        MetricKind.STATISTIC,
        HI,
        _totals(lambda r: r.stability.kappa if r.stability else None),
        why_missing=_why_no_stability,
    ),
    MetricDef(
        "stability.redFlagSplits",
        "sampled rows where a red flag some samples raised was outvoted",
        C,
        LO,
        _totals(lambda r: r.stability.red_flag_splits if r.stability else None),
        why_missing=_why_no_stability,
    ),
    MetricDef(
        "panel.agreement",
        "requirement statuses every judge of a panel gave alike / statuses all judged, 0–1",
        S,
        HI,
        _totals(lambda r: r.panel.agreement if r.panel else None),
        why_missing=_why_no_panel,
    ),
    MetricDef(
        "panel.kappa",
        "the lowest Cohen's kappa between two judges of a panel (-1 to 1)",
        MetricKind.STATISTIC,
        HI,
        _totals(lambda r: _lowest_kappa(r.panel) if r.panel else None),
        why_missing=_why_no_panel,
    ),
    MetricDef(
        "toolCallsMean",
        "agent tool calls per row",
        Q,
        LO,
        _totals(lambda r: r.agent.tool_calls_mean),
        label="mean tool calls per row",
        in_diff=True,
        credits_improvement=False,
        unit="tool calls per row",
    ),
    MetricDef(
        "durationMsMean",
        "agent duration per row (ms; rows whose trace records it)",
        Q,
        LO,
        _totals(lambda r: r.agent.duration_ms_mean),
        label="mean agent duration (ms)",
        in_diff=True,
        credits_improvement=False,
        unit="ms",
    ),
    MetricDef(
        "costUsd",
        "judge cost (USD), when known",
        Q,
        LO,
        _totals(lambda r: r.usage.cost_usd),
        unit="USD",
    ),
    MetricDef(
        "promptTokens", "judge prompt tokens", C, LO, _totals(lambda r: r.usage.prompt_tokens)
    ),
    MetricDef(
        "completionTokens",
        "judge completion tokens",
        C,
        LO,
        _totals(lambda r: r.usage.completion_tokens),
    ),
    MetricDef(
        "totalTokens",
        "judge prompt + completion tokens",
        C,
        LO,
        _totals(lambda r: r.usage.prompt_tokens + r.usage.completion_tokens),
    ),
    MetricDef(
        "latencyMsMean",
        "judge latency per row (ms)",
        Q,
        LO,
        _totals(lambda r: r.usage.latency_ms_mean),
        unit="ms",
    ),
    MetricDef(
        "latencyMsP95",
        "judge latency p95 (ms)",
        Q,
        LO,
        _totals(lambda r: r.usage.latency_ms_p95),
        unit="ms",
    ),
    MetricDef(
        "calibration.<METRIC>",
        "judge agreement with human labels from the calibration over every reviewer's labels "
        "pinned to this task's rubric, prompt, model and parameters, e.g. calibration.kappa, "
        "calibration.redFlagRecall.lower95, calibration.requirements.<ID>.recallUnmet.lower95, "
        "calibration.altTest.passed (docs/calibration.md); a stale or missing calibration fails",
        MetricKind.STATISTIC,
        NONE,  # κ and recall are better higher, RMSE and the omission rate lower
        lambda r, name: calibration_value(r, name),
        calibration_choices,
        param=r".+",
        why_missing=why_no_calibration_value,
    ),
)


def metric_names() -> list[str]:
    """Every metric name, placeholders included, in :data:`METRICS` order."""
    return [m.name for m in METRICS]


def find_metric(name: str) -> tuple[MetricDef, str] | None:
    """The definition a concrete name (``compliance.X``) refers to and its parameter, or
    ``None`` for an unknown name. Parameters are not checked here (see ``choices``)."""
    for metric in METRICS:
        matched = metric.pattern().match(name)
        if matched:
            return metric, matched.group(1) if matched.groups() else ""
    return None


def params(metric: MetricDef, report: Report) -> list[str]:
    """The parameters the metric takes in this report: ``[""]`` without a placeholder, the
    report's slices for ``…By.<FIELD>``, else ``choices`` (none when it cannot tell)."""
    if not metric.takes_param:
        return [""]
    if metric.choices is None:
        return [c.by for c in report.slices or ()]
    return metric.choices(report) or []


def metric_table(report: Report) -> list[MetricValue]:
    """Every metric of this report with every parameter it takes, in :data:`METRICS` order."""
    return [
        MetricValue(metric.concrete(param), param, metric, metric.value(report, param))
        for metric in METRICS
        for param in params(metric, report)
    ]
