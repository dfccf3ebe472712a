"""Calibration figures as flat gate metrics (pure): ``calibration.kappa``,
``calibration.redFlagRecall.lower95``, ``calibration.requirements.<ID>.recallUnmet.lower95``, ….

One flat name → number mapping so the gate reads calibration like any other metric (through
``calibration.<METRIC>`` of the one metric table, :mod:`rubric_engine.report.metrics`). An
interval adds ``.lower95`` and ``.upper95``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALT_TEST_FIGURES", "BINARY_METRICS", "flat_metrics"]

#: the figures of every binary block, in report order
BINARY_METRICS = (
    "n", "accuracy", "precisionUnmet", "recallUnmet", "tnr", "f1Unmet", "balancedAccuracy",
    "mcc", "kappa",
)  # fmt: skip


def _put(out: dict[str, float], name: str, value: Any, interval: Any = None) -> None:
    if value is not None:
        out[name] = float(value)
    if interval is not None:
        out[f"{name}.lower95"], out[f"{name}.upper95"] = float(interval[0]), float(interval[1])


def _binary(out: dict[str, float], prefix: str, block: dict[str, Any]) -> None:
    for name in BINARY_METRICS:
        _put(out, f"{prefix}{name}", block.get(name), block.get("intervals95", {}).get(name))


def flat_metrics(result: dict[str, Any]) -> dict[str, float]:
    """Every gate metric of a calibration result (:func:`~.compare.calibrate_views`).

    Figures without a value (undefined) are absent, so a gate on them fails with "no value".
    """
    out: dict[str, float] = {}
    _binary(out, "calibration.", result["overall"])
    for req in result["requirements"]:
        _binary(out, f"calibration.requirements.{req['id']}.", req)
    flags = result["redFlags"]["overall"]
    _put(out, "calibration.redFlagRecall", flags["recall"], flags["recallInterval95"])
    _put(out, "calibration.redFlagPrecision", flags["precision"], flags["precisionInterval95"])
    for entry in result["redFlags"]["types"]:
        t = entry["type"]
        _put(out, f"calibration.redFlagRecall.{t}", entry["recall"], entry["recallInterval95"])
        _put(
            out,
            f"calibration.redFlagPrecision.{t}",
            entry["precision"],
            entry["precisionInterval95"],
        )
    intents = result["intentAgreement"]
    _put(out, "calibration.intentAccuracy", intents["accuracy"], intents["accuracyInterval95"])
    scores = result["scores"]
    for key, name in (
        ("weightedKappa", "scoreWeightedKappa"),
        ("spearman", "scoreSpearman"),
        ("pearson", "scorePearson"),
        ("rmse", "scoreRmse"),
        ("meanSignedBias", "scoreBias"),
    ):
        _put(out, f"calibration.{name}", scores[key])
    omission = result["omission"]
    _put(out, "calibration.omissionRate", omission["rate"], omission["interval95"])
    _put(out, "calibration.correctedViolationRate", result["violationRate"]["corrected"])
    alpha = result["krippendorffAlpha"]
    _put(out, "calibration.alpha.reviewers", alpha["reviewers"])
    _put(out, "calibration.alpha.withJudge", alpha["withJudge"])
    _put(out, "calibration.alpha.withAdjudication", alpha.get("withAdjudication"))
    if "altTest" in result:
        _alt_test(out, result["altTest"])
    return out


#: the figures of each alt-test in the gate's names
ALT_TEST_FIGURES = ("passed", "winningRate", "advantageProbability")


def _alt_test(out: dict[str, float], alt: dict[str, Any]) -> None:
    """``calibration.altTest.passed`` (1 when every field tested passed), then per field
    (``.status``, ``.intent``, ``.redFlags``, ``.score``), per requirement
    (``.requirements.<ID>``) and per red-flag type (``.redFlagTypes.<TYPE>``): ``passed``
    (1 or 0), ``winningRate``, ``advantageProbability``. Untested ones are absent."""

    def put(prefix: str, test: dict[str, Any]) -> None:
        for name in ALT_TEST_FIGURES:
            value = test[name]
            _put(out, f"{prefix}.{name}", None if value is None else float(value))

    verdicts = []
    for field in ("status", "intent", "redFlags", "score"):
        if field not in alt:
            continue
        put(f"calibration.altTest.{field}", alt[field])
        if alt[field]["passed"] is not None:
            verdicts.append(alt[field]["passed"])
    for req in alt.get("status", {}).get("requirements", ()):
        put(f"calibration.altTest.requirements.{req['id']}", req)
    for entry in alt.get("redFlags", {}).get("types", ()):
        put(f"calibration.altTest.redFlagTypes.{entry['type']}", entry)
    if verdicts:
        out["calibration.altTest.passed"] = float(all(verdicts))
