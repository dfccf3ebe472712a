"""The report's calibration section and the gate's ``calibration.*`` readers
(docs/calibration.md). Pure: the store read is the edge's
(:func:`rubric_engine.report.stored.task_calibration`), which hands the state, reason and flat
metrics of :func:`rubric_engine.calibration.record.calibration_metrics` to
:func:`calibration_section`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rubric_engine.calibration.correction import MIN_PAIRS
from rubric_engine.calibration.metrics import ALT_TEST_FIGURES, BINARY_METRICS
from rubric_engine.report.model import CalibrationFigure, CalibrationSection, Report

__all__ = [
    "SECTION_FIGURES",
    "calibration_choices",
    "calibration_section",
    "calibration_value",
    "shown_calibration",
    "why_no_calibration_value",
]

#: the figures a report's calibration section shows, with their labels
SECTION_FIGURES = (
    ("calibration.n", "pairs compared"),
    ("calibration.kappa", "Cohen's κ"),
    ("calibration.recallUnmet", "recall (TPR) of unmet"),
    ("calibration.tnr", "TNR"),
    ("calibration.precisionUnmet", "precision of unmet"),
    ("calibration.f1Unmet", "F1 of unmet"),
    ("calibration.redFlagRecall", "red-flag recall"),
    ("calibration.redFlagPrecision", "red-flag precision"),
)


def calibration_section(
    state: str, reason: str, metrics: Mapping[str, float], record_id: str | None = None
) -> CalibrationSection:
    """The section of a task's calibration: state, reason, every flat metric (for the gate) and
    the key figures with their 95% bounds (``None`` where undefined). A stale or missing
    calibration has no figures.

    Raises:
        pydantic.ValidationError: ``state`` is not ``current``, ``stale`` or ``missing``.
    """
    figures: list[CalibrationFigure] = []
    for name, label in SECTION_FIGURES:
        if name not in metrics and state == "current":
            figures.append(CalibrationFigure(name=name, label=label, value=None, interval=None))
        elif name in metrics:
            lo, hi = metrics.get(f"{name}.lower95"), metrics.get(f"{name}.upper95")
            interval = None if lo is None or hi is None else (lo, hi)
            figures.append(
                CalibrationFigure(name=name, label=label, value=metrics[name], interval=interval)
            )
    return CalibrationSection.model_validate(
        {
            "state": state,
            "reason": reason,
            "record_id": record_id,
            "metrics": dict(metrics),
            "figures": tuple(figures),
        }
    )


def calibration_value(report: Report, name: str) -> float | None:
    """``calibration.<name>`` of the report's current calibration; ``None`` when none is
    attached, it is stale or missing, or it has no such figure."""
    section = report.calibration
    if section is None or section.state != "current":
        return None
    return section.metrics.get(f"calibration.{name}")


_BOUND = r"(\.(lower95|upper95))?"
#: every figure name ``flat_metrics`` can write (docs/calibration.md), as one pattern
_NAMES = re.compile(
    rf"((requirements\.[^.\s]+\.)?({'|'.join(BINARY_METRICS)}){_BOUND}"
    rf"|(redFlagRecall|redFlagPrecision)(\.[A-Za-z0-9_]+)?{_BOUND}"
    rf"|(intentAccuracy|omissionRate){_BOUND}"
    r"|score(WeightedKappa|Spearman|Pearson|Rmse|Bias)|correctedViolationRate"
    r"|alpha\.(reviewers|withJudge|withAdjudication)"
    r"|altTest\.passed"
    rf"|altTest\.((status|intent|redFlags|score)|requirements\.[^.\s]+|redFlagTypes\.[A-Za-z0-9_]+)"
    rf"\.({'|'.join(ALT_TEST_FIGURES)}))"
)


class CalibrationNames(list[str]):
    """What ``calibration.<METRIC>`` accepts: any name of the documented forms (a figure the
    labels leave undefined then fails with exit 7 and says why, as a stale or missing
    calibration does), never a misspelt one. Listed as the figures the calibration holds;
    empty when no current calibration is attached (the names are still checked)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _NAMES.fullmatch(name) is not None

    def __str__(self) -> str:
        if self:
            return ", ".join(self)
        return (
            "a figure docs/calibration.md names, e.g. kappa, accuracy.lower95, "
            "redFlagRecall.lower95, altTest.passed (no current calibration is attached, so "
            "none is held yet)"
        )


def calibration_choices(report: Report) -> list[str]:
    """The names ``calibration.<METRIC>`` accepts (see :class:`CalibrationNames`), listed as
    the figures of the current calibration attached, if any. A misspelt name is refused
    whether or not a calibration exists yet, so a typo in a CI job shows on its first run; a
    documented name without a current calibration fails and says why
    (:func:`why_no_calibration_value`)."""
    section = report.calibration
    if section is None or section.state != "current":
        return CalibrationNames()
    return CalibrationNames(sorted(m.removeprefix("calibration.") for m in section.metrics))


def few_pairs_caution(report: Report, name: str) -> str | None:
    """A caution for a gate on ``calibration.<name>``, a point figure of agreement (kappa,
    accuracy, …, overall or of one requirement) measured on fewer than ``MIN_PAIRS`` pairs,
    whose interval is then too wide to say much (``calibrate`` prints "too few"); ``None``
    otherwise. It does not change whether the check holds."""
    section = report.calibration
    if section is None or section.state != "current" or name.endswith((".lower95", ".upper95")):
        return None
    scope, _, figure = name.rpartition(".")
    if (
        figure not in BINARY_METRICS
        or figure == "n"
        or (scope and not scope.startswith("requirements."))
    ):
        return None
    pairs = section.metrics.get(f"calibration.{scope + '.' if scope else ''}n")
    if pairs is None or pairs >= MIN_PAIRS:
        return None
    return (
        f"measured on {pairs:g} pair(s), fewer than {MIN_PAIRS}: one label more or less can "
        f"move it across the limit; a gate on calibration.{name}.lower95 holds only when the "
        "labels show it"
    )


def why_no_calibration_value(report: Report) -> str | None:
    """Why a ``calibration.*`` metric has no value, when the report knows."""
    section = report.calibration
    if section is None:
        return None
    if section.state != "current":
        return f"calibration is {section.state}: {section.reason}"
    held = sorted(m.removeprefix("calibration.") for m in section.metrics)
    shown = ", ".join(held[:12]) + (f", … ({len(held) - 12} more)" if len(held) > 12 else "")
    return (
        f"the calibration ({section.record_id}) has no such figure (undefined for these labels, "
        f"or misspelt); it holds: {shown}; names are listed in docs/calibration.md"
    )


def shown_calibration(report: Report) -> CalibrationSection | None:
    """The section report.md and report.html show: the attached calibration unless it is
    missing (a rubric never calibrated keeps its report byte for byte as it was)."""
    section = report.calibration
    return None if section is None or section.state == "missing" else section
