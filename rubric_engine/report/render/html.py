"""The HTML report: one self-contained file to share (docs/reports.md).

Everything is inline (CSS, a few lines of JavaScript, SVG charts drawn here), and a Content
Security Policy forbids any fetch, so the file opens offline and never calls out. Order: the
red-flag bucket first (red lines sit on top even when rare), then totals, charts
(score distribution, per intent, per-requirement compliance), issue clusters, slices,
requirements, errors and usage, and a drill-down per row (dialogue, referenceBasis, the judge's
explanation, what capped the score). Rendered with jinja2 (autoescaped) from the typed report
and the task's stored rows, so it is rebuilt from the store like every other report.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from rubric_engine.report.accumulate import DRILLDOWN_ROWS, WorstRows
from rubric_engine.report.calibration import shown_calibration
from rubric_engine.report.glossary import GLOSSARY
from rubric_engine.report.model import Diff, Report
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric

CHART_WIDTH = 640
BAR_HEIGHT = 22
EXAMPLES_PER_FLAG = 5
#: a cluster's row links are written this many at a time (see ``_row_links``)
LINKS_PER_CHUNK = 256
_STATUS_ORDER = ("VIOLATED", "PARTIAL", "FOLLOWED", "NOT_APPLICABLE")


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("rubric_engine.report.render", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    # the report's 4-place figure at its own precision: rounded once (render._pct)
    env.filters["pct"] = lambda v: "–" if v is None else f"{v * 100:.2f}%"
    env.filters["val"] = _value
    env.filters["num"] = lambda v, d=2: (
        "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
    )
    return env


def _value(value: Any) -> str:
    """A diff value as a cell: numbers as written, mappings and lists compact, absent as –."""
    if value is None:
        return "–"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def render_diff_html(diff: Diff) -> str:
    """The HTML page of a baseline diff (self-contained, no script): summary, then the
    regressions, improvements and changes, aggregate items before case items."""
    from rubric_engine.report.render.json_md import capped_note

    note = capped_note(diff.capped) if diff.capped is not None else None
    return _environment().get_template("diff.html.j2").render(diff=diff, capped_note=note)


def score_chart(report: Report) -> dict[str, Any]:
    """Vertical bars, one per score of the scale: ``{width, height, bars: [{label, count, x, y,
    w, h}]}`` in SVG user units."""
    dist = report.totals.score_distribution
    top = max(dist.values(), default=0) or 1
    height, base, slot = 180, 150, CHART_WIDTH // max(len(dist), 1)
    bars = []
    for i, (score, count) in enumerate(dist.items()):
        h = round(120 * count / top)
        bars.append(
            {
                "label": score,
                "count": count,
                "x": i * slot + slot // 4,
                "y": base - h,
                "w": slot // 2,
                "h": h,
            }
        )
    return {"width": CHART_WIDTH, "height": height, "base": base, "bars": bars}


def _hbars(items: list[tuple[str, float | None, str]], scale_max: float) -> dict[str, Any]:
    """Horizontal bars: label on the left, bar proportional to value / scale_max."""
    label_w, bar_w = 300, CHART_WIDTH - 300 - 70
    bars = []
    for i, (label, value, note) in enumerate(items):
        w = 0 if value is None else round(bar_w * value / scale_max) if scale_max else 0
        bars.append(
            {
                "label": label,
                "value": value,
                "note": note,
                "y": i * BAR_HEIGHT + 4,
                "w": w,
                "x": label_w,
            }
        )
    return {
        "width": CHART_WIDTH,
        "height": len(items) * BAR_HEIGHT + 8,
        "bars": bars,
        "labelWidth": label_w,
        "barWidth": bar_w,
    }


def intent_chart(report: Report, rubric: EvalRubric) -> dict[str, Any]:
    """Mean final score per intent with rows (bars over the scale's maximum)."""
    items = [
        (i.intent_key, i.mean_score, f"{i.rows} rows · {i.red_flag_count} red flags")
        for i in report.intents
        if i.rows
    ]
    return _hbars(items, rubric.score_scale.max)


def compliance_chart(report: Report) -> dict[str, Any]:
    """Compliance per pack requirement that was judged at least once, least followed first."""
    judged = [
        (r, r.compliance)
        for r in report.requirements
        if r.compliance is not None and r.category != "CASE"
    ]
    judged.sort(key=lambda rc: (rc[1], -rc[0].violated, rc[0].id))
    items: list[tuple[str, float | None, str]] = [
        (r.id, compliance, f"{r.violated} violated · {r.partial} partial")
        for r, compliance in judged
    ]
    chart = _hbars(items, 1.0)
    for bar, (r, compliance) in zip(chart["bars"], judged, strict=True):
        bar["critical"] = r.critical
        bar["band"] = compliance_band(compliance)
    return chart


def compliance_band(compliance: float) -> str:
    """The colour band of a compliance bar: ``good`` from 90%, ``mid`` from 70%, else ``bad``;
    a red line is marked by a badge, not by its colour, so 98% is not drawn as an alarm."""
    return "good" if compliance >= 0.9 else "mid" if compliance >= 0.7 else "bad"


def drilldown_rows(results: list[RowResult], pass_score: int) -> list[RowResult]:
    """Every row when they fit (:data:`DRILLDOWN_ROWS`); else the worst first (red flag,
    JUDGE_ERROR, failing, lowest score), kept in input order (the ordering of
    :class:`~rubric_engine.report.accumulate.WorstRows`, which a streamed report keeps)."""
    if len(results) <= DRILLDOWN_ROWS:
        return results
    worst = WorstRows(pass_score)
    for seq, row in enumerate(results):
        worst.add(seq, row)
    return worst.rows()


def row_details(
    rubric: EvalRubric, rows: list[tuple[RowResult, dict[str, Any]]], pass_score: int
) -> list[dict[str, Any]]:
    """What the drill-down shows per row (result, stored dialogue), in input order."""
    reqs = rubric.requirements_by_id
    out = []
    anchors: set[str] = set()
    for r, dialogue in rows:
        case_texts = _case_texts(dialogue)
        basis = [
            {
                "id": e.requirement_id,
                "status": str(e.status),
                "source": str(e.source),
                "category": reqs[e.requirement_id].category if e.requirement_id in reqs else "CASE",
                "critical": bool(e.requirement_id in reqs and reqs[e.requirement_id].critical),
                "redFlagType": reqs[e.requirement_id].red_flag_type
                if e.requirement_id in reqs
                else None,
                "text": reqs[e.requirement_id].text
                if e.requirement_id in reqs
                else case_texts.get(e.requirement_id, ""),
                "evidenceTurns": list(e.evidence_turns or ()),
            }
            for e in r.reference_basis
        ]
        # what went wrong first; pack order within each status (sorted() is stable)
        basis.sort(key=lambda entry: _STATUS_ORDER.index(entry["status"]))
        out.append(
            {
                "rowId": r.row_id,
                "anchor": _anchor(r.row_id, anchors),
                "outcome": row_outcome(r, pass_score),
                "scored": r.status is RowStatus.SCORED,
                "intentKey": r.intent_key,
                "judgeScore": r.judge_score,
                "finalScore": r.final_score,
                "redFlagTypes": list(r.red_flag_types),
                "cappedBy": [
                    {
                        "id": rid,
                        "cap": reqs[rid].violation_score if rid in reqs else None,
                        "text": reqs[rid].text if rid in reqs else "",
                    }
                    for rid in r.capped_by
                ],
                "basis": basis,
                "explanation": r.score_explanation,
                "questionsCheck": r.questions_check,
                "questionsIssues": list(r.questions_issues),
                "warnings": [w.to_json_dict() for w in r.warnings],
                "error": r.error.to_json_dict() if r.error else None,
                "messages": dialogue.get("messages") or [],
                "metadata": dialogue.get("metadata") or {},
            }
        )
    return out


def _row_links(
    row_ids: Iterable[str], anchors: dict[str, str], environment: Environment
) -> Iterator[Markup]:
    """A cluster's rows as the page lists them, ``<a href="#anchor">rowId</a>`` joined by
    ``", "``: the text the template's loop gave (``{{ anchors[rid] }}``, escaped; a rowId
    without a drill-down anchor links to ``#``, as jinja's undefined renders), joined here
    :data:`LINKS_PER_CHUNK` at a time because every low row is listed (the template's loop was
    most of the page's time), and given in those chunks so a cluster of every row is never
    held whole."""
    links: list[str] = []
    first = True
    for rid in row_ids:
        if rid in anchors:
            anchor = anchors[rid]
            link = f'<a href="#{_escaped(anchor)}">{_escaped(rid)}</a>'
        elif rid in _DICT_NAMES:  # jinja reads the dict's attribute of that name
            link = f'<a href="#{escape(environment.getitem(anchors, rid))}">{escape(rid)}</a>'
        else:  # jinja's undefined: renders empty
            link = f'<a href="#">{_escaped(rid)}</a>'
        links.append(link)
        if len(links) == LINKS_PER_CHUNK:
            yield Markup(("" if first else ", ") + ", ".join(links))
            links, first = [], False
    if links:
        yield Markup(("" if first else ", ") + ", ".join(links))


#: the names jinja's ``anchors[rid]`` finds as an attribute of the dict when no key is ``rid``
_DICT_NAMES = frozenset(dir({}))
#: the characters :func:`markupsafe.escape` replaces
_ESCAPED = frozenset("&<>'\"")


def _escaped(text: str) -> str:
    """``escape(text)``'s text; ``text`` itself when it has nothing to escape (most rowIds and
    anchors: no markup object made per link)."""
    return text if _ESCAPED.isdisjoint(text) else escape(text)


def _anchor(row_id: str, taken: set[str]) -> str:
    """A unique element id for a row: ``row-`` and the rowId with unsafe characters as ``_``."""
    base = "row-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in row_id)
    anchor, n = base, 1
    while anchor in taken:
        n += 1
        anchor = f"{base}-{n}"
    taken.add(anchor)
    return anchor


def _case_texts(dialogue: dict[str, Any]) -> dict[str, str]:
    """Case-level requirement texts by ID, derived the way scoring derives them."""
    from rubric_engine.rubric.case_level import case_requirements

    found = case_requirements(
        tuple(dialogue.get("expectedBehavior") or ()), tuple(dialogue.get("negativeBehavior") or ())
    )
    return {req.id: req.text for req in found}


def flag_reasons(rows: list[dict[str, Any]], flag: str) -> list[tuple[str, str, int]]:
    """The violated red lines that raised ``flag`` in the drill-down's rows: ``(id, rule text,
    rows)``, most rows first, so each flag shows its own reason once rather than every row's
    whole explanation; empty when the judge reported the flag with no rule (an orphan)."""
    counts: dict[str, int] = {}
    texts: dict[str, str] = {}
    for row in rows:
        for e in row["basis"]:
            if e["status"] == "VIOLATED" and e.get("redFlagType") == flag:
                counts[e["id"]] = counts.get(e["id"], 0) + 1
                texts[e["id"]] = e["text"]
    ranked = sorted(counts, key=lambda rid: (-counts[rid], rid))
    return [(rid, texts[rid], counts[rid]) for rid in ranked]


def render_html(
    report: Report,
    rubric: EvalRubric,
    rows: list[tuple[RowResult, dict[str, Any]]],
    total_rows: int | None = None,
    review_url: str | None = None,
) -> str:
    """The self-contained HTML report (UTF-8 text); ``rows`` are the drill-down's rows with
    their dialogues (see :func:`drilldown_rows`), ``total_rows`` how many the task has. The
    judge-calibration section shows ``report.calibration`` unless it is missing (a rubric never
    calibrated keeps its report as it was). With ``review_url`` each drill-down row links to
    ``review_url`` + its rowId (the review app's page of the row; docs/review.md)."""
    return "".join(html_chunks(report, rubric, rows, total_rows, review_url))


def html_chunks(
    report: Report,
    rubric: EvalRubric,
    rows: list[tuple[RowResult, dict[str, Any]]],
    total_rows: int | None = None,
    review_url: str | None = None,
    trend_svgs: tuple[str, ...] = (),
    trend_left_out: list[str] | None = None,
) -> Iterator[str]:
    """:func:`render_html`'s text in the template's own chunks, for writing to a file without
    holding the page: a cluster lists every one of its rowIds, so the page grows with rows.
    ``trend_svgs``: charts of the task's name over its earlier tasks
    (:mod:`rubric_engine.report.render.trend_svg`, text escaped there); none leaves the page
    as it was. ``trend_left_out``: a line for each earlier task the charts leave out."""
    details = row_details(rubric, rows, report.totals.pass_score)
    by_id = {d["rowId"]: d for d in details}
    flags = [
        {
            "type": f.type,
            "text": f.text,
            "count": f.count,
            "examples": [by_id[i] for i in f.row_ids[:EXAMPLES_PER_FLAG] if i in by_id],
            "reasons": flag_reasons([by_id[i] for i in f.row_ids if i in by_id], f.type),
        }
        for f in report.red_flags
        if f.count
    ]
    environment = _environment()
    anchors = {d["rowId"]: d["anchor"] for d in details}
    template = environment.get_template("report.html.j2")
    return template.generate(
        report=report,
        task=report.task,
        totals=report.totals,
        flags=flags,
        clear_flags=[f.type for f in report.red_flags if not f.count],
        score_chart=score_chart(report),
        intent_chart=intent_chart(report, rubric),
        compliance_chart=compliance_chart(report),
        rows=details,
        total_rows=len(details) if total_rows is None else total_rows,
        anchors=anchors,
        row_links=lambda row_ids: _row_links(row_ids, anchors, environment),
        lang=rubric.language,
        calibration=shown_calibration(report),
        glossary=GLOSSARY,
        review_url=review_url,
        trend_svgs=[Markup(svg) for svg in trend_svgs],
        trend_left_out=trend_left_out or [],
    )
