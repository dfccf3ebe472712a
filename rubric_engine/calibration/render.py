"""Calibration results as JSON, Markdown and a plain printed summary (pure string building)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["render_calibration_json", "render_calibration_markdown", "render_calibration_text"]


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(interval: Any) -> str:
    return "" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def render_calibration_json(result: dict[str, Any]) -> str:
    """Indented JSON, keys in result order, one trailing newline."""
    return json.dumps(result, ensure_ascii=False, indent=2) + "\n"


def _summary_lines(result: dict[str, Any]) -> list[str]:
    o, ci = result["overall"], result["overall"]["intervals95"]
    flags = result["redFlags"]["overall"]
    lines = [
        f"pairs compared: {o['n']} (TP {o['tp']}, FP {o['fp']}, FN {o['fn']}, TN {o['tn']}) "
        f"over {result['rows']['compared']} row(s); unmet (VIOLATED or PARTIAL) is positive",
        f"kappa {_f(o['kappa'])}{_ci(ci.get('kappa'))}  accuracy {_f(o['accuracy'])}"
        f"{_ci(ci['accuracy'])}",
        f"recall (TPR) {_f(o['recallUnmet'])}{_ci(ci['recallUnmet'])}  TNR {_f(o['tnr'])}"
        f"{_ci(ci['tnr'])}  precision {_f(o['precisionUnmet'])}{_ci(ci['precisionUnmet'])}",
        f"F1 {_f(o['f1Unmet'])}{_ci(ci.get('f1Unmet'))}  balanced accuracy "
        f"{_f(o['balancedAccuracy'])}  MCC {_f(o['mcc'])}",
        f"red flags: recall {_f(flags['recall'])}{_ci(flags['recallInterval95'])}, precision "
        f"{_f(flags['precision'])}{_ci(flags['precisionInterval95'])} (TP {flags['tp']}, "
        f"missed {flags['fn']}, false {flags['fp']})",
    ]
    for entry in result["redFlags"]["types"]:
        if entry["fn"] or entry["fp"]:
            lines.append(
                f"  {entry['type']}: missed in {', '.join(entry['missedRows']) or '—'}; "
                f"false in {', '.join(entry['falseRows']) or '—'}"
            )
    intents, scores, om = result["intentAgreement"], result["scores"], result["omission"]
    if intents["n"]:
        lines.append(f"intent accuracy {_f(intents['accuracy'])} over {intents['n']} row(s)")
    if scores["n"]:
        lines.append(
            f"scores (n {scores['n']}): weighted kappa {_f(scores['weightedKappa'])}, spearman "
            f"{_f(scores['spearman'])}, pearson {_f(scores['pearson'])}, kendall "
            f"{_f(scores['kendall'])}, RMSE {_f(scores['rmse'])}, judge bias "
            f"{_f(scores['meanSignedBias'])}"
        )
    if om["rowsWithViolation"]:
        lines.append(
            f"omission: the judge listed nothing unmet in {om['omitted']} of "
            f"{om['rowsWithViolation']} row(s) where the reviewer found a violation"
        )
    rate = result["violationRate"]
    if rate["observed"] is not None:
        lines.append(
            f"violation rate: observed {_f(rate['observed'])}, corrected for judge error "
            f"{_f(rate['corrected'])}"
        )
    alpha = result["krippendorffAlpha"]
    if alpha["reviewerCount"]:
        lines.append(
            f"Krippendorff alpha: reviewers {_f(alpha['reviewers'])}, with the judge "
            f"{_f(alpha['withJudge'])} ({alpha['reviewerCount']} reviewer(s))"
        )
    if result.get("excluded"):
        lines.append("excluded: " + ", ".join(f"{k} {v}" for k, v in result["excluded"].items()))
    return lines


def render_calibration_text(result: dict[str, Any]) -> str:
    """The printed summary: overall figures, red flags first among the details, the worst
    requirements by κ, the plan when asked."""
    lines = _summary_lines(result)
    reqs = [r for r in result["requirements"] if r["n"]]
    worst = sorted(reqs, key=lambda r: (r["kappa"] is not None, r["kappa"] or 0))[:8]
    if worst:
        lines.append("requirements (least agreement first):")
        lines += [
            f"  {r['id']}: n {r['n']}, kappa {_f(r['kappa'])}, recall {_f(r['recallUnmet'])}, "
            f"TNR {_f(r['tnr'])}"
            for r in worst
        ]
    if "plan" in result:
        lines.append(
            f"plan: labels for ±{result['plan']['halfWidth']} on TPR and TNR (95%), per "
            "requirement: needed / rows in the task / labelled"
        )
        for r in result["requirements"]:
            plan = r["plan"]
            needed = plan["labelsNeeded"]
            note = " TOO RARE" + (" (never or always unmet here)" if needed is None else "")
            lines.append(
                f"  {r['id']}: {_f(needed)} / {plan['available']} / {plan['labelled']}"
                + (note if plan["tooRare"] else "")
            )
    if result.get("calibrationId"):
        lines.append(f"calibration id: {result['calibrationId']}")
    return "\n".join(lines) + "\n"


def render_calibration_markdown(result: dict[str, Any]) -> str:
    """A review page: the summary, then one table row per requirement and per red-flag type."""
    out = ["# Judge calibration", ""]
    if result.get("pinnedTo"):
        pin = result["pinnedTo"]
        out += [
            f"Task `{pin['taskId']}`, rubric `{pin['rubricKey']}@{pin['rubricVersion']}`, "
            f"prompt `{pin['promptVersion']}`, judge `{pin['model']}`.",
            "",
        ]
    out += [
        f"  - {line.strip()}" if line.startswith("  ") else f"- {line}"
        for line in _summary_lines(result)
    ]
    out += [
        "",
        "## Red flags",
        "",
        "| type | TP | missed | false | recall | precision |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for e in result["redFlags"]["types"]:
        out.append(
            f"| {e['type']} | {e['tp']} | {e['fn']} | {e['fp']} | {_f(e['recall'])} | "
            f"{_f(e['precision'])} |"
        )
    out += [
        "",
        "## Requirements",
        "",
        "| requirement | n | TP | FP | FN | TN | κ | recall | TNR | F1 | corrected rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labelled = [r for r in result["requirements"] if r["n"]]
    for r in labelled:
        out.append(
            f"| {r['id']} | {r['n']} | {r['tp']} | {r['fp']} | {r['fn']} | {r['tn']} | "
            f"{_f(r['kappa'])} | {_f(r['recallUnmet'])} | {_f(r['tnr'])} | {_f(r['f1Unmet'])} | "
            f"{_f(r['correctedViolationRate'])} |"
        )
    unlabelled = len(result["requirements"]) - len(labelled)
    if unlabelled:
        out += ["", f"{unlabelled} requirement(s) of the task have no compared label."]
    confusion = result["intentAgreement"]["confusion"]
    if confusion:
        keys = sorted({k for row in confusion.values() for k in row} | set(confusion))
        out += [
            "",
            "## Intents (rows: reviewer, columns: judge)",
            "",
            "| | " + " | ".join(keys) + " |",
            "|---|" + "---:|" * len(keys),
        ]
        for a in keys:
            out.append(
                f"| {a} | " + " | ".join(str(confusion.get(a, {}).get(b, 0)) for b in keys) + " |"
            )
    return "\n".join(out) + "\n"
