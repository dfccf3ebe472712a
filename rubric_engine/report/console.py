"""The terminal summary ``rubric-eval score`` prints: red flags first, then what to fix."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

LEAST_FOLLOWED = 8
TOP_CLUSTERS = 3
FAILED_CASES = 15


def _judge_line(task: dict[str, Any]) -> str:
    if task["judgeMode"] == "none":
        return "no judge (rule checks only)"
    line = f"judge {task['model']} ({task['judgeMode']}"
    cassettes = task.get("cassettes")
    if cassettes:
        line += ", answers from " + ", ".join(f"{n} {kind}" for kind, n in cassettes.items())
        line += " cassette entries"
    return line + ")"


def print_summary(report: dict[str, Any], console: Console) -> None:
    """Print the task line, totals, red flags, judge errors, intents and least-followed rules."""
    task, totals = report["task"], report["totals"]
    console.print(
        f"[bold]task {task['id']}[/bold] · rubric {task['rubricKey']} "
        f"v{task['rubricVersion']} ({task['rubricStatus']}) · {_judge_line(task)}"
    )
    mean = totals["meanScore"]
    console.print(
        f"rows {totals['rows']} · scored {totals['scored']} · JUDGE_ERROR "
        f"{totals['judgeErrors']} · mean score "
        f"{'–' if mean is None else f'{mean:.2f}'} · capped {totals['cappedRows']}"
        + (f" · checked by rules only {totals['checked']}" if totals.get("checked") else "")
    )
    if task.get("state") != "COMPLETED":
        console.print(
            f"[bold yellow]{task.get('state')}[/bold yellow]: {totals['rows']} of "
            f"{task.get('plannedRows')} planned row(s) have a result"
            + (f" ({task['stopReason']})" if task.get("stopReason") else "")
        )
    # a --judge none task has no scored rows: its rule-check line below gives the pass rate
    if totals["passRate"] is not None and totals["scored"]:
        console.print(
            f"pass rate {totals['passRate'] * 100:.1f}% ({totals['passedRows']} of "
            f"{totals['scored']} scored rows: no red flag and score ≥ {totals['passScore']})"
        )
    if report["judgeErrors"]:
        kinds = Counter(e["kind"] for e in report["judgeErrors"])
        first = report["judgeErrors"][0]
        console.print(
            "[bold red]JUDGE_ERROR[/bold red] "
            + ", ".join(f"{kind} ×{n}" for kind, n in sorted(kinds.items()))
            + f"; first ({first['rowId']}): {first['message']}",
            markup=True,
        )
    if "rules" in report:
        _print_rules(report["rules"], console)
    flags = [f for f in report["redFlags"] if f["count"]]
    if flags:
        table = Table(title="Red flags", title_justify="left")
        table.add_column("type")
        table.add_column("rows", justify="right")
        table.add_column("examples")
        for flag in flags:
            table.add_row(flag["type"], str(flag["count"]), ", ".join(flag["rowIds"][:4]))
        console.print(table)
    elif totals["scored"]:
        console.print("Red flags: none")
    if not totals["scored"]:
        return
    intents = Table(title="Per intent", title_justify="left")
    for column in ("intent", "rows", "mean", "red flags"):
        intents.add_column(column, justify="left" if column == "intent" else "right")
    for intent in report["intents"]:
        if intent["rows"]:
            m = intent["meanScore"]
            intents.add_row(
                intent["intentKey"],
                str(intent["rows"]),
                "–" if m is None else f"{m:.2f}",
                str(intent["redFlagCount"]),
            )
    console.print(intents)
    pack_rules = [
        r
        for r in report["requirements"]
        if r["category"] != "CASE" and (r["violated"] or r["partial"])
    ]
    worst = sorted(pack_rules, key=lambda r: (r["compliance"], -r["violated"], r["id"]))
    if worst:
        low = Table(title="Least-followed rubric requirements", title_justify="left")
        for column in ("requirement", "violated", "partial", "compliance"):
            low.add_column(column, justify="left" if column == "requirement" else "right")
        for r in worst[:LEAST_FOLLOWED]:
            low.add_row(
                r["id"], str(r["violated"]), str(r["partial"]), f"{r['compliance'] * 100:.0f}%"
            )
        console.print(low)
    clusters = report.get("issueClusters") or []
    if clusters:
        top = Table(title="Top issue clusters (low rows by shared violation)", title_justify="left")
        top.add_column("#", justify="right")
        top.add_column("lead requirement", no_wrap=True)
        for column in ("rows", "mean", "flagged"):
            top.add_column(column, justify="right")
        top.add_column("examples")
        for c in clusters[:TOP_CLUSTERS]:
            top.add_row(
                str(c["rank"]),
                c["leadRequirementId"] or "(no violated requirement)",
                str(c["size"]),
                "–" if c["meanScore"] is None else f"{c['meanScore']:.2f}",
                f"{c['redFlagShare'] * 100:.0f}%",
                ", ".join(c["exampleRowIds"][:2]),
            )
        console.print(top)


def _print_rules(rules: dict[str, Any], console: Console) -> None:
    """Seed 001's summary: pass rate, verdicts, averages, then each failed case's checks."""
    verdicts = ", ".join(f"{v} {n}" for v, n in rules["verdictDistribution"].items())
    duration = rules["averageDurationMs"]
    console.print(
        f"rule checks: {rules['passedCases']}/{rules['totalCases']} cases passed "
        f"(passRate {rules['passRate']:.2f}) · verdicts {verdicts} · avg tool calls "
        f"{rules['averageToolCallCount']:.1f} · avg duration "
        f"{'–' if duration is None else f'{duration:.1f} ms'}"
    )
    failed = [r for r in rules["results"] if not r["passed"]]
    if failed:
        table = Table(title="Failed cases", title_justify="left")
        table.add_column("case")
        table.add_column("failedChecks")
        for r in failed[:FAILED_CASES]:
            table.add_row(r["caseId"], "\n".join(r["failedChecks"]))
        console.print(table)
        if len(failed) > FAILED_CASES:
            console.print(f"… and {len(failed) - FAILED_CASES} more in report.json (rules)")
