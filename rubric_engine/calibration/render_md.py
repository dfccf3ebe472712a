"""Calibration results as a Markdown review page (pure string building): the summary, then
tables per requirement (with 95% intervals), per red-flag type (when either side has flags),
the alternative annotator test and the reviewers as the baseline. IDs in natural order."""

from __future__ import annotations

from typing import Any

from rubric_engine.calibration.correction import MIN_PAIRS
from rubric_engine.calibration.render import summary_lines
from rubric_engine.calibration.render_lines import (
    alt_test_lines,
    baseline_lines,
    comparison_lines,
    f,
    length_lines,
)
from rubric_engine.calibration.views import natural_key

__all__ = ["render_calibration_markdown"]


def _bullets(lines: list[str]) -> list[str]:
    return [f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in lines]


def _with_ci(value: Any, interval: Any, n: int | None = None) -> str:
    """A figure and its interval; "too few" for a bootstrap figure below the minimum."""
    if n is not None and n < MIN_PAIRS:
        return "too few"
    if value is None:
        return "—"
    return f(value) + ("" if not interval else f" [{interval[0]:.2f}, {interval[1]:.2f}]")


def _flags(result: dict[str, Any]) -> list[str]:
    types = result["redFlags"]["types"]
    if not types:
        return []
    out = [
        "",
        "## Red flags",
        "",
        "| type | TP | missed | false | recall | precision |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for e in types:
        out.append(
            f"| {e['type']} | {e['tp']} | {e['fn']} | {e['fp']} | {f(e['recall'])} | "
            f"{f(e['precision'])} |"
        )
    return out


def _requirements(result: dict[str, Any]) -> list[str]:
    out = [
        "",
        "## Requirements",
        "",
        f'κ (bootstrap), recall and TNR (Wilson) with their 95% intervals; κ is "too few" '
        f"below {MIN_PAIRS} pairs.",
        "",
        "| requirement | n | TP | FP | FN | TN | κ | recall | TNR | F1 | corrected rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labelled = sorted(
        (r for r in result["requirements"] if r["n"]), key=lambda r: natural_key(r["id"])
    )
    for r in labelled:
        ci = r["intervals95"]
        out.append(
            f"| {r['id']} | {r['n']} | {r['tp']} | {r['fp']} | {r['fn']} | {r['tn']} | "
            f"{_with_ci(r['kappa'], ci.get('kappa'), r['n'])} | "
            f"{_with_ci(r['recallUnmet'], ci['recallUnmet'])} | "
            f"{_with_ci(r['tnr'], ci['tnr'])} | {f(r['f1Unmet'])} | "
            f"{f(r['correctedViolationRate'])} |"
        )
    unlabelled = len(result["requirements"]) - len(labelled)
    if unlabelled:
        out += ["", f"{unlabelled} requirement(s) of the task have no compared label."]
    return out


def _alt_table(alt: dict[str, Any]) -> list[str]:
    out = [
        "",
        "## Can the judge stand in for a reviewer? (alternative annotator test)",
        "",
        *_bullets(alt_test_lines(alt, full=False)),
        "",
        "| test | instances | ω | ρ | passed |",
        "|---|---:|---:|---:|---|",
    ]
    rows = [(name, alt[name]) for name in ("status", "intent", "redFlags", "score") if name in alt]
    rows += [(r["id"], r) for r in alt.get("status", {}).get("requirements", [])]
    rows += [(t["type"], t) for t in alt.get("redFlags", {}).get("types", [])]
    for name, test in rows:
        passed = "too few" if test["passed"] is None else ("yes" if test["passed"] else "no")
        out.append(
            f"| {name} | {test['instances']} | {f(test['winningRate'], 2)} | "
            f"{f(test['advantageProbability'], 2)} | {passed} |"
        )
    return out


def _intents(result: dict[str, Any]) -> list[str]:
    confusion = result["intentAgreement"]["confusion"]
    if not confusion:
        return []
    keys = sorted({k for row in confusion.values() for k in row} | set(confusion), key=natural_key)
    out = [
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
    return out


def render_calibration_markdown(result: dict[str, Any], full: bool = False) -> str:
    """A review page: the summary, then tables per red-flag type (when there are flags), per
    requirement, for the alternative annotator test and per intent."""
    out = ["# Judge calibration", ""]
    if result.get("pinnedTo"):
        pin = result["pinnedTo"]
        out += [
            f"Task `{pin['taskId']}`, rubric `{pin['rubricKey']}@{pin['rubricVersion']}`, "
            f"prompt `{pin['promptVersion']}`, judge `{pin['model']}`.",
            "",
        ]
    out += _bullets(summary_lines(result))
    out += _flags(result)
    out += _requirements(result)
    if "altTest" in result:
        out += _alt_table(result["altTest"])
    extra = baseline_lines(result) + length_lines(result)
    if result.get("judgeComparison"):
        extra += comparison_lines(result["judgeComparison"])
    if extra:
        out += ["", "## Reviewers as the baseline, length and leniency", "", *_bullets(extra)]
    out += _sampling(result)
    out += _intents(result)
    return "\n".join(out) + "\n"


def _sampling(result: dict[str, Any]) -> list[str]:
    """A sampled task's aggregate beside sample 1 alone (docs/stability.md)."""
    sampling = result.get("sampling")
    if not sampling:
        return []
    out = [
        "",
        "## Does sampling buy agreement?",
        "",
        f"The aggregate of the samples against sample 1 alone, each against the same reviewers "
        f"({sampling['sampledRows']} labelled row(s) sampled; the other rows are the same on "
        "both sides).",
        "",
        "| figure | aggregate | sample 1 | difference | better |",
        "|---|---:|---:|---:|---|",
    ]
    for fig in sampling["figures"]:
        diff = "—" if fig["difference"] is None else f"{fig['difference']:+.3f}"
        out.append(
            f"| {fig['name']} | {f(fig['aggregate'])} | {f(fig['sample1'])} | {diff} | "
            f"{fig['better'] or '–'} |"
        )
    return out
