"""The terminal summary ``rubric-eval score`` prints: red flags first, then what to fix."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from rubric_engine.report.model import Report, RulesSection, TaskSection

LEAST_FOLLOWED = 8
TOP_CLUSTERS = 3
FAILED_CASES = 15


def _judge_line(task: TaskSection) -> str:
    if task.judge_mode == "none":
        return "no judge (rule checks only)"
    line = f"judge {task.model} ({task.judge_mode}"
    if task.judges:  # a panel (docs/panels.md)
        line = f"panel of {len(task.judges)} judges {', '.join(task.judges)} ({task.judge_mode}"
    cassettes = task.cassettes
    if cassettes:
        line += ", answers from " + ", ".join(f"{n} {kind}" for kind, n in cassettes.items())
        line += (
            " cassette entries, not from these models"
            if task.judges
            else " cassette entries, not from this model"
        )
    for source in task.answer_sources or ():
        if source.get("kind") != "recorded" and "worse" in str(source.get("method", "")).lower():
            line += "; written to be worse"  # the deliberately worse demo set says so
            break
    return line + ")"


def print_summary(report: Report, console: Console) -> None:
    """Print the task line, totals, red flags, judge errors, intents and least-followed rules."""
    task, totals = report.task, report.totals
    console.print(
        f"[bold]task {task.id}[/bold] · rubric {task.rubric_key} "
        f"v{task.rubric_version} ({task.rubric_status}) · {_judge_line(task)}"
    )
    mean = totals.mean_score
    console.print(
        f"rows {totals.rows} · scored {totals.scored} · JUDGE_ERROR "
        f"{totals.judge_errors} · mean score "
        f"{'–' if mean is None else f'{mean:.2f}'} · capped {totals.capped_rows}"
        + (f" · checked by rules only {totals.checked}" if totals.checked else "")
    )
    if task.state != "COMPLETED":
        console.print(
            f"[bold yellow]{task.state}[/bold yellow]: {totals.rows} of "
            f"{task.planned_rows} planned row(s) have a result"
            + (f" ({task.stop_reason})" if task.stop_reason else "")
        )
    # a --judge none task has no scored rows: its rule-check line below gives the pass rate
    if totals.pass_rate is not None and totals.scored:
        console.print(
            f"pass rate {totals.pass_rate * 100:.2f}% ({totals.passed_rows} of "
            f"{totals.scored} scored rows: no red flag and score ≥ {totals.pass_score})"
        )
    if report.stability is not None:  # a sampled task (docs/stability.md)
        s = report.stability
        rate = "" if s.unstable_rate is None else f" ({s.unstable_rate * 100:.2f}%)"
        console.print(
            f"stability: sampled rows {s.sampled_rows} ({s.samples} samples) · unstable "
            f"{s.unstable_rows}{rate}"
        )
    if report.usage.cache_line:
        usage = report.usage
        cost = "" if usage.cost_usd is None else f" · cost ${usage.cost_usd:.4f}"
        console.print(f"judge prompt tokens {usage.prompt_tokens}: {usage.cache_line}{cost}")
    if report.judge_errors:
        kinds = Counter(e.kind for e in report.judge_errors)
        first = report.judge_errors[0]
        console.print(
            "[bold red]JUDGE_ERROR[/bold red] "
            + ", ".join(f"{kind} ×{n}" for kind, n in sorted(kinds.items(), key=_kind_order))
            + f"; first ({first.row_id}): {first.message}",
            markup=True,
        )
    if report.rules is not None:
        _print_rules(report.rules, console)
    flags = [f for f in report.red_flags if f.count]
    if flags:
        table = Table(title="Red flags", title_justify="left")
        table.add_column("type")
        table.add_column("rows", justify="right")
        table.add_column("examples")
        for flag in flags:
            table.add_row(flag.type, str(flag.count), ", ".join(flag.row_ids[:4]))
        console.print(table)
    elif totals.scored:
        console.print("Red flags: none")
    if not totals.scored:
        return
    intents = Table(title="Per intent", title_justify="left")
    for column in ("intent", "rows", "mean", "red flags"):
        intents.add_column(column, justify="left" if column == "intent" else "right")
    for intent in report.intents:
        if intent.rows:
            m = intent.mean_score
            intents.add_row(
                intent.intent_key,
                str(intent.rows),
                "–" if m is None else f"{m:.2f}",
                str(intent.red_flag_count),
            )
    console.print(intents)
    # violated or partial entries were judged, so their compliance is a number
    pack_rules = [
        (r, r.compliance or 0.0)
        for r in report.requirements
        if r.category != "CASE" and (r.violated or r.partial)
    ]
    worst = sorted(pack_rules, key=lambda rc: (rc[1], -rc[0].violated, rc[0].id))
    if worst:
        low = Table(title="Least-followed rubric requirements", title_justify="left")
        for column in ("requirement", "violated", "partial", "compliance"):
            low.add_column(column, justify="left" if column == "requirement" else "right")
        for r, compliance in worst[:LEAST_FOLLOWED]:
            low.add_row(r.id, str(r.violated), str(r.partial), f"{compliance * 100:.0f}%")
        console.print(low)
    clusters = report.issue_clusters
    if clusters:
        top = Table(title="Top issue clusters (low rows by shared violation)", title_justify="left")
        top.add_column("#", justify="right")
        top.add_column("lead requirement", no_wrap=True)
        for column in ("rows", "mean", "flagged"):
            top.add_column(column, justify="right")
        top.add_column("examples")
        for c in clusters[:TOP_CLUSTERS]:
            top.add_row(
                str(c.rank),
                c.lead_requirement_id or "(no violated requirement)",
                str(c.size),
                "–" if c.mean_score is None else f"{c.mean_score:.2f}",
                f"{c.red_flag_share * 100:.0f}%",
                ", ".join(c.example_row_ids[:2]),
            )
        console.print(top)


def _kind_order(item: tuple[str | None, int]) -> str:
    return item[0] or ""


def _print_rules(rules: RulesSection, console: Console) -> None:
    """The diagnosis summary: pass rate, verdicts, averages, then each failed case's checks."""
    verdicts = ", ".join(f"{v} {n}" for v, n in rules.verdict_distribution.items())
    duration = rules.average_duration_ms
    console.print(
        f"rule checks: {rules.passed_cases}/{rules.total_cases} cases passed "
        f"(passRate {rules.pass_rate:.2f}) · verdicts {verdicts} · avg tool calls "
        f"{rules.average_tool_call_count:.1f} · avg duration "
        f"{'–' if duration is None else f'{duration:.1f} ms'}"
    )
    failed = [r for r in rules.results if not r.passed]
    if failed:
        table = Table(title="Failed cases", title_justify="left")
        table.add_column("case")
        table.add_column("failedChecks")
        for r in failed[:FAILED_CASES]:
            table.add_row(r.case_id, "\n".join(r.failed_checks))
        console.print(table)
        if len(failed) > FAILED_CASES:
            console.print(f"… and {len(failed) - FAILED_CASES} more in report.json (rules)")
