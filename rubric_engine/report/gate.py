"""CI gate: thresholds on report metrics and the no-regression rule (docs/ci.md).

A threshold is ``METRIC OP NUMBER`` with OP one of ``>= <= == != > <``, e.g. ``passRate>=0.9``
or ``redFlags.BACKEND_EXPOSURE==0``. The metrics are the one table of
:mod:`rubric_engine.report.metrics` (``diff`` reads the same one); a name with ``<…>`` takes a
parameter checked against the task (its rubric's red-flag types, requirement IDs, intent keys)
or a closed enumeration (warning codes, JUDGE_ERROR kinds). An unknown name or parameter is an
error listing the valid ones, never a silent pass; a metric with no value (``meanScore`` with
nothing scored, ``costUsd`` for replayed calls) fails its check. A share (kind ``share``) takes
a limit from 0 to 1. Pure: :func:`evaluate_gate` reads an already built report and diff;
:func:`rubric_engine.report.run.run_gate` is the call that reads them from a store.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.calibration import CalibrationNames, few_pairs_caution
from rubric_engine.report.metrics import METRICS, MetricDef, MetricKind, find_metric, metric_names
from rubric_engine.report.model import Diff, Report

__all__ = [
    "METRICS",
    "GateCheck",
    "GateResult",
    "Threshold",
    "check_complete",
    "check_no_regression",
    "check_parameters",
    "check_threshold",
    "evaluate_gate",
    "metric_names",
    "parse_threshold",
    "slice_fields",
]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_THRESHOLD = re.compile(
    r"^\s*([A-Za-z][\w.]*)\s*(>=|<=|==|!=|>|<)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class Threshold:
    """A parsed ``--threshold``: ``text`` is what the user wrote, trimmed."""

    text: str
    name: str
    metric: MetricDef
    param: str
    op: str
    limit: float


@dataclass(frozen=True)
class GateCheck:
    """One gate check. ``name`` is what JUnit and the terminal show."""

    name: str
    passed: bool
    message: str
    detail: str = ""


@dataclass(frozen=True)
class GateResult:
    """A gate run: the checks in order (``complete`` first unless partial runs are allowed,
    then each threshold as given, then the no-regression checks)."""

    task_id: str
    checks: tuple[GateCheck, ...]

    @property
    def failed(self) -> int:
        return sum(1 for c in self.checks if not c.passed)

    @property
    def passed(self) -> bool:
        return self.failed == 0

    @property
    def suite(self) -> str:
        """The JUnit test-suite name."""
        return f"rubric-eval gate {self.task_id}"


def nearest_metric(name: str) -> str | None:
    """The metric ``name`` was most likely meant to be: the same name in other letter case
    (``passrate``: ``passRate``; ``redflags.X``: ``redFlags.X``), else the closest name."""
    names = metric_names()
    head, dot, rest = name.partition(".")
    for known in names:
        known_head, known_dot, _ = known.partition(".")
        if known_head.lower() == head.lower() and bool(known_dot) == bool(dot):
            if not dot and known != name:
                return known
            if dot and known_head != head:
                return f"{known_head}.{rest}"
    close = difflib.get_close_matches(name, names, n=1)
    return close[0] if close else None


def parse_threshold(text: str) -> Threshold:
    """Parse ``METRIC OP NUMBER``.

    Raises:
        ConfigurationError: not of that form, an unknown metric name (valid names listed), or
            a share's limit outside 0–1.
    """
    found = _THRESHOLD.match(text)
    if found is None:
        raise ConfigurationError(
            f"--threshold {text!r} is not METRIC OP NUMBER (OP one of "
            f"{' '.join(_OPS)}), e.g. 'passRate>=0.9' or 'redFlags.BACKEND_EXPOSURE==0'"
        )
    name, op, limit = found.group(1), found.group(2), float(found.group(3))
    known = find_metric(name)
    if known is None:
        nearest = nearest_metric(name)
        hint = f" (did you mean {nearest}?)" if nearest else ""
        raise ConfigurationError(
            f"--threshold {text!r}: unknown metric {name!r}{hint}; valid metrics: "
            f"{', '.join(metric_names())}"
        )
    metric, param = known
    if metric.kind is MetricKind.SHARE and not 0 <= limit <= 1:
        raise ConfigurationError(
            f"--threshold {text!r}: {name} is a share from 0 to 1 ({metric.description}); "
            f"write e.g. {name}{op}0.9 for 90%"
        )
    return Threshold(f"{name}{op}{found.group(3)}", name, metric, param, op, limit)


def slice_fields(thresholds: Sequence[Threshold]) -> tuple[str, ...]:
    """The ``--by`` slices the thresholds read (``minPassRateBy.scenario`` → ``scenario``), so the
    report can be built with them; unknown fields are refused while slicing, with the valid
    names."""
    return tuple(dict.fromkeys(t.param for t in thresholds if t.metric.name.endswith("By.<FIELD>")))


def check_parameters(thresholds: Sequence[Threshold], report: Report) -> None:
    """Check each parameter against what this task knows.

    Raises:
        ConfigurationError: listing, for every bad parameter, the valid values.
    """
    problems = []
    for t in thresholds:
        if t.metric.choices is None:
            continue
        valid = t.metric.choices(report)
        if valid is not None and t.param not in valid:
            listed = str(valid) if isinstance(valid, CalibrationNames) else ", ".join(valid)
            problems.append(
                f"{t.text}: {t.param!r} is not a valid value for {t.metric.name}; "
                f"valid: {listed or '(none in this task)'}"
            )
    if problems:
        raise ConfigurationError("unknown metric parameter(s):\n  - " + "\n  - ".join(problems))


def check_threshold(threshold: Threshold, report: Report) -> GateCheck:
    """Evaluate one threshold; a metric without a value fails."""
    value = threshold.metric.value(report, threshold.param)
    limit = f"{threshold.limit:g}"
    if value is None:
        why = threshold.metric.why_missing(report) if threshold.metric.why_missing else None
        return GateCheck(
            threshold.text,
            False,
            f"{threshold.text}: no value in this task, so it cannot pass"
            + (f" ({why})" if why else ""),
        )
    ok = _OPS[threshold.op](float(value), threshold.limit)
    shown = f"{value:.6g}" if isinstance(value, float) else str(value)
    holds = "holds" if ok else "fails"
    message = f"{threshold.text} {holds}: {threshold.name} = {shown}, needs {threshold.op} {limit}"
    if threshold.name.startswith("calibration.") and report.calibration is not None:
        # the record read: the newest over every reviewer's labels, whoever calibrated last
        message += f" (calibration {report.calibration.record_id})"
        caution = few_pairs_caution(report, threshold.param)
        if caution:
            message += f"; caution: {caution}"
    return GateCheck(threshold.text, ok, message)


def check_complete(report: Report) -> GateCheck:
    """Every planned row has a result and the task finished: a stopped, interrupted or killed
    run must not pass a gate on the rows it happened to judge."""
    task, rows = report.task, report.totals.rows
    planned, state = task.planned_rows, task.state
    ok = state == "COMPLETED" and rows == planned
    message = f"complete: task {task.id} is {state} with {rows} of {planned} planned row(s)" + (
        "" if ok else "; finish it (`rubric-eval score --resume`) or pass --allow-partial"
    )
    return GateCheck("complete", ok, message)


def check_no_regression(diff: Diff) -> list[GateCheck]:
    """One failing check per REGRESSION item, or one passing ``noRegression`` check."""
    baseline = diff.baseline_task_id
    regressions = [i for i in diff.items if i.type == "REGRESSION"]
    if not regressions:
        return [GateCheck("noRegression", True, f"no regression against task {baseline}")]
    checks = [
        GateCheck(
            f"noRegression: {i.scope}{' ' + i.case_id if i.case_id else ''} {i.metric}",
            False,
            f"regression against task {baseline}: {i.message}",
            f"baseline {i.baseline_value!r}, current {i.current_value!r}, delta {i.delta!r}",
        )
        for i in regressions
    ]
    unlisted = diff.regression_count - len(regressions)
    if unlisted:  # a diff that lists the most important items only (docs/scale.md)
        checks.append(
            GateCheck(
                "noRegression: more",
                False,
                f"{unlisted} more regression(s) against task {baseline}, not listed one by "
                f"one; `rubric-eval diff {baseline} {diff.current_task_id} --out FILE` writes "
                "every item beside FILE",
            )
        )
    return checks


def evaluate_gate(
    report: Report,
    thresholds: Sequence[Threshold],
    *,
    diff: Diff | None = None,
    require_complete: bool = True,
    regression_checks: Sequence[GateCheck] | None = None,
) -> GateResult:
    """All checks of one gate run on an already built report (and diff, for no-regression).

    The report must be built with the thresholds' :func:`slice_fields` and, to decide on exact
    values, with ``exact=True`` (:func:`~rubric_engine.report.aggregate.build_report`).
    ``regression_checks``, when given, replace the strict rule's checks of ``diff``.

    Raises:
        ConfigurationError: a threshold's parameter is not valid for this task (all listed).
    """
    check_parameters(thresholds, report)
    checks = [check_complete(report)] if require_complete else []
    checks += [check_threshold(t, report) for t in thresholds]
    if regression_checks is not None:  # another no-regression rule (report/noise.py)
        checks += regression_checks
    elif diff is not None:
        checks += check_no_regression(diff)
    return GateResult(report.task.id, tuple(checks))
