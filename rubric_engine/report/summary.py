"""What ``score --json``, ``gate --json`` and ``ci --json`` print: one JSON object each.

A CI script reads these instead of scraping the printed table (which wraps at 80 columns when
piped). Each is a pydantic model, so its JSON Schema is generated, not written by hand
(``docs/json-output.md`` holds the schemas; a test keeps them in step). Keys are camelCase,
like ``report.json``. Every summary carries ``exitCode`` — the code the command exits with —
and ``exitMeaning``, its line of :class:`~rubric_engine.errors.ExitCode`; a command that fails
before it has a result prints the same shape with ``error`` set and the rest empty. Pure.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from rubric_engine.errors import exit_meaning
from rubric_engine.report.gate import GateCheck, GateResult
from rubric_engine.report.metrics import find_metric
from rubric_engine.report.model import Report

#: the figures ``score --json`` lists under ``metrics`` (names of docs/metrics in the gate's
#: table, :mod:`rubric_engine.report.metrics`), ``null`` when the task has none
KEY_METRICS = (
    "meanScore",
    "meanJudgeScore",
    "passRate",
    "redFlagRate",
    "judgeErrorRate",
    "cappedRows",
    "costUsd",
    "totalTokens",
)


class _Summary(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_json(self) -> str:
        """One line of JSON, camelCase keys, non-ASCII kept."""
        return self.model_dump_json(by_alias=True)


class RowCounts(_Summary):
    """Rows of the task by status; ``planned`` is how many the input held."""

    planned: int
    total: int
    scored: int
    judge_errors: int
    checked: int
    passed: int


class ReportPaths(_Summary):
    """The report files written (paths as given to ``--out``)."""

    json_: str | None = None
    markdown: str | None = None
    html: str | None = None
    rows: str | None = None

    model_config = ConfigDict(
        alias_generator=lambda name: "json" if name == "json_" else to_camel(name),
        populate_by_name=True,
        frozen=True,
    )


class ScoreSummary(_Summary):
    """``rubric-eval score --json``."""

    task_id: str | None
    state: str | None
    exit_code: int
    exit_meaning: str
    rubric: str | None = None
    model: str | None = None
    judge_mode: str | None = None
    rows: RowCounts | None = None
    #: :data:`KEY_METRICS` by name; ``null`` where the task has no value
    metrics: dict[str, float | int | None] = {}
    #: red-flag type → rows carrying it
    red_flags: dict[str, int] = {}
    #: protocol warning code → count (the report's ``warnings``)
    warnings: dict[str, int] = {}
    reports: ReportPaths | None = None
    #: what stderr said besides the summary (cassette misses, a budget stop, a dropped
    #: parameter), one sentence each
    notes: list[str] = []
    #: why the command failed before it had a result (exit 2, 3 …), else ``null``
    error: str | None = None


class CheckSummary(_Summary):
    """One gate or checklist check."""

    name: str
    passed: bool
    message: str
    figure: str | None = None
    threshold: str | None = None


class GateSummary(_Summary):
    """``rubric-eval gate --json``."""

    task_id: str | None
    passed: bool
    exit_code: int
    exit_meaning: str
    checks: list[CheckSummary] = []
    failed: int = 0
    junit: str | None = None
    error: str | None = None


class DatasetSummary(_Summary):
    """One dataset of a ``ci`` run and the task that scored it."""

    name: str
    task_id: str


class CiSummary(_Summary):
    """``rubric-eval ci --json``."""

    suite: str | None
    passed: bool
    exit_code: int
    exit_meaning: str
    datasets: list[DatasetSummary] = []
    checks: list[CheckSummary] = []
    failed: int = 0
    #: the ``noRegression`` checks that failed (also in ``checks``)
    regressions: list[CheckSummary] = []
    junit: str | None = None
    error: str | None = None


def key_metrics(report: Report) -> dict[str, float | int | None]:
    """:data:`KEY_METRICS` of ``report`` by name (``None`` where it has no value); scores and
    rates to 4 places, as the report shows them (a share worked out here, such as the red-flag
    rate, would otherwise print all its digits beside the report's rounded ones); dollars keep
    every digit."""
    out: dict[str, float | int | None] = {}
    for name in KEY_METRICS:
        found = find_metric(name)
        value = found[0].value(report, found[1]) if found else None
        if isinstance(value, float) and name != "costUsd":
            value = round(value, 4)
        out[name] = value
    return out


def score_summary(
    report: Report,
    exit_code: int,
    files: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> ScoreSummary:
    """The summary of a finished ``score`` run from its report."""
    task, totals = report.task, report.totals
    return ScoreSummary(
        task_id=task.id,
        state=task.state,
        exit_code=exit_code,
        exit_meaning=exit_meaning(exit_code),
        rubric=f"{task.rubric_key}@{task.rubric_version}",
        model=task.model,
        judge_mode=task.judge_mode,
        rows=RowCounts(
            planned=task.planned_rows,
            total=totals.rows,
            scored=totals.scored,
            judge_errors=totals.judge_errors,
            checked=totals.checked or 0,
            passed=totals.passed_rows,
        ),
        metrics=key_metrics(report),
        red_flags={flag.type: flag.count for flag in report.red_flags},
        warnings=dict(report.warnings),
        reports=ReportPaths(**(files or {})),
        notes=list(notes or ()),
    )


def failed_summary(model: type[_Summary], exit_code: int, error: str, **known: Any) -> Any:
    """The summary a command prints when it failed before it had a result."""
    fields: dict[str, Any] = {"exit_code": exit_code, "exit_meaning": exit_meaning(exit_code)}
    fields["error"] = error
    for name, info in model.model_fields.items():
        if name not in fields and info.is_required():
            fields[name] = known.get(name, False if info.annotation is bool else None)
    return model(**fields)


def gate_summary(result: GateResult, exit_code: int, junit: str | None = None) -> GateSummary:
    """The summary of a ``gate`` run."""
    return GateSummary(
        task_id=result.task_id,
        passed=result.passed,
        exit_code=exit_code,
        exit_meaning=exit_meaning(exit_code),
        checks=[_check(c) for c in result.checks],
        failed=result.failed,
        junit=junit,
    )


def _check(check: GateCheck) -> CheckSummary:
    return CheckSummary(name=check.name, passed=check.passed, message=check.message)


def ci_summary(
    suite: str, tasks: dict[str, str], lines: list[Any], exit_code: int, junit: str | None
) -> CiSummary:
    """The summary of a ``ci`` run (``lines``: the checklist's
    :class:`~rubric_engine.suite.checklist.CheckLine` values, in order)."""
    checks = [
        CheckSummary(name=x.name, passed=x.passed, message=x.message, figure=x.figure,
                     threshold=x.threshold)
        for x in lines
    ]  # fmt: skip
    regressions = [c for c, x in zip(checks, lines, strict=True)
                   if not x.passed and x.item == "noRegression"]  # fmt: skip
    return CiSummary(
        suite=suite,
        passed=all(c.passed for c in checks),
        exit_code=exit_code,
        exit_meaning=exit_meaning(exit_code),
        datasets=[DatasetSummary(name=n, task_id=t) for n, t in tasks.items()],
        checks=checks,
        failed=sum(1 for c in checks if not c.passed),
        regressions=regressions,
        junit=junit,
    )
