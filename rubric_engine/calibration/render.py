"""Calibration results as JSON and a plain printed summary (pure string building); Markdown is
:mod:`.render_md`. Figures from fewer than :data:`~.correction.MIN_PAIRS` pairs are shown as
"too few", never as a point with a zero-width interval; IDs are in natural order (R2 before R10).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rubric_engine.calibration.correction import MIN_PAIRS
from rubric_engine.calibration.views import natural_key

__all__ = [
    "RENDERERS",
    "alt_test_lines",
    "render_calibration_json",
    "render_calibration_text",
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


def render_calibration_json(result: dict[str, Any], full: bool = True) -> str:
    """Indented JSON, keys in result order, one trailing newline."""
    return json.dumps(result, ensure_ascii=False, indent=2) + "\n"


def _overall_lines(result: dict[str, Any]) -> list[str]:
    o, i = result["overall"], result["overall"]["intervals95"]
    n = o["n"]
    lines = [
        f"pairs compared: {n} (TP {o['tp']}, FP {o['fp']}, FN {o['fn']}, TN {o['tn']}) "
        f"over {result['rows']['compared']} row(s); unmet (VIOLATED or PARTIAL) is positive",
        f"kappa {shown(o['kappa'], i.get('kappa'), n)}  accuracy {f(o['accuracy'])}"
        f"{ci(i['accuracy'])}",
        f"recall (TPR) {f(o['recallUnmet'])}{ci(i['recallUnmet'])}  TNR {f(o['tnr'])}"
        f"{ci(i['tnr'])}  precision {f(o['precisionUnmet'])}{ci(i['precisionUnmet'])}",
        f"F1 {shown(o['f1Unmet'], i.get('f1Unmet'), n)}  balanced accuracy "
        f"{f(o['balancedAccuracy'])}  MCC {f(o['mcc'])}",
    ]
    if n < MIN_PAIRS:
        lines.append(
            f"too few pairs ({n}) for kappa and F1: below {MIN_PAIRS} their intervals mean "
            "little; the rates' Wilson intervals above say how little is known"
        )
    return lines


def _flag_lines(result: dict[str, Any]) -> list[str]:
    flags = result["redFlags"]["overall"]
    if not result["redFlags"]["types"]:
        return ["red flags: neither side has a red flag on the compared rows"]
    lines = [
        f"red flags: recall {f(flags['recall'])}{ci(flags['recallInterval95'])}, precision "
        f"{f(flags['precision'])}{ci(flags['precisionInterval95'])} (TP {flags['tp']}, "
        f"missed {flags['fn']}, false {flags['fp']})"
    ]
    for entry in result["redFlags"]["types"]:
        if entry["fn"] or entry["fp"]:
            lines.append(
                f"  {entry['type']}: missed in {', '.join(entry['missedRows']) or '—'}; "
                f"false in {', '.join(entry['falseRows']) or '—'}"
            )
    return lines


def _alpha_lines(result: dict[str, Any]) -> list[str]:
    alpha = result["krippendorffAlpha"]
    if not alpha["reviewerCount"]:
        return []
    lines = [
        f"Krippendorff alpha: reviewers {f(alpha['reviewers'])}, with the judge "
        f"{f(alpha['withJudge'])} ({alpha['reviewerCount']} reviewer(s); adjudications not "
        "counted)"
    ]
    if alpha.get("adjudicatorCount"):
        lines.append(
            f"adjudicated: alpha {f(alpha['withAdjudication'])} counting the "
            f"{alpha['adjudicatorCount']} adjudicator(s) as raters (they saw the reviewers)"
        )
    return lines


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = _overall_lines(result) + _flag_lines(result)
    intents, scores, om = result["intentAgreement"], result["scores"], result["omission"]
    if intents["n"]:
        lines.append(f"intent accuracy {f(intents['accuracy'])} over {intents['n']} row(s)")
    if scores["n"]:
        lines.append(
            f"scores (n {scores['n']}): weighted kappa {f(scores['weightedKappa'])}, spearman "
            f"{f(scores['spearman'])}, pearson {f(scores['pearson'])}, kendall "
            f"{f(scores['kendall'])}, RMSE {f(scores['rmse'])}, judge bias "
            f"{f(scores['meanSignedBias'])}"
        )
    if om["rowsWithViolation"]:
        lines.append(
            f"omission: the judge listed nothing unmet in {om['omitted']} of "
            f"{om['rowsWithViolation']} row(s) where the reviewer found a violation"
        )
    rate = result["violationRate"]
    if rate["observed"] is not None:
        lines.append(
            f"violation rate: observed {f(rate['observed'])}, corrected for judge error "
            f"{f(rate['corrected'])}"
        )
    lines += _alpha_lines(result)
    if result.get("excluded"):
        lines.append("excluded: " + ", ".join(f"{k} {v}" for k, v in result["excluded"].items()))
    left = (result.get("labels") or {}).get("leftOut") or {}
    if left.get("labels"):
        lines.append(left_out_line(left))
    return lines


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


def render_calibration_text(result: dict[str, Any], full: bool = False) -> str:
    """The printed summary: overall figures, red flags first among the details, the least
    agreeing requirements by κ, the alternative annotator test, the plan when asked."""
    lines = summary_lines(result)
    disagree = [r for r in result["requirements"] if r["n"] and (r["fp"] or r["fn"])]
    worst = sorted(disagree, key=lambda r: (r["kappa"] if r["kappa"] is not None else 2.0,
                                             natural_key(r["id"])))[:8]  # fmt: skip
    if worst:
        lines.append("requirements (least agreement first, by kappa):")
        lines += [
            f"  {r['id']}: n {r['n']}{' (too few)' if r['n'] < MIN_PAIRS else ''}, kappa "
            f"{shown(r['kappa'], None, r['n'])}, recall {f(r['recallUnmet'])}, TNR {f(r['tnr'])}"
            for r in worst
        ]
    agreeing = sum(1 for r in result["requirements"] if r["n"] and not (r["fp"] or r["fn"]))
    if agreeing:
        lines.append(f"  {agreeing} requirement(s) with no disagreement")
    if "altTest" in result:
        lines += alt_test_lines(result["altTest"], full)
    lines += baseline_lines(result)
    lines += length_lines(result)
    if "plan" in result:
        lines.append(
            f"plan: labels for ±{result['plan']['halfWidth']} on TPR and TNR (95%), per "
            "requirement: needed / rows in the task / labelled"
        )
        for r in sorted(result["requirements"], key=lambda r: natural_key(r["id"])):
            plan = r["plan"]
            needed = plan["labelsNeeded"]
            note = " TOO RARE" + (" (never or always unmet here)" if needed is None else "")
            lines.append(
                f"  {r['id']}: {f(needed)} / {plan['available']} / {plan['labelled']}"
                + (note if plan["tooRare"] else "")
            )
    if result.get("judgeComparison"):
        lines += comparison_lines(result["judgeComparison"])
    if result.get("calibrationId"):
        lines.append(f"calibration id: {result['calibrationId']}")
    return "\n".join(lines) + "\n"


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


RENDERERS: dict[str, Callable[[dict[str, Any], bool], str]] = {
    "json": render_calibration_json,
    "text": render_calibration_text,
}


def _markdown(result: dict[str, Any], full: bool) -> str:
    from rubric_engine.calibration.render_md import render_calibration_markdown

    return render_calibration_markdown(result, full)


RENDERERS["md"] = _markdown
