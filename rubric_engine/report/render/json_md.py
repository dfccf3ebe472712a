"""Render a typed report as JSON (machines) or Markdown (review). Pure string building.

``report.json`` is the task's rows alone; Markdown adds the judge-calibration section when the
edge attached a current or stale one (:func:`rubric_engine.report.stored.with_calibration`)."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

from rubric_engine.report import row_ids
from rubric_engine.report.calibration import shown_calibration
from rubric_engine.report.glossary import GLOSSARY
from rubric_engine.report.model import (
    CalibrationSection,
    CappedItems,
    Diff,
    IssueCluster,
    PanelSection,
    Report,
    RulesSection,
    Slice,
    StabilitySection,
    TaskSection,
)

EXAMPLE_ROWS = 5


def render_json(report: Report | Diff) -> str:
    """Indented UTF-8 JSON with a final newline; keys in the model's field order."""
    return report.to_json()


def json_chunks(report: Report) -> Iterator[str]:
    """:func:`render_json`'s text in chunks, for writing a large report (its clusters list
    every low row's id) without building the whole string, its chunk list or a ``str`` per
    listed rowId (:meth:`~rubric_engine.report.model.Report.json_tree`)."""
    yield from row_ids.json_chunks(report.json_tree())
    yield "\n"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None) -> str:
    """A 0–1 figure of the report (already rounded to 4 places) as a percentage with the same
    precision: rounded once, so 1 of 26 (0.0385) reads 3.85%, never a re-rounded 3.9%."""
    return "–" if value is None else f"{value * 100:.2f}%"


def _cell(text: Any) -> str:
    """Text for a Markdown line or table cell: ``|`` escaped, one line, and HTML-like text
    (``<questions>``) escaped so GitHub shows it instead of swallowing it as a tag."""
    return (
        html.escape(str(text if text is not None else ""), quote=False)
        .replace("|", "\\|")
        .replace("\n", " ")
    )


def _row_id(row_id: str) -> str:
    """A rowId in running text: as code (`` `medgpt-1` ``) when it is plain, else escaped like
    a cell (a backtick would end the code span; ``<``, ``&`` and ``|`` are escaped)."""
    if any(c in row_id for c in "`<>&|"):
        return _cell(row_id)
    return f"`{row_id}`"


def _turns(turns: tuple[int, ...]) -> str:
    return f"turn{'s' if len(turns) > 1 else ''} {', '.join(map(str, turns))}"


def _evidence_lines(report: Report) -> list[str]:
    """The judge's evidence turns of the lowest rows (``judge_v3``); nothing without any."""
    if not any(low.evidence_turns for low in report.lowest_rows):
        return []
    out = [
        "",
        "Evidence turns the judge named for the lowest rows' unmet and partial requirements "
        "(turns numbered from 0, as in the judge's `judge_v3` prompt and the review page):",
        "",
    ]
    for low in report.lowest_rows:
        turns = low.evidence_turns or {}
        named = [
            f"{rid} {status} ({_turns(turns[rid])})"
            for ids, status in (
                (low.violated_requirement_ids, "VIOLATED"),
                (low.partial_requirement_ids, "PARTIAL"),
            )
            for rid in ids
            if rid in turns
        ]
        if named:
            out.append(f"- {_row_id(low.row_id)}: " + "; ".join(named))
    return out


def render_markdown(report: Report) -> str:
    """Review report: red flags first, then totals, intents, requirements, lowest rows."""
    task, totals = report.task, report.totals
    draft = " — a draft, not a published version" if task.rubric_status == "DRAFT" else ""
    out = [
        f"# rubric-eval report — task {task.id}",
        "",
        f"- Rubric: `{task.rubric_key}` v{task.rubric_version} ({task.rubric_status})"
        f"{draft}, hash `{task.rubric_hash[:19]}…`",
        f"- Prompt: `{task.prompt_version}` `{task.prompt_hash[:19]}…`; engine "
        f"{task.engine_version} ({task.analysis_version})",
        f"- Judge: `{task.model}`, mode {task.judge_mode}"
        + (f", cassettes: {_provenance(task.cassettes)}" if task.cassettes else "")
        + _output_form(task.output_form),
        *_answers(task),
        f"- Rows: {totals.rows} · scored {totals.scored} · JUDGE_ERROR "
        f"{totals.judge_errors} · mean score {_fmt(totals.mean_score)} "
        f"(judge's own {_fmt(totals.mean_judge_score)}; {totals.capped_rows} capped)",
        f"- Pass rate: {_pct(totals.pass_rate)} ({totals.passed_rows} of {totals.scored} "
        f"scored rows have no red flag and a final score ≥ {totals.pass_score})",
        "",
    ]
    if task.state != "COMPLETED":
        out += [
            f"**State: {task.state}** — {totals.rows} of {task.planned_rows} "
            "planned rows were judged; this report covers those rows only."
            + (_unfinished(task.id) if task.state == "RUNNING" else ""),
            "",
        ]
    out += ["## Red flags", ""]
    flagged = [f for f in report.red_flags if f.count]
    if flagged:
        out += ["| type | rows | example rows | meaning |", "|---|---:|---|---|"]
        for f in flagged:
            examples = ", ".join(map(_cell, f.row_ids[:EXAMPLE_ROWS])) + (
                " …" if f.count > EXAMPLE_ROWS else ""
            )
            out.append(f"| **{f.type}** | {f.count} | {examples} | {_cell(f.text)} |")
    else:
        out.append("No red flags in scored rows.")
    clear = [f.type for f in report.red_flags if not f.count]
    if clear:
        out += ["", f"Not seen: {', '.join(clear)}."]
    out += ["", "## Score distribution", "", "| score | rows |", "|---:|---:|"]
    out += [f"| {s} | {n} |" for s, n in totals.score_distribution.items()]
    out += [
        "",
        "Verdicts: " + ", ".join(f"{v} {n}" for v, n in totals.outcome_distribution.items()),
    ]
    out += [
        "",
        "## Per intent",
        "",
        "| intent | rows | mean score | pass rate | red flags |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {i.intent_key} ({_cell(i.name)}) | {i.rows} | {_fmt(i.mean_score)} | "
        f"{_pct(i.pass_rate)} | {i.red_flag_count} |"
        for i in report.intents
    ]
    out += [
        "",
        "## Per requirement",
        "",
        "| requirement | intent | category | followed | partial | violated | n/a | compliance |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report.requirements:
        name = f"**{r.id}**" if r.critical else r.id
        if r.category == "CASE" and r.text:  # a hash ID says nothing by itself
            text = " ".join(str(r.text).split())
            name += f" — {_cell(text[:80] + ('…' if len(text) > 80 else ''))}"
        out.append(
            f"| {name} | {r.intent_key or 'common' if r.category != 'CASE' else 'case'}"
            f" | {r.category} | {r.followed} | {r.partial} | {r.violated} | "
            f"{r.not_applicable} | {_pct(r.compliance)} |"
        )
    out += [
        "",
        "Bold requirements are red lines. Compliance = followed / (followed + partial + "
        "violated); not-applicable and JUDGE_ERROR rows are outside the denominator.",
        "",
    ]
    if report.stability is not None:
        out += _stability_section(report.stability)
    if report.panel is not None:
        out += _panel_section(report.panel)
    for cut in report.slices or ():
        out += _slice(cut)
    out += _clusters(report.issue_clusters)
    if report.rules is not None:
        out += _rules_section(report.rules)
    out += [
        "## Lowest-scoring rows",
        "",
        "| row | final | judge | intent | violated | red flags | capped by |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for low in report.lowest_rows:
        out.append(
            f"| {_cell(low.row_id)} | {low.final_score} | {low.judge_score} | {low.intent_key} | "
            f"{', '.join(low.violated_requirement_ids) or '–'} | "
            f"{', '.join(low.red_flag_types) or '–'} | {', '.join(low.capped_by) or '–'} |"
        )
    out += _evidence_lines(report)
    out += ["", f"## JUDGE_ERROR rows ({totals.judge_errors})", ""]
    if totals.judge_errors_by_kind:
        out += [
            "By kind: " + ", ".join(f"{k} {n}" for k, n in totals.judge_errors_by_kind.items()),
            "",
        ]
    if report.judge_errors:
        out += [f"- {_row_id(e.row_id)} {e.kind}: {_cell(e.message)}" for e in report.judge_errors]
    else:
        out.append("None.")
    out += ["", "## Protocol warnings", ""]
    if report.warnings:
        out += ["| code | count |", "|---|---:|"]
        out += [f"| {code} | {n} |" for code, n in report.warnings.items()]
    else:
        out.append("None.")
    usage, agent = report.usage, report.agent
    out += [
        "",
        "## Agent",
        "",
        f"- Tool calls: {agent.tool_calls_total} ({_fmt(agent.tool_calls_mean)} per row)",
        f"- Duration: mean {_fmt(agent.duration_ms_mean, 1)} ms over "
        f"{agent.rows_with_duration} row(s) whose trace records it",
        "",
        "## Judge usage",
        "",
        f"- Judge calls: {usage.calls} (re-asks and failed attempts included)",
        f"- Tokens: {usage.prompt_tokens} prompt, {usage.completion_tokens} completion"
        + (f" ({usage.reasoning_tokens} of it reasoning)" if usage.reasoning_tokens else ""),
        *([f"- Prompt tokens: {usage.cache_line}"] if usage.cache_line else []),
        f"- Cost: {_cost(usage.cost_usd)}",
        f"- Latency per row: mean {_fmt(usage.latency_ms_mean, 1)} ms, "
        f"p95 {_fmt(usage.latency_ms_p95, 1)} ms"
        + (
            " (recorded with the cassettes; authored answers have none)"
            if report.task.latency == "recorded"
            else ""
        ),
        "",
    ]
    text = "\n".join(out) + "\n"
    section = shown_calibration(report)
    if section is not None:  # after the report's figures, before the glossary
        text += _calibration(section) + "\n"
    glossary = ["## Glossary", "", *(f"- **{term}**: {meaning}" for term, meaning in GLOSSARY), ""]
    return text + "\n".join(glossary) + "\n"


def _calibration(section: CalibrationSection) -> str:
    """The judge-calibration section, after the report (a rubric never calibrated has none)."""
    out = ["", "## Judge calibration", "", f"**{section.state}**: {section.reason}"]
    if section.figures:
        out += ["", "| figure | value | 95% interval |", "|---|---:|---|"]
        for f in section.figures:
            shown = (
                "—"
                if f.value is None
                else (str(int(f.value)) if f.name == "calibration.n" else f"{f.value:.3f}")
            )
            interval = f" [{f.interval[0]:.3f}, {f.interval[1]:.3f}]" if f.interval else " —"
            out.append(f"| {f.label} | {shown} |{interval} |")
    return "\n".join(out) + "\n"


def _slice(cut: Slice) -> list[str]:
    out = [
        f"## By {cut.by}",
        "",
        "| group | rows | scored | mean | pass rate | red-flag rows | compliance "
        "| least followed |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for g in cut.groups:
        judged = [(r, r.compliance) for r in g.requirements if r.compliance is not None]
        worst = sorted(judged, key=lambda rc: (rc[1], -rc[0].violated, rc[0].id))[:3]
        out.append(
            f"| {_cell(g.value)} | {g.rows} | {g.scored} | {_fmt(g.mean_score)} | "
            f"{_pct(g.pass_rate)} | {g.red_flag_rows} | {_pct(g.compliance)} | "
            + (", ".join(f"{r.id} {_pct(c)}" for r, c in worst if c < 1) or "–")
            + " |"
        )
    return [*out, ""]


def _clusters(clusters: tuple[IssueCluster, ...]) -> list[str]:
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
        lead = c.lead_requirement_id or "(no violated requirement)"
        lead = f"**{lead}**" if c.critical else lead
        also = ", ".join(f"{o.id} ×{o.rows}" for o in c.co_violated[:4]) or "–"
        out.append(
            f"| {c.rank} | {lead}{': ' + _cell(c.text) if c.text else ''} | {c.size} | "
            f"{_fmt(c.mean_score)} | {_pct(c.red_flag_share)} | {also} | "
            f"{', '.join(map(_cell, c.example_row_ids))} |"
        )
    return [*out, ""]


def _stability_section(st: StabilitySection) -> list[str]:
    """Whether asking again gave the same answer (docs/stability.md)."""
    out = [
        "## Stability",
        "",
        f"- Sampled rows: {st.sampled_rows} ({st.samples} samples) · unstable "
        f"{st.unstable_rows} ({_pct(st.unstable_rate)}) · failed a sample "
        f"{st.rows_with_failed_sample}",
        f"- Requirement flip rate: {_pct(st.flip_rate)} · Fleiss' κ across samples: "
        f"{_fmt(st.kappa, 4)} · red lines split: {st.red_flag_splits} · intents split: "
        f"{st.intent_splits}",
        "",
    ]
    if st.requirements:
        out += ["| requirement | rows | flipped | flip rate |", "|---|---:|---:|---:|"]
        out += [
            f"| {r.requirement_id} | {r.rows} | {r.flips} | {_pct(r.flip_rate)} |"
            for r in st.requirements
        ]
        out.append("")
    if st.unstable:
        out += [
            "| unstable row | final | samples' scores | why | flipped |",
            "|---|---:|---|---|---|",
        ]
        out += [
            f"| {_cell(u.row_id)} | {_fmt(u.final_score)} | "
            f"{', '.join(_fmt(s) for s in u.scores)} | {', '.join(u.reasons)} | "
            f"{', '.join(u.flips) or '–'} |"
            for u in st.unstable
        ]
        out.append("")
    return out


def _panel_section(panel: PanelSection) -> list[str]:
    """How far a panel's judges agreed (docs/panels.md)."""
    out = [
        "## Judge panel",
        "",
        f"- Rows judged by every judge: {panel.rows} · requirement statuses all judges "
        f"agreed on: {_pct(panel.agreement)}",
        "",
        "| judge | model | rows | mean final score |",
        "|---:|---|---:|---:|",
    ]
    out += [
        f"| {j.judge} | {_cell(j.model or '–')} | {j.rows} | {_fmt(j.mean_final_score)} |"
        for j in panel.judges
    ]
    out += [
        "",
        "| judges | statuses compared | agreement | Cohen's κ | same final score |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {_cell(p.judges[0])} vs {_cell(p.judges[1])} | {p.items} | {_pct(p.agreement)} | "
        f"{_fmt(p.kappa, 4)} | {_pct(p.same_score)} |"
        for p in panel.pairs
    ]
    split = [r for r in panel.requirements if r.agreement < 1]
    if split:
        out += ["", "| requirement | rows | judges agree |", "|---|---:|---:|"]
        out += [f"| {r.requirement_id} | {r.rows} | {_pct(r.agreement)} |" for r in split]
    others = len(panel.requirements) - len(split)
    out += [
        "",
        f"Every judge gave the same status on every row to the other {others} requirement(s) "
        "(report.json lists each).",
    ]
    return [*out, ""]


def _rules_section(rules: RulesSection) -> list[str]:
    """The diagnosis report: pass rate, verdicts, and each failed case's failedChecks."""
    verdicts = ", ".join(f"{v} {n}" for v, n in rules.verdict_distribution.items())
    out = [
        "## Rule checks",
        "",
        f"- Cases: {rules.total_cases} · passed {rules.passed_cases} ({_pct(rules.pass_rate)})",
        f"- Verifier verdicts: {verdicts}",
        f"- Average tool calls: {_fmt(rules.average_tool_call_count)} · average duration: "
        f"{_fmt(rules.average_duration_ms, 1)} ms",
        "",
    ]
    failed = [r for r in rules.results if not r.passed]
    if failed:
        out += ["| case | failed checks | evidence coverage |", "|---|---|---|"]
        for r in failed:
            coverage = ", ".join(
                f"{_cell(tool)} {'✓' if ok else '✗'}" for tool, ok in r.evidence_coverage.items()
            )
            checks = "<br>".join(_cell(c) for c in r.failed_checks)
            out.append(f"| {_cell(r.case_id)} | {checks} | {coverage or '–'} |")
        out.append("")
    return out


def _output_form(form: dict[str, Any] | None) -> str:
    """``, output mode schema (json_object+schema; json_schema refused: …)`` or ``""``."""
    if not form:
        return ""
    refused = form.get("refused") or {}
    why = f"; {refused.get('form')} refused: {refused.get('error')}" if refused else ""
    used = f" ({form.get('form')}{why})" if form.get("form") else ""
    return f", output mode {form.get('mode')}{used}"


def _cost(cost: float | None) -> str:
    if cost is None:
        return "not known (replayed calls, or a model without a published price)"
    return f"${cost:.4f}"


def _answers(task: TaskSection) -> list[str]:
    """Where the answers came from, so a replay is never mistaken for a model's run."""
    if task.judge_mode != "replay":
        return []
    lines = [
        f"- Answers: replayed from cassettes, not from a call to `{task.model}` (the model the "
        "entries are keyed for)"
    ]
    for source in task.answer_sources or ():
        if source.get("kind") == "recorded":
            lines.append(
                f"  - {source['rows']} row(s) recorded from `{source['by']}` at {source['at']}"
            )
        else:
            lines.append(
                f"  - {source['rows']} row(s) {source['kind']} by {source['by']}: "
                f"{source.get('method', '')}"
            )
    return lines


def _unfinished(task_id: str) -> str:
    """What a RUNNING task's report adds: the state is the store's when the report was made,
    and a run killed before it could say so stays RUNNING until resumed."""
    return (
        " Unless a run is still judging it, the run was interrupted: "
        f"`rubric-eval score --resume {task_id}` judges the rest."
    )


def _provenance(counts: dict[str, int] | None) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


def render_diff_markdown(diff: Diff) -> str:
    """Review text of a baseline diff: summary, rubric note, then regressions first."""
    rubric = diff.rubric_comparison
    result = "**REGRESSION**" if diff.has_regression else "no regression"
    out = [
        f"# rubric-eval diff — baseline {diff.baseline_task_id} → current {diff.current_task_id}",
        "",
        f"- Result: {result} · {diff.regression_count} regression(s), "
        f"{diff.improvement_count} improvement(s), {diff.changed_count} change(s)",
        f"- Rows: {diff.baseline_total_cases} → {diff.current_total_cases}; passed "
        f"{diff.baseline_passed_cases} → {diff.current_passed_cases}; pass rate "
        f"{_pct(diff.baseline_pass_rate)} → {_pct(diff.current_pass_rate)}",
        f"- Rubric: {rubric.note}",
    ]
    if diff.capped is not None:
        out.append(f"- Listed: {capped_note(diff.capped)}")
    if not rubric.same_rubric:
        for side, ids in (
            ("onlyInBaseline", rubric.only_in_baseline),
            ("onlyInCurrent", rubric.only_in_current),
        ):
            if ids:
                out.append(f"  - {side}: {', '.join(ids)}")
    for kind, title in (
        ("REGRESSION", "Regressions"),
        ("IMPROVEMENT", "Improvements"),
        ("CHANGED", "Changed"),
    ):
        items = [i for i in diff.items if i.type == kind]
        found = {"REGRESSION": diff.regression_count, "IMPROVEMENT": diff.improvement_count}
        total = found.get(kind, diff.changed_count)
        heading = f"{total:,}; {len(items):,} listed" if total != len(items) else f"{len(items)}"
        out += ["", f"## {title} ({heading})", ""]
        if not items:
            out.append("None.")
            continue
        out += ["| scope | case | metric | baseline | current | delta | message |"]
        out += ["|---|---|---|---|---|---:|---|"]
        out += [
            f"| {i.scope} | {_cell(i.case_id) or '–'} | {_cell(i.metric)} | "
            f"{_cell(_value(i.baseline_value))} | {_cell(_value(i.current_value))} | "
            f"{_fmt(i.delta, 4)} | {_cell(i.message)} |"
            for i in items
        ]
    return "\n".join(out) + "\n"


def capped_note(capped: CappedItems) -> str:
    """What a capped diff lists and where the rest is (docs/scale.md)."""
    where = (
        f"every item is in {capped.items_file}"
        if capped.items_file
        else "pass --out FILE to write every item beside it (FILE.items.jsonl), or "
        "--max-items 0 to list them all"
    )
    return (
        f"the {capped.listed:,} most important of {capped.case_items:,} case items (regressions "
        f"first, then the larger changes), in row order; {where}"
    )


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)
