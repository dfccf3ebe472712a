"""The action list as Markdown, JSON, or issue bodies a tracker imports (GitHub's issue JSON
shape: ``title``, ``body``, ``labels``; docs/actions.md). Pure: text in, text out."""

from __future__ import annotations

import json
from typing import Any

from rubric_engine.actions.model import ActionItem, ActionsReport, TextCluster

FORMATS = ("md", "json", "github")
#: GitHub's limits: an issue title, a label name, an issue body (characters)
TITLE_MAX, LABEL_MAX, BODY_MAX = 256, 50, 65536


def shown_items(
    report: ActionsReport, format: str, top: int = 0, only: tuple[str, ...] = ()
) -> tuple[ActionItem, ...]:
    """The items :func:`render` writes: ``only`` keeps the items in those states, then ``top``
    > 0 the first ``top`` of them; the JSON keeps every item."""
    if format == "json":
        return tuple(report.items)
    items = tuple(i for i in report.items if not only or i.state in only)
    return items[:top] if top > 0 else items


def render(report: ActionsReport, format: str, top: int = 0, only: tuple[str, ...] = ()) -> str:
    """``md``, ``json`` or ``github`` of :func:`shown_items`."""
    if format == "json":
        return json.dumps(report.to_json_dict(), ensure_ascii=False, indent=2) + "\n"
    items = shown_items(report, format, top, only)
    if format == "github":
        issues = [github_issue(report, item) for item in items]
        return json.dumps(issues, ensure_ascii=False, indent=2) + "\n"
    return markdown(report, items, bool(only))


def _movement(report: ActionsReport, item: ActionItem) -> str:
    if item.state is None:
        return ""
    return (
        f"{item.state}: {item.baseline_rows} → {item.rows} rows against baseline task "
        f"{report.baseline_task_id} (impact {item.baseline_impact:g} → {item.impact:g})"
    )


def _item_lines(report: ActionsReport, item: ActionItem) -> list[str]:
    lines = []
    if item.text:
        lines.append(f"**Rule**: {item.text}")
    where = [f"intent {item.intent_key}" if item.intent_key else "no intent"]
    where += [f"{k}={v}" for k, v in item.slice.items()]
    if item.critical:
        where.append(f"red line {item.red_flag_type}")
    if item.violation_score is not None:
        where.append(f"cap {item.violation_score}")
    if item.category:
        where.append(f"category {item.category}")
    lines.append("**Where**: " + " · ".join(where))
    mean = "–" if item.mean_final_score is None else f"{item.mean_final_score:g}"
    lines.append(
        f"**Impact**: {item.impact:g} = {item.rows} row(s) × severity {item.severity:g} "
        f"(mean final score {mean})"
    )
    if item.state is not None:
        lines.append(f"**Against the baseline**: {_movement(report, item)}")
    lines.append(f"**Owner**: {item.owner or f'none in the rows’ `{report.owner_field}` metadata'}")
    if item.red_flag_types:
        lines.append(
            "**Red flags**: " + ", ".join(f"{k} ({v})" for k, v in item.red_flag_types.items())
        )
    others = [i for i in item.involved if i.id != item.lead_requirement_id]
    if others:
        lines.append(
            "**Also unmet in these rows**: " + ", ".join(f"{i.id} ({i.rows})" for i in others[:8])
        )
    if item.evidence:
        lines.append("**Evidence**:")
        for e in item.evidence:
            new = " (new in this cluster)" if e.new else ""
            score = "–" if e.final_score is None else e.final_score
            lines.append(f"- `{e.row_id}` final score {score}{new}: {_short(e.explanation)}")
            for t in e.turns:
                said = f" {t.role}: {t.text}" if t.text else ""
                lines.append(f"  - turn {t.turn}{said}")
    if item.row_ids:
        shown = ", ".join(item.row_ids[:20])
        more = f" and {len(item.row_ids) - 20} more" if len(item.row_ids) > 20 else ""
        lines.append(f"**Rows**: {shown}{more}")
    if item.new_row_ids:
        lines.append(f"**New since the baseline**: {', '.join(item.new_row_ids[:20])}")
    if item.moved_to:
        lines.append(
            "**Its rows are now under**: "
            + ", ".join(f"`{key}` ({n})" for key, n in item.moved_to.items())
        )
    return lines


def markdown(report: ActionsReport, items: tuple[ActionItem, ...], filtered: bool = False) -> str:
    out = [f"# Action items: task {report.task_id} ({report.rubric})", ""]
    head = (
        f"{report.low_rows} low row(s) of {report.scored_rows} (not PASS at pass score "
        f"{report.pass_score}) in {len([i for i in report.items if i.rows])} cluster(s)"
    )
    if report.baseline_task_id:
        moved = ", ".join(f"{n} {s}" for s, n in report.states.items())
        head += (
            f"; against baseline task {report.baseline_task_id} ({report.baseline_low_rows} "
            f"low row(s)): {moved}"
        )
    out += [head + ". Ranked red lines first, then by impact (rows × severity).", ""]
    for item in items:
        out += [f"## {item.rank}. {item.title}", "", *_item_lines(report, item), ""]
    if len(items) < len(report.items):
        how = "`--top 0` without `--state`" if filtered else "`--top 0`"
        out += [f"({len(report.items) - len(items)} more: {how} lists them all)", ""]
    out += _failures(report)
    return "\n".join(out).rstrip() + "\n"


def _failures(report: ActionsReport) -> list[str]:
    u = report.unexplained
    out = ["## Failures no rule names", ""]
    if not u.rows:
        return [*out, "None: every low row names an unmet requirement.", ""]
    out += [
        f"{u.rows} low row(s) with nothing unmet, or a red flag no requirement raised: "
        f"{', '.join(u.row_ids[:20])}{' …' if u.rows > 20 else ''}. "
        + (f"{u.clustered} of their explanations" if u.clustered < u.rows else "Their explanations")
        + f" in {len(u.clusters)} cluster(s) "
        f"(TF-IDF, k-means, seed {u.seed}), each a candidate requirement for the next version:",
        "",
    ]
    for c in u.clusters:
        out += _text_cluster(c)
    return out


def _text_cluster(c: TextCluster) -> list[str]:
    lines = [f"### Candidate {c.rank}: {', '.join(c.terms)} ({c.rows} row(s))", ""]
    if c.summary:
        lines.append(f"**Proposed criterion** (`rubric init` line): `{c.summary}`")
    lines.append(f"**Candidate**: {c.candidate}")
    lines.append(f"**Rows**: {', '.join(c.row_ids)}")
    lines += [f"- {_short(x, 240)}" for x in c.examples]
    return [*lines, ""]


def github_issue(report: ActionsReport, item: ActionItem) -> dict[str, Any]:
    """One item as GitHub's issue JSON (``POST /repos/{owner}/{repo}/issues``)."""
    state = f"[{item.state}] " if item.state else ""
    title = f"{state}{item.title}: {item.rows or item.baseline_rows} low row(s)"
    body = "\n\n".join(_item_lines(report, item))
    body += (
        f"\n\n---\nFrom `rubric-eval actions` on task {report.task_id} ({report.rubric}), "
        f"cluster `{item.key}`, rank {item.rank}."
    )
    labels = ["rubric-eval", "red-line" if item.critical else "rule"]
    if item.state:
        labels.append(f"state:{item.state.lower()}")
    if item.intent_key:
        labels.append(f"intent:{item.intent_key}")
    if item.category:
        labels.append(f"category:{item.category}")
    return {
        "title": title[:TITLE_MAX],
        "body": body[:BODY_MAX],
        "labels": [label[:LABEL_MAX] for label in labels],
    }


def _short(text: str | None, limit: int = 300) -> str:
    if not text:
        return "(no explanation)"
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
