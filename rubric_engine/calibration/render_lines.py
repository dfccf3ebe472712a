"""The lines calibration's text and Markdown pages share (pure string building): figure
formatting, the alternative annotator test, the reviewers as the baseline, length and leniency,
judges side by side, labels left out. Figures are 3 decimals, ``—`` when undefined, "too few"
below :data:`~.correction.MIN_PAIRS` pairs (never a point with a zero-width interval); IDs in
natural order (R2 before R10).
"""

from __future__ import annotations

from typing import Any

from rubric_engine.calibration.correction import MIN_PAIRS
from rubric_engine.calibration.views import natural_key

__all__ = [
    "alt_test_lines",
    "baseline_lines",
    "ci",
    "comparison_lines",
    "f",
    "left_out_line",
    "length_lines",
    "other_dialogue_line",
    "requirement_verdict",
    "sampling_lines",
    "shown",
]


def f(value: Any, digits: int = 3) -> str:
    """A figure: 3 decimals, ``—`` when undefined."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def ci(interval: Any) -> str:
    return "" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def shown(value: Any, interval: Any, n: int) -> str:
    """A figure with its interval, or "too few" below the minimum of pairs."""
    if n < MIN_PAIRS:
        return f"too few (n {n})"
    return f(value) + ci(interval)


def left_out_line(left: dict[str, Any]) -> str:
    """Which labels a rubric change left out, named."""
    named = ", ".join(
        f"{rid} ({n})"
        for rid, n in sorted(left["requirements"].items(), key=lambda kv: natural_key(kv[0]))
    )
    parts = [
        f"{named}" if named else "",
        f"{left['rowLabels']} row label(s)" if left["rowLabels"] else "",
    ]
    return (
        f"left out: {left['labels']} label(s) of what changed since they were made: "
        + "; ".join(p for p in parts if p)
        + " (--include-changed uses them)"
    )


def other_dialogue_line(count: int) -> str:
    """Labels left out because they were made on another dialogue under the same rowId."""
    return (
        f"left out: {count} label(s) made on a different dialogue than this task's row of their "
        "rowId (a label applies to the dialogue it was made on; label this task's rows)"
    )


def _test_text(test: dict[str, Any]) -> str:
    if test["passed"] is None:
        return "too few instances"
    return (
        f"{'passed' if test['passed'] else 'failed'} (ω {f(test['winningRate'], 2)}, "
        f"ρ {f(test['advantageProbability'], 2)})"
    )


def alt_test_lines(alt: dict[str, Any], full: bool) -> list[str]:
    """The alternative annotator test: one summary line per field, the verdict over the
    requirements (the red lines named), warnings; per reviewer and requirement when ``full``."""
    n = len(alt["reviewers"])
    lines = [
        f"alternative annotator test (ε {alt['epsilon']:g}, Benjamini-Yekutieli q "
        f"{alt['fdrQ']:g}, {n} reviewer(s)): can the judge stand in for a reviewer?"
    ]
    lines += [f"  warning: {w}" for w in alt.get("warnings", ())]
    for field in ("status", "intent", "redFlags", "score"):
        if field in alt:
            lines.append(
                f"  {field}: {_test_text(alt[field])} over {alt[field]['instances']} instance(s)"
            )
    reqs = alt.get("status", {}).get("requirements", [])
    if reqs:
        lines.append("  " + requirement_verdict(reqs, alt["minInstances"]))
    skipped = sorted(
        {s["reviewer"] for field in ("status", "intent", "redFlags", "score") if field in alt
         for s in alt[field]["skipped"]}
    )  # fmt: skip
    if skipped:
        lines.append(
            f"  skipped (fewer than {alt['minInstances']} instances on some test): "
            + ", ".join(skipped)
        )
    if full:
        for field in ("status", "intent", "redFlags", "score"):
            for entry in alt.get(field, {}).get("reviewers", []):
                lines.append(
                    f"    {field} vs {entry['reviewer']}: n {entry['instances']}, p "
                    f"{'—' if entry['pValue'] is None else format(entry['pValue'], '.4g')}, "
                    f"{'rejected' if entry['rejected'] else 'not rejected'}"
                    f", judge at least as good on {f(entry['advantageProbability'], 2)}"
                )
        for req in reqs:
            lines.append(f"    {req['id']}: {_test_text(req)} over {req['instances']} instance(s)")
        for entry in alt.get("redFlags", {}).get("types", []):
            lines.append(f"    {entry['type']}: {_test_text(entry)} over {entry['instances']}")
    return lines


def requirement_verdict(reqs: list[dict[str, Any]], minimum: int) -> str:
    """ "the judge can stand in for a reviewer on 14 of 19 requirements; not on the red lines
    …; not on …; 3 with too few instances"."""
    tested = [r for r in reqs if r["passed"] is not None]
    failed = [r["id"] for r in tested if not r["passed"]]
    red = [rid for rid in failed if rid in set(_red_lines(reqs))]
    other = [rid for rid in failed if rid not in red]
    text = (
        f"the judge can stand in for a reviewer on {len(tested) - len(failed)} of "
        f"{len(tested)} requirement(s) tested"
    )
    if red:
        text += f"; not on the red lines {', '.join(red)}"
    if other:
        text += f"; not on {', '.join(other)}"
    few = len(reqs) - len(tested)
    if few:
        text += f"; {few} with too few instances (fewer than {minimum} per reviewer)"
    return text


def _red_lines(reqs: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in reqs if r.get("critical")]


def baseline_lines(result: dict[str, Any]) -> list[str]:
    """The reviewers as the baseline, per field: where the judge ranks among them."""
    base = result.get("reviewerBaseline") or {}
    lines = []
    for field in ("status", "intent", "redFlags", "score"):
        b = base.get(field)
        if not b or "judgeRank" not in b:
            continue
        mine = ", ".join(f"{r['reviewer']} {f(r['agreement'])}" for r in b["reviewers"])
        lines.append(
            f"reviewers as the baseline, {field}: judge {f(b['judgeAgreement'])} vs {mine}; "
            f"rank {b['judgeRank']} of {b['raters']}, "
            + ("within" if b["withinReviewers"] else "outside")
            + " the reviewers' own disagreement"
        )
    outside = [
        r["id"] for r in base.get("status", {}).get("requirements", []) if not r["withinReviewers"]
    ]
    if outside:
        lines.append(
            "  outside the reviewers' own disagreement on: "
            + ", ".join(sorted(outside, key=natural_key))
        )
    return lines


def length_lines(result: dict[str, Any]) -> list[str]:
    """Length and leniency: false "met" by answer-length quartile, score–length correlation."""
    found = result.get("lengthLeniency")
    if not found:
        return []
    lines = ["length and leniency: false 'met' (judge / reviewers) by answer-length quartile"]
    for q in found["quartiles"]:
        reviewers = (
            f", reviewers {f(q['reviewersFalseMet'])} of {q['reviewersUnmetLabels']}"
            if q["reviewersUnmetLabels"]
            else ""
        )
        lines.append(
            f"  Q{q['quartile']} ({q['fromChars']}-{q['toChars']} chars, {q['rows']} row(s)): "
            f"judge {f(q['judgeFalseMet'])} of {q['judgeUnmetLabels']} unmet label(s){reviewers}"
        )
    corr = found["scoreLength"]
    if corr["judge"]["n"] or corr["reviewers"]["n"]:
        lines.append(
            f"  score-length spearman: judge {f(corr['judge']['spearman'])} (n "
            f"{corr['judge']['n']}), reviewers {f(corr['reviewers']['spearman'])} (n "
            f"{corr['reviewers']['n']})"
        )
    return lines


def comparison_lines(comparison: dict[str, Any]) -> list[str]:
    """Judges side by side: the advantage probability ρ of each on every field's test."""
    judges = comparison["judges"]
    lines = ["judges side by side (advantage probability ρ; higher is better):"]
    for name, by in comparison["tests"].items():
        if ":" in name:
            continue
        cells = ", ".join(f"{j} {f(by.get(j, {}).get('advantageProbability'), 2)}" for j in judges)
        lines.append(f"  {name}: {cells}; highest {comparison['highestAdvantage'][name] or '—'}")
    return lines


def _signed(value: Any) -> str:
    return "—" if value is None else f"{value:+.3f}"


def sampling_lines(result: dict[str, Any]) -> list[str]:
    """A sampled task: the aggregate's figures beside sample 1's (docs/stability.md)."""
    sampling = result.get("sampling")
    if not sampling:
        return []
    lines = [
        f"does sampling buy agreement? the aggregate vs sample 1 alone, against the same "
        f"reviewers ({sampling['sampledRows']} labelled row(s) sampled; pairs "
        f"{sampling['pairs']['aggregate']} vs {sampling['pairs']['sample1']}):"
    ]
    width = max(len(fig["name"]) for fig in sampling["figures"])
    for fig in sampling["figures"]:
        better = f", {fig['better']} better" if fig["better"] else ""
        lines.append(
            f"  {fig['name'].ljust(width)}  {f(fig['aggregate'])} vs {f(fig['sample1'])} "
            f"({_signed(fig['difference'])}{better})"
        )
    return lines
