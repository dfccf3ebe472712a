"""Render a report dict as JSON (machines) or Markdown (review). Pure string building."""

from __future__ import annotations

import json
from typing import Any

EXAMPLE_ROWS = 5


def render_json(report: dict[str, Any]) -> str:
    """Indented UTF-8 JSON with a final newline; key order as built."""
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any]) -> str:
    """Review report: red flags first, then totals, intents, requirements, lowest rows."""
    task, totals = report["task"], report["totals"]
    draft = " — a draft, not a published version" if task.get("rubricStatus") == "DRAFT" else ""
    out = [
        f"# rubric-eval report — task {task['id']}",
        "",
        f"- Rubric: `{task['rubricKey']}` v{task['rubricVersion']} ({task['rubricStatus']})"
        f"{draft}, hash `{task['rubricHash'][:19]}…`",
        f"- Prompt: `{task['promptVersion']}` `{task['promptHash'][:19]}…`; engine "
        f"{task['engineVersion']} ({task['analysisVersion']})",
        f"- Judge: `{task['model']}`, mode {task['judgeMode']}"
        + (f", cassettes: {_provenance(task.get('cassettes'))}" if task.get("cassettes") else ""),
        f"- Rows: {totals['rows']} · scored {totals['scored']} · JUDGE_ERROR "
        f"{totals['judgeErrors']} · mean score {_fmt(totals['meanScore'])} "
        f"(judge's own {_fmt(totals['meanJudgeScore'])}; {totals['cappedRows']} capped)",
        f"- Pass rate: {_pct(totals['passRate'])} ({totals['passedRows']} of {totals['scored']} "
        f"scored rows have no red flag and a final score ≥ {totals['passScore']})",
        "",
    ]
    if task.get("state") != "COMPLETED":
        out += [
            f"**State: {task.get('state')}** — {totals['rows']} of {task.get('plannedRows')} "
            "planned rows were judged; this report covers those rows only.",
            "",
        ]
    out += ["## Red flags", ""]
    flagged = [f for f in report["redFlags"] if f["count"]]
    if flagged:
        out += ["| type | rows | example rows | meaning |", "|---|---:|---|---|"]
        for f in flagged:
            examples = ", ".join(f["rowIds"][:EXAMPLE_ROWS]) + (
                " …" if f["count"] > EXAMPLE_ROWS else ""
            )
            out.append(f"| **{f['type']}** | {f['count']} | {examples} | {_cell(f['text'])} |")
    else:
        out.append("No red flags in scored rows.")
    clear = [f["type"] for f in report["redFlags"] if not f["count"]]
    if clear:
        out += ["", f"Not seen: {', '.join(clear)}."]
    out += ["", "## Score distribution", "", "| score | rows |", "|---:|---:|"]
    out += [f"| {s} | {n} |" for s, n in totals["scoreDistribution"].items()]
    out += [
        "",
        "Verdicts: " + ", ".join(f"{v} {n}" for v, n in totals["verdictDistribution"].items()),
    ]
    out += [
        "",
        "## Per intent",
        "",
        "| intent | rows | mean score | pass rate | red flags |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {i['intentKey']} ({_cell(i['name'])}) | {i['rows']} | {_fmt(i['meanScore'])} | "
        f"{_pct(i['passRate'])} | {i['redFlagCount']} |"
        for i in report["intents"]
    ]
    out += [
        "",
        "## Per requirement",
        "",
        "| requirement | intent | category | followed | partial | violated | n/a | compliance |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["requirements"]:
        name = f"**{r['id']}**" if r["critical"] else r["id"]
        if r["category"] == "CASE" and r.get("text"):  # a hash ID says nothing by itself
            text = " ".join(str(r["text"]).split())
            name += f" — {_cell(text[:80] + ('…' if len(text) > 80 else ''))}"
        out.append(
            f"| {name} | {r['intentKey'] or 'common' if r['category'] != 'CASE' else 'case'}"
            f" | {r['category']} | {r['followed']} | {r['partial']} | {r['violated']} | "
            f"{r['notApplicable']} | {_pct(r['compliance'])} |"
        )
    out += [
        "",
        "Bold requirements are red lines. Compliance = followed / (followed + partial + "
        "violated); not-applicable and JUDGE_ERROR rows are outside the denominator.",
        "",
    ]
    for cut in report.get("slices", ()):
        out += _slice(cut)
    out += _clusters(report["issueClusters"])
    if "rules" in report:
        out += _rules_section(report["rules"])
    out += [
        "## Lowest-scoring rows",
        "",
        "| row | final | judge | intent | violated | red flags | capped by |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for r in report["lowestRows"]:
        out.append(
            f"| {r['rowId']} | {r['finalScore']} | {r['judgeScore']} | {r['intentKey']} | "
            f"{', '.join(r['violatedRequirementIds']) or '–'} | "
            f"{', '.join(r['redFlagTypes']) or '–'} | {', '.join(r['cappedBy']) or '–'} |"
        )
    out += ["", f"## JUDGE_ERROR rows ({totals['judgeErrors']})", ""]
    if totals["judgeErrorsByKind"]:
        out += [
            "By kind: " + ", ".join(f"{k} {n}" for k, n in totals["judgeErrorsByKind"].items()),
            "",
        ]
    if report["judgeErrors"]:
        out += [
            f"- `{e['rowId']}` {e['kind']}: {_cell(e['message'])}" for e in report["judgeErrors"]
        ]
    else:
        out.append("None.")
    out += ["", "## Protocol warnings", ""]
    if report["warnings"]:
        out += ["| code | count |", "|---|---:|"]
        out += [f"| {code} | {n} |" for code, n in report["warnings"].items()]
    else:
        out.append("None.")
    usage, agent = report["usage"], report["agent"]
    out += [
        "",
        "## Agent",
        "",
        f"- Tool calls: {agent['toolCallsTotal']} ({_fmt(agent['toolCallsMean'])} per row)",
        f"- Duration: mean {_fmt(agent['durationMsMean'], 1)} ms over "
        f"{agent['rowsWithDuration']} row(s) whose trace records it",
        "",
        "## Judge usage",
        "",
        f"- Judge calls: {usage['calls']} (re-asks and failed attempts included)",
        f"- Tokens: {usage['promptTokens']} prompt, {usage['completionTokens']} completion",
        f"- Cost: {_cost(usage['costUsd'])}",
        f"- Latency per row: mean {_fmt(usage['latencyMsMean'], 1)} ms, "
        f"p95 {_fmt(usage['latencyMsP95'], 1)} ms",
        "",
    ]
    return "\n".join(out) + "\n"


def _slice(cut: dict[str, Any]) -> list[str]:
    out = [
        f"## By {cut['by']}",
        "",
        "| group | rows | scored | mean | pass rate | red-flag rows | compliance "
        "| least followed |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for g in cut["groups"]:
        judged = [r for r in g["requirements"] if r["compliance"] is not None]
        worst = sorted(judged, key=lambda r: (r["compliance"], -r["violated"], r["id"]))[:3]
        out.append(
            f"| {_cell(g['value'])} | {g['rows']} | {g['scored']} | {_fmt(g['meanScore'])} | "
            f"{_pct(g['passRate'])} | {g['redFlagRows']} | {_pct(g['compliance'])} | "
            + (
                ", ".join(
                    f"{r['id']} {_pct(r['compliance'])}" for r in worst if r["compliance"] < 1
                )
                or "–"
            )
            + " |"
        )
    return [*out, ""]


def _clusters(clusters: list[dict[str, Any]]) -> list[str]:
    out = ["## Issue clusters", ""]
    if not clusters:
        return [*out, "No low-scoring rows.", ""]
    out += [
        "Low rows (red flag or below the pass score) grouped by the requirement most of them "
        "violate; each row is in one cluster.",
        "",
        "| # | lead requirement | rows | mean | red-flag share | also violated | examples |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for c in clusters:
        lead = c["leadRequirementId"] or "(no violated requirement)"
        lead = f"**{lead}**" if c["critical"] else lead
        also = ", ".join(f"{o['id']} ×{o['rows']}" for o in c["coViolated"][:4]) or "–"
        out.append(
            f"| {c['rank']} | {lead}{': ' + _cell(c['text']) if c['text'] else ''} | {c['size']} | "
            f"{_fmt(c['meanScore'])} | {_pct(c['redFlagShare'])} | {also} | "
            f"{', '.join(c['exampleRowIds'])} |"
        )
    return [*out, ""]


def _rules_section(rules: dict[str, Any]) -> list[str]:
    """Seed 001's report: pass rate, verdicts, and each failed case's failedChecks."""
    verdicts = ", ".join(f"{v} {n}" for v, n in rules["verdictDistribution"].items())
    out = [
        "## Rule checks",
        "",
        f"- Cases: {rules['totalCases']} · passed {rules['passedCases']} "
        f"({_pct(rules['passRate'])})",
        f"- Verifier verdicts: {verdicts}",
        f"- Average tool calls: {_fmt(rules['averageToolCallCount'])} · average duration: "
        f"{_fmt(rules['averageDurationMs'], 1)} ms",
        "",
    ]
    failed = [r for r in rules["results"] if not r["passed"]]
    if failed:
        out += ["| case | failed checks | evidence coverage |", "|---|---|---|"]
        for r in failed:
            coverage = ", ".join(
                f"{tool} {'✓' if ok else '✗'}" for tool, ok in r["evidenceCoverage"].items()
            )
            checks = "<br>".join(_cell(c) for c in r["failedChecks"])
            out.append(f"| {r['caseId']} | {checks} | {coverage or '–'} |")
        out.append("")
    return out


def _cost(cost: float | None) -> str:
    if cost is None:
        return "not known (replayed calls, or a model without a published price)"
    return f"${cost:.4f}"


def _provenance(counts: dict[str, int] | None) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


def render_diff_markdown(diff: dict[str, Any]) -> str:
    """Review text of a baseline diff: summary, rubric note, then regressions first."""
    rubric = diff["rubricComparison"]
    verdict = "**REGRESSION**" if diff["hasRegression"] else "no regression"
    out = [
        f"# rubric-eval diff — baseline {diff['baselineTaskId']} → current {diff['currentTaskId']}",
        "",
        f"- Result: {verdict} · {diff['regressionCount']} regression(s), "
        f"{diff['improvementCount']} improvement(s), {diff['changedCount']} change(s)",
        f"- Rows: {diff['baselineTotalCases']} → {diff['currentTotalCases']}; passed "
        f"{diff['baselinePassedCases']} → {diff['currentPassedCases']}; pass rate "
        f"{_pct(diff['baselinePassRate'])} → {_pct(diff['currentPassRate'])}",
        f"- Rubric: {rubric['note']}",
    ]
    if not rubric["sameRubric"]:
        for side in ("onlyInBaseline", "onlyInCurrent"):
            if rubric[side]:
                out.append(f"  - {side}: {', '.join(rubric[side])}")
    for kind, title in (
        ("REGRESSION", "Regressions"),
        ("IMPROVEMENT", "Improvements"),
        ("CHANGED", "Changed"),
    ):
        items = [i for i in diff["items"] if i["type"] == kind]
        out += ["", f"## {title} ({len(items)})", ""]
        if not items:
            out.append("None.")
            continue
        out += ["| scope | case | metric | baseline | current | delta | message |"]
        out += ["|---|---|---|---|---|---:|---|"]
        out += [
            f"| {i['scope']} | {i['caseId'] or '–'} | {i['metric']} | "
            f"{_cell(_value(i['baselineValue']))} | {_cell(_value(i['currentValue']))} | "
            f"{_fmt(i['delta'], 4)} | {_cell(i['message'])} |"
            for i in items
        ]
    return "\n".join(out) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)
