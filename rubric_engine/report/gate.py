"""CI gate: thresholds on report metrics and the no-regression rule (SPEC §9; seed 004 C.2, C.9).

A threshold is ``METRIC OP NUMBER`` with OP one of ``>= <= == != > <``, e.g. ``passRate>=0.9``
or ``redFlags.BACKEND_EXPOSURE==0``. :data:`METRICS` is the one list of metric names; a name
with ``<…>`` takes a parameter checked against the task (its rubric's red-flag types,
requirement IDs, intent keys) or a closed enumeration (warning codes, JUDGE_ERROR kinds). An
unknown name or parameter is an error listing the valid ones, never a silent pass; a metric
with no value (``meanScore`` with nothing scored, ``costUsd`` for replayed calls) fails its
check. Pure: checks read an already built report and diff.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.outcome import ratio
from rubric_engine.results import JudgeErrorKind, WarningCode

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
Reader = Callable[[dict[str, Any], str], Any]


def _totals(key: str) -> Reader:
    return lambda report, _: report["totals"][key]


def _share(num: str, den: str) -> Reader:
    def read(report: dict[str, Any], _: str) -> float | None:
        totals = report["totals"]
        return ratio(totals[num], totals[den])

    return read


def _red_flags(report: dict[str, Any], flag: str) -> int:
    return next((f["count"] for f in report["redFlags"] if f["type"] == flag), 0)


def _compliance(report: dict[str, Any], rid: str) -> float | None:
    value: float | None = next(r["compliance"] for r in report["requirements"] if r["id"] == rid)
    return value


def _intent(field: str) -> Reader:
    return lambda report, key: next(i[field] for i in report["intents"] if i["intentKey"] == key)


def _worst_group(field: str) -> Reader:
    """Lowest value of ``field`` over the groups of the slice named by the parameter; groups
    without a value (nothing scored) are left out."""

    def read(report: dict[str, Any], by: str) -> float | None:
        cut = next(c for c in report.get("slices", ()) if c["by"] == by)
        values = [g[field] for g in cut["groups"] if g[field] is not None]
        return min(values) if values else None

    return read


@dataclass(frozen=True)
class Metric:
    """One gate metric. ``name`` may hold one ``<PARAM>`` placeholder; ``param`` is the
    pattern it matches (one dotted segment unless said otherwise). ``choices`` returning
    ``None`` means the valid values are unknown here (the check explains itself);
    ``why_missing`` says why the metric has no value, when it can."""

    name: str
    description: str
    read: Reader
    choices: Callable[[dict[str, Any]], list[str] | None] | None = None
    param: str = r"[^.]+"
    why_missing: Callable[[dict[str, Any]], str | None] | None = None

    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"<[A-Z_]+>", f"({self.param})", re.escape(self.name)) + "$")


def _calibration(report: dict[str, Any], name: str) -> float | None:
    """A calibration metric, from the block the gate adds (``calibration_block``)."""
    value: float | None = (
        report.get("calibration", {}).get("metrics", {}).get(f"calibration.{name}")
    )
    return value


def _calibration_choices(report: dict[str, Any]) -> list[str] | None:
    block = report.get("calibration", {})
    if block.get("state") != "current":
        return None  # stale or missing: every such check fails and says why
    return sorted(m.removeprefix("calibration.") for m in block["metrics"])


def _calibration_missing(report: dict[str, Any]) -> str | None:
    block = report.get("calibration")
    if not block:
        return None
    if block["state"] != "current":
        return f"calibration is {block['state']}: {block['reason']}"
    return f"the calibration ({block['recordId']}) has no such figure (undefined or never measured)"


#: Every gate metric, in the order the README and error messages list them.
METRICS: tuple[Metric, ...] = (
    Metric("passRate", "passed / scored rows, 0–1 (see report/outcome.py)", _totals("passRate")),
    Metric(
        "passedRows", "rows with no red flag and final score ≥ passScore", _totals("passedRows")
    ),
    Metric("meanScore", "mean final score of scored rows", _totals("meanScore")),
    Metric("meanJudgeScore", "mean judge score before caps", _totals("meanJudgeScore")),
    Metric("rows", "rows in the task", _totals("rows")),
    Metric("scored", "SCORED rows", _totals("scored")),
    Metric("judgeErrors", "JUDGE_ERROR rows", _totals("judgeErrors")),
    Metric("judgeErrorRate", "JUDGE_ERROR rows / rows, 0–1", _share("judgeErrors", "rows")),
    Metric(
        "judgeErrors.<KIND>",
        "JUDGE_ERROR rows of one kind",
        lambda r, kind: r["totals"]["judgeErrorsByKind"].get(kind, 0),
        lambda _: [str(k) for k in JudgeErrorKind],
    ),
    Metric("cappedRows", "rows whose score a violationScore capped", _totals("cappedRows")),
    Metric("rowsWithRedFlags", "scored rows with any red flag", _totals("rowsWithRedFlags")),
    Metric(
        "redFlagRate", "rows with red flags / scored, 0–1", _share("rowsWithRedFlags", "scored")
    ),
    Metric(
        "redFlags.total",
        "red flags over all rows (a row may carry several)",
        lambda r, _: sum(f["count"] for f in r["redFlags"]),
    ),
    Metric(
        "redFlags.<TYPE>",
        "rows with this red-flag type",
        _red_flags,
        lambda r: [f["type"] for f in r["redFlags"]],
    ),
    Metric(
        "compliance.<REQUIREMENT_ID>",
        "followed / (followed + partial + violated), 0–1",
        _compliance,
        lambda r: [q["id"] for q in r["requirements"]],
    ),
    Metric(
        "intents.<INTENT_KEY>.meanScore",
        "mean final score of the intent's rows",
        _intent("meanScore"),
        lambda r: [i["intentKey"] for i in r["intents"]],
    ),
    Metric(
        "intents.<INTENT_KEY>.passRate",
        "pass rate of the intent's rows, 0–1",
        _intent("passRate"),
        lambda r: [i["intentKey"] for i in r["intents"]],
    ),
    Metric(
        "intents.<INTENT_KEY>.redFlags",
        "red flags in the intent's rows",
        _intent("redFlagCount"),
        lambda r: [i["intentKey"] for i in r["intents"]],
    ),
    Metric(
        "warnings.total",
        "protocol warnings over all rows",
        lambda r, _: sum(r["warnings"].values()),
    ),
    Metric(
        "warnings.<CODE>",
        "protocol warnings of one code",
        lambda r, code: r["warnings"].get(code, 0),
        lambda _: [str(c) for c in WarningCode],
    ),
    Metric(
        "minPassRateBy.<FIELD>",
        "lowest pass rate over the groups of a slice (intent, category or a row metadata "
        "field): every slice must pass (seed 004 C.9)",
        _worst_group("passRate"),
    ),
    Metric(
        "minMeanScoreBy.<FIELD>",
        "lowest mean final score over the groups of a slice",
        _worst_group("meanScore"),
    ),
    Metric(
        "minComplianceBy.<FIELD>",
        "lowest overall compliance over the groups of a slice",
        _worst_group("compliance"),
    ),
    Metric("toolCallsMean", "agent tool calls per row", lambda r, _: r["agent"]["toolCallsMean"]),
    Metric(
        "durationMsMean",
        "agent duration per row (ms; rows whose trace records it)",
        lambda r, _: r["agent"]["durationMsMean"],
    ),
    Metric("costUsd", "judge cost (USD), when known", lambda r, _: r["usage"]["costUsd"]),
    Metric("promptTokens", "judge prompt tokens", lambda r, _: r["usage"]["promptTokens"]),
    Metric(
        "completionTokens", "judge completion tokens", lambda r, _: r["usage"]["completionTokens"]
    ),
    Metric(
        "totalTokens",
        "judge prompt + completion tokens",
        lambda r, _: r["usage"]["promptTokens"] + r["usage"]["completionTokens"],
    ),
    Metric("latencyMsMean", "judge latency per row (ms)", lambda r, _: r["usage"]["latencyMsMean"]),
    Metric("latencyMsP95", "judge latency p95 (ms)", lambda r, _: r["usage"]["latencyMsP95"]),
    Metric(
        "calibration.<METRIC>",
        "judge agreement with human labels from the calibration pinned to this task's rubric, "
        "prompt, model and parameters, e.g. calibration.kappa, calibration.redFlagRecall.lower95, "
        "calibration.requirements.<ID>.recallUnmet.lower95 (docs/calibration.md); a stale or "
        "missing calibration fails",
        _calibration,
        _calibration_choices,
        param=r".+",
        why_missing=_calibration_missing,
    ),
)


def metric_names() -> list[str]:
    """Every metric name, placeholders included, in :data:`METRICS` order."""
    return [m.name for m in METRICS]


@dataclass(frozen=True)
class Threshold:
    """A parsed ``--threshold``: ``text`` is what the user wrote, trimmed."""

    text: str
    name: str
    metric: Metric
    param: str
    op: str
    limit: float


@dataclass(frozen=True)
class CheckResult:
    """One gate check. ``name`` is what JUnit and the terminal show."""

    name: str
    passed: bool
    message: str
    detail: str = ""


def parse_threshold(text: str) -> Threshold:
    """Parse ``METRIC OP NUMBER``.

    Raises:
        ConfigurationError: not of that form, or an unknown metric name (valid names listed).
    """
    found = _THRESHOLD.match(text)
    if found is None:
        raise ConfigurationError(
            f"--threshold {text!r} is not METRIC OP NUMBER (OP one of "
            f"{' '.join(_OPS)}), e.g. 'passRate>=0.9' or 'redFlags.BACKEND_EXPOSURE==0'"
        )
    name, op, limit = found.group(1), found.group(2), float(found.group(3))
    for metric in METRICS:
        matched = metric.pattern().match(name)
        if matched:
            param = matched.group(1) if matched.groups() else ""
            if "0–1" in metric.description and not 0 <= limit <= 1:
                raise ConfigurationError(
                    f"--threshold {text!r}: {name} is a share from 0 to 1 ({metric.description}); "
                    f"write e.g. {name}{op}0.9 for 90%"
                )
            return Threshold(f"{name}{op}{found.group(3)}", name, metric, param, op, limit)
    raise ConfigurationError(
        f"--threshold {text!r}: unknown metric {name!r}; valid metrics: {', '.join(metric_names())}"
    )


def slice_fields(thresholds: list[Threshold]) -> tuple[str, ...]:
    """The ``--by`` slices the thresholds read (``minPassRateBy.scenario`` → ``scenario``), so the
    report can be built with them; unknown fields are refused while slicing, with the valid
    names."""
    return tuple(dict.fromkeys(t.param for t in thresholds if t.metric.name.endswith("By.<FIELD>")))


def check_parameters(thresholds: list[Threshold], report: dict[str, Any]) -> None:
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
            problems.append(
                f"{t.text}: {t.param!r} is not a valid value for {t.metric.name}; "
                f"valid: {', '.join(valid) or '(none in this task)'}"
            )
    if problems:
        raise ConfigurationError("unknown metric parameter(s):\n  - " + "\n  - ".join(problems))


def check_threshold(threshold: Threshold, report: dict[str, Any]) -> CheckResult:
    """Evaluate one threshold; a metric without a value fails."""
    value = threshold.metric.read(report, threshold.param)
    limit = f"{threshold.limit:g}"
    if value is None:
        why = threshold.metric.why_missing(report) if threshold.metric.why_missing else None
        return CheckResult(
            threshold.text,
            False,
            f"{threshold.text}: no value in this task, so it cannot pass"
            + (f" ({why})" if why else ""),
        )
    ok = _OPS[threshold.op](float(value), threshold.limit)
    shown = f"{value:.6g}" if isinstance(value, float) else str(value)
    verdict = "holds" if ok else "fails"
    message = (
        f"{threshold.text} {verdict}: {threshold.name} = {shown}, needs {threshold.op} {limit}"
    )
    return CheckResult(threshold.text, ok, message)


def check_complete(report: dict[str, Any]) -> CheckResult:
    """Every planned row has a result and the task finished: a stopped, interrupted or killed
    run must not pass a gate on the rows it happened to judge."""
    task, rows = report["task"], report["totals"]["rows"]
    planned, state = task.get("plannedRows"), task.get("state")
    ok = state == "COMPLETED" and rows == planned
    message = f"complete: task {task['id']} is {state} with {rows} of {planned} planned row(s)" + (
        "" if ok else "; finish it (`rubric-eval score --resume`) or pass --allow-partial"
    )
    return CheckResult("complete", ok, message)


def check_no_regression(diff: dict[str, Any]) -> list[CheckResult]:
    """One failing check per REGRESSION item, or one passing ``noRegression`` check."""
    baseline = diff["baselineTaskId"]
    regressions = [i for i in diff["items"] if i["type"] == "REGRESSION"]
    if not regressions:
        return [CheckResult("noRegression", True, f"no regression against task {baseline}")]
    return [
        CheckResult(
            f"noRegression: {i['scope']}{' ' + i['caseId'] if i['caseId'] else ''} {i['metric']}",
            False,
            f"regression against task {baseline}: {i['message']}",
            f"baseline {i['baselineValue']!r}, current {i['currentValue']!r}, delta {i['delta']!r}",
        )
        for i in regressions
    ]
