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
        "## Per intent",
        "",
        "| intent | rows | mean score | red flags |",
        "|---|---:|---:|---:|",
    ]
    out += [
        f"| {i['intentKey']} ({_cell(i['name'])}) | {i['rows']} | {_fmt(i['meanScore'])} | "
        f"{i['redFlagCount']} |"
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
    usage = report["usage"]
    out += [
        "",
        "## Usage",
        "",
        f"- Judge calls: {usage['calls']} (re-asks and failed attempts included)",
        f"- Tokens: {usage['promptTokens']} prompt, {usage['completionTokens']} completion",
        f"- Cost: {_cost(usage['costUsd'])}",
        f"- Latency per row: mean {_fmt(usage['latencyMsMean'], 1)} ms, "
        f"p95 {_fmt(usage['latencyMsP95'], 1)} ms",
        "",
    ]
    return "\n".join(out) + "\n"


def _cost(cost: float | None) -> str:
    if cost is None:
        return "not known (replayed calls, or a model without a published price)"
    return f"${cost:.4f}"


def _provenance(counts: dict[str, int] | None) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
