"""The release checklist (docs/ci.md): one line per check, with its figure and threshold.

Pure: builds lines from reports already read. :mod:`rubric_engine.suite.run` reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubric_engine.report.gate import GateCheck, Threshold, check_complete, check_threshold
from rubric_engine.report.model import Report

#: the checklist's lines, in the order a release check reads them
ITEMS = {
    "seed": "seed set: every case passes",
    "golden": "golden set: main metrics meet their thresholds",
    "adversarial": "adversarial set: at least 90% refused",
    "cost": "cost within budget",
    "latency": "latency within SLO",
    "slices": "every slice passes",
    "router": "routing: macro F1, per-class recall, costly confusions",
    "noRegression": "no regression against the last version",
}
_TIER_ITEM = {"seed": "seed", "golden": "golden", "adversarial": "adversarial",
              "red_team": "adversarial"}  # fmt: skip
#: the items whose line states the tier's default thresholds ("every case passes")
_CLAIMS_DEFAULTS = frozenset({"seed", "adversarial"})


@dataclass(frozen=True)
class CheckLine:
    """One line of the checklist (and one JUnit testcase).

    Attributes:
        item: the checklist line it belongs to (a key of :data:`ITEMS`, or ``<tier> set``).
        name: the testcase name, ``<dataset>: <threshold>``.
        figure: the measured value as shown, ``"—"`` when there is none.
        threshold: what it must meet.
    """

    item: str
    name: str
    passed: bool
    figure: str
    threshold: str
    message: str

    def as_gate_check(self) -> GateCheck:
        return GateCheck(self.name, self.passed, self.message, f"{self.figure} vs {self.threshold}")


def item_for(tier: str, threshold: Threshold | None, own: bool = False) -> str:
    """The checklist line a check belongs to; a dataset on thresholds of its own (``own``)
    goes under ``<tier> set``, not its tier's line, which claims the default thresholds."""
    if threshold is not None and threshold.metric.name.endswith("By.<FIELD>"):
        return "slices"
    if threshold is not None and threshold.metric.name.startswith("router."):
        return "router"
    item = _TIER_ITEM.get(tier, f"{tier} set")
    return f"{tier} set" if own and item in _CLAIMS_DEFAULTS else item


def shown(value: float | int | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def dataset_lines(
    dataset: str, tier: str, report: Report, thresholds: Sequence[Threshold], own: bool = False
) -> list[CheckLine]:
    """``complete`` and each threshold of one dataset's task (``own``: thresholds of the
    suite's, not the tier's defaults)."""
    done = check_complete(report)
    lines = [
        CheckLine(item_for(tier, None, own), f"{dataset}: complete", done.passed,
                  f"{report.totals.rows}/{report.task.planned_rows} rows, {report.task.state}",
                  "COMPLETED, every row", done.message)
    ]  # fmt: skip
    for t in thresholds:
        check = check_threshold(t, report)
        lines.append(
            CheckLine(item_for(tier, t, own), f"{dataset}: {t.text}", check.passed,
                      shown(t.metric.value(report, t.param)), f"{t.op} {t.limit:g}",
                      f"{dataset}: {check.message}")
        )  # fmt: skip
    return lines


def confusion_lines(dataset: str, report: Report, bounds: Sequence[Any]) -> list[CheckLine]:
    """One line per costly confusion the suite names: its rows must stay within its bound."""
    found = {
        (c.expected, c.predicted): c.rows
        for c in (report.router.confusions if report.router else ())
    }
    lines = []
    for bound in bounds:
        rows = found.get((bound.expected, bound.predicted), 0)
        name = f"{dataset}: confusion {bound.expected} → {bound.predicted}"
        lines.append(
            CheckLine("router", name, report.router is not None and rows <= bound.max_rows,
                      f"{rows} row(s)" if report.router else "— (no row has expectedRoute)",
                      f"<= {bound.max_rows}",
                      f"{name}: {rows} row(s) routed to {bound.predicted} instead of "
                      f"{bound.expected}, bound {bound.max_rows}")
        )  # fmt: skip
    return lines


def ordered(lines: Sequence[CheckLine]) -> list[CheckLine]:
    """Lines in the checklist's order of items, then any other tier's; stable within an item."""
    rank = {key: i for i, key in enumerate(ITEMS)}
    return sorted(lines, key=lambda line: rank.get(line.item, len(rank)))
