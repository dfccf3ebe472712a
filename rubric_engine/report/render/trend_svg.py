"""The trend as an offline SVG line chart per metric, and as a self-contained HTML page.

No script, no external resource: the SVG is drawn here from the figures (a polyline over the
tasks, oldest left; a segment that got worse drawn red; a dashed line where the rubric
version, the model or the prompt changed, since the instrument moved there). Every text is
escaped.
"""

from __future__ import annotations

from html import escape

from rubric_engine.report.metrics import MetricKind, find_metric
from rubric_engine.report.trend import RunAgreement, Trend

WIDTH, HEIGHT, PAD = 520, 170, 36


def trend_svg(trend: Trend, metric: str) -> str:
    """One metric of ``trend`` as an ``<svg>`` element (text)."""
    values = trend.series(metric)
    known = [v for v in values if v is not None]
    low, high = (min(known), max(known)) if known else (0.0, 1.0)
    if high == low:  # a flat line: an axis one unit high around it, within what it can be
        found = find_metric(metric)
        if found is not None and found[0].kind is MetricKind.SHARE:
            low, high = 0.0, 1.0
        else:  # a score or count is never negative: its axis starts at 0 at the lowest
            low = low - 0.5 if low < 0 else max(low - 0.5, 0.0)
            high = low + 1.0
    count = len(values)

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / (count - 1) if count > 1 else 0.5)

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v - low) / (high - low)

    worse = {(d.before_task, d.task_id) for d in trend.drops if d.metric == metric}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(metric)} by task">',
        f"<title>{escape(metric)} over {count} task(s) of {escape(trend.ref)}</title>",
        f'<text x="{PAD}" y="16" font-size="13" font-weight="bold">{escape(metric)}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#999"/>',
        f'<text x="4" y="{y(high) + 4:.1f}" font-size="10">{high:.3g}</text>',
        f'<text x="4" y="{y(low) + 4:.1f}" font-size="10">{low:.3g}</text>',
    ]
    for i, point in enumerate(trend.points):
        if point.changes:
            parts.append(
                f'<line x1="{x(i):.1f}" y1="{PAD - 8}" x2="{x(i):.1f}" y2="{HEIGHT - PAD}" '
                f'stroke="#888" stroke-dasharray="4 3"><title>{escape("; ".join(point.changes))}'
                "</title></line>"
            )
        parts.append(
            f'<text x="{x(i):.1f}" y="{HEIGHT - PAD + 14}" font-size="10" '
            f'text-anchor="middle">{i + 1}</text>'
        )
    for i in range(count - 1):
        a, b = values[i], values[i + 1]
        if a is None or b is None:
            continue
        pair = (trend.points[i].task_id, trend.points[i + 1].task_id)
        colour = "#c62828" if pair in worse else "#1565c0"
        parts.append(
            f'<line x1="{x(i):.1f}" y1="{y(a):.1f}" x2="{x(i + 1):.1f}" y2="{y(b):.1f}" '
            f'stroke="{colour}" stroke-width="2" class="{"worse" if pair in worse else "same"}"/>'
        )
    for i, v in enumerate(values):
        if v is not None:
            point = trend.points[i]
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="#1565c0">'
                f"<title>{escape(point.label)}: {v:.4g}</title></circle>"
            )
    parts.append("</svg>")
    return "\n".join(parts)


def trend_html(trend: Trend) -> str:
    """A self-contained page: the tasks, a chart per metric, the drops."""
    rows = "\n".join(
        f"<tr><td>{i + 1}</td><td>{escape(p.label)}</td><td>{escape(p.created_at)}</td>"
        f"<td>{escape(p.rubric)}</td><td>{escape(p.model)}</td><td>{p.rows}</td>"
        + "".join(f"<td>{'—' if v is None else f'{v:.4g}'}</td>" for v in p.values)
        + f"<td>{escape('; '.join(p.changes))}</td><td>{_agreement(p.agreement)}</td></tr>"
        for i, p in enumerate(trend.points)
    )
    head = "".join(f"<th>{escape(m)}</th>" for m in trend.metrics)
    drops = "".join(
        f"<li>{escape(d.metric)}: {d.before:.4g} → {d.after:.4g} ({escape(d.before_task)} → "
        f"{escape(d.task_id)})</li>"
        for d in trend.drops
    )
    charts = "\n".join(f"<figure>{trend_svg(trend, m)}</figure>" for m in trend.metrics)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>rubric-eval trend: {escape(trend.ref)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}figure{margin:1em 0}"
        "</style></head><body>"
        f"<h1>Trend of {escape(trend.ref)}</h1>"
        f"<table><tr><th>#</th><th>task</th><th>created</th><th>rubric</th><th>model</th>"
        f"<th>rows</th>{head}<th>changed</th><th>against the task before</th></tr>\n{rows}"
        "</table>"
        f"<h2>Got worse</h2><ul>{drops or '<li>nothing</li>'}</ul>"
        f"<h2>Charts</h2>{charts}</body></html>\n"
    )


def _agreement(found: RunAgreement | None) -> str:
    """The run-to-run agreement cell: rows shared with the task before and how many changed."""
    if found is None:
        return ""
    return (
        f"{found.shared} rows in both: {found.outcome_changed} changed outcome, "
        f"{found.score_changed} changed score"
    )
