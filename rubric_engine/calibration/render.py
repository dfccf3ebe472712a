"""Calibration results as JSON and a plain printed summary (pure string building); Markdown is
:mod:`.render_md`, the lines both share :mod:`.render_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rubric_engine.calibration.correction import MIN_PAIRS
from rubric_engine.calibration.render_lines import (
    alt_test_lines,
    baseline_lines,
    ci,
    comparison_lines,
    f,
    left_out_line,
    length_lines,
    other_dialogue_line,
    sampling_lines,
    shown,
)
from rubric_engine.calibration.views import natural_key

__all__ = [
    "RENDERERS",
    "render_calibration_json",
    "render_calibration_text",
    "summary_lines",
]


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
    if n and not o["fp"] and not o["fn"]:
        lines.append(
            "every pair agrees: kappa's bootstrap has no disagreement to resample, so its "
            f"interval is a point; the rates' Wilson intervals say what {n} pair(s) can show. "
            "Labels made while seeing the judge's verdict can agree this way: compare with "
            "blind labels (`sawJudgeVerdict: false`)"
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
    chosen = result.get("labels") or {}
    if chosen.get("otherDialogue"):
        lines.append(other_dialogue_line(chosen["otherDialogue"]))
    unpinned = chosen.get("noDialoguePin")
    if unpinned:
        lines.append(
            f"{unpinned} label(s) used name no dialogue (stored before labels were pinned to "
            "theirs, or imported without --task): each applies to every task's row of its rowId"
        )
    return lines


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
    if len(disagree) > len(worst):
        lines.append(
            f"  … and {len(disagree) - len(worst)} more with a disagreement, higher kappa "
            "(--format md or json lists every requirement)"
        )
    agreeing = sum(1 for r in result["requirements"] if r["n"] and not (r["fp"] or r["fn"]))
    if agreeing:
        lines.append(f"  {agreeing} requirement(s) with no disagreement")
    if "altTest" in result:
        lines += alt_test_lines(result["altTest"], full)
    lines += baseline_lines(result)
    lines += length_lines(result)
    lines += sampling_lines(result)
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


RENDERERS: dict[str, Callable[[dict[str, Any], bool], str]] = {
    "json": render_calibration_json,
    "text": render_calibration_text,
}


def _markdown(result: dict[str, Any], full: bool) -> str:
    from rubric_engine.calibration.render_md import render_calibration_markdown

    return render_calibration_markdown(result, full)


RENDERERS["md"] = _markdown
