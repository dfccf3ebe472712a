"""Every calibration figure against an independent implementation on random data
(docs/calibration.md): scikit-learn for the binary figures and κ, the `krippendorff` package for α,
scipy and plain numpy for the score figures. Test extras only; the engine does not import them."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.calibration.agreement import cohen_kappa, krippendorff_alpha
from rubric_engine.calibration.binary import binary_metrics, confusion
from rubric_engine.calibration.correction import labels_needed, rogan_gladen
from rubric_engine.calibration.intervals import bootstrap_intervals, wilson
from rubric_engine.calibration.scores import score_agreement

sklearn_metrics = pytest.importorskip("sklearn.metrics")
krippendorff = pytest.importorskip("krippendorff")

pairs_strategy = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=300)


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(pairs_strategy)
def test_binary_figures_equal_scikit_learn(pairs: list[tuple[bool, bool]]) -> None:
    ref = [int(a) for a, _ in pairs]
    judge = [int(b) for _, b in pairs]
    got = binary_metrics(confusion(pairs))
    sk = sklearn_metrics
    assert close(got["accuracy"], sk.accuracy_score(ref, judge))
    if any(judge):
        assert close(got["precisionUnmet"], sk.precision_score(ref, judge, zero_division=0))
    else:
        assert got["precisionUnmet"] is None
    if any(ref):
        assert close(got["recallUnmet"], sk.recall_score(ref, judge))
    else:
        assert got["recallUnmet"] is None
    if not all(ref):
        tnr = sk.recall_score(ref, judge, pos_label=0)
        assert close(got["tnr"], tnr)
    if any(ref) or any(judge):
        assert close(got["f1Unmet"], sk.f1_score(ref, judge))
    if any(ref) and not all(ref):
        assert close(got["balancedAccuracy"], sk.balanced_accuracy_score(ref, judge))
    if len(set(ref)) == 2 and len(set(judge)) == 2:
        assert close(got["mcc"], sk.matthews_corrcoef(ref, judge))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = sk.cohen_kappa_score(ref, judge)
    if math.isnan(expected):
        assert got["kappa"] is None
    else:
        assert close(got["kappa"], expected)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=200),
    st.sampled_from([None, "quadratic"]),
)
def test_cohen_kappa_multiclass_and_weighted_equal_scikit_learn(
    pairs: list[tuple[int, int]], weights: str | None
) -> None:
    ref, judge = [a for a, _ in pairs], [b for _, b in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = sklearn_metrics.cohen_kappa_score(
            ref, judge, labels=[1, 2, 3, 4, 5], weights=weights
        )
    got = cohen_kappa(ref, judge, categories=[1, 2, 3, 4, 5], weights=weights)  # type: ignore[arg-type]
    if math.isnan(expected):
        assert got is None
    else:
        assert close(got, expected)


def reliability_data(draw: st.DrawFn, numeric: bool) -> list[list[float | None]]:
    raters = draw(st.integers(2, 5))
    units = draw(st.integers(2, 40))
    values = st.integers(1, 5) if numeric else st.integers(0, 2)
    cell = st.one_of(st.none(), values.map(float))
    return [[draw(cell) for _ in range(units)] for _ in range(raters)]


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_krippendorff_alpha_equals_the_krippendorff_package(
    data: st.DataObject, level: str
) -> None:
    matrix = reliability_data(data.draw, numeric=level != "nominal")
    got = krippendorff_alpha(matrix, level)  # type: ignore[arg-type]
    array = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    pairable = sum(1 for u in range(array.shape[1]) if np.sum(~np.isnan(array[:, u])) >= 2)
    values = {
        v
        for u in range(array.shape[1])
        if np.sum(~np.isnan(array[:, u])) >= 2
        for v in array[:, u]
        if not np.isnan(v)
    }
    if pairable == 0 or len(values) < 2:
        assert got is None
        return
    expected = krippendorff.alpha(reliability_data=array, level_of_measurement=level)
    assert close(got, float(expected)) or math.isclose(got or 0, float(expected), abs_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=3, max_size=200))
def test_score_agreement_equals_scipy_and_numpy(pairs: list[tuple[int, int]]) -> None:
    from scipy import stats

    ref = [float(a) for a, _ in pairs]
    judge = [float(b) for _, b in pairs]
    got = score_agreement(ref, judge, (1, 5))
    diff = np.array(judge) - np.array(ref)
    assert close(got["rmse"], float(np.sqrt(np.mean(diff**2))))
    assert close(got["meanSignedBias"], float(np.mean(diff)))
    if len(set(ref)) > 1 and len(set(judge)) > 1:
        assert close(got["pearson"], float(np.corrcoef(judge, ref)[0, 1]))
        assert close(got["spearman"], float(stats.spearmanr(ref, judge).statistic))
    else:
        assert got["pearson"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qwk = sklearn_metrics.cohen_kappa_score(
            [int(v) for v in ref],
            [int(v) for v in judge],
            labels=[1, 2, 3, 4, 5],
            weights="quadratic",
        )
    assert (got["weightedKappa"] is None) if math.isnan(qwk) else close(got["weightedKappa"], qwk)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_interval_matches_its_formula(k: int, extra: int) -> None:
    n = k + extra
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = wilson(k, n)  # type: ignore[misc]
    assert math.isclose(lo, max(0.0, centre - half), abs_tol=1e-9)
    assert math.isclose(hi, min(1.0, centre + half), abs_tol=1e-9)


def test_wilson_lower_bound_of_a_perfect_small_sample_stays_below_the_certification_bar() -> None:
    """Why the gate reads `.lower95`: 7 of 7 recalled still leaves the bound under 0.8."""
    lo, _ = wilson(7, 7)  # type: ignore[misc]
    assert lo < 0.8
    assert wilson(0, 0) is None


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(1)
    ref = rng.random(400) < 0.3
    judge = np.where(rng.random(400) < 0.85, ref, ~ref)
    pairs = list(zip(ref.tolist(), judge.tolist(), strict=True))
    table = confusion(pairs)
    a = bootstrap_intervals(table, seed=7)
    assert a == bootstrap_intervals(table, seed=7)
    assert a != bootstrap_intervals(table, seed=8)
    point = binary_metrics(table)
    assert a["kappa"][0] < point["kappa"] < a["kappa"][1]  # type: ignore[operator]
    assert a["f1Unmet"][0] < point["f1Unmet"] < a["f1Unmet"][1]  # type: ignore[operator]
    one_class = bootstrap_intervals(confusion([(True, True)] * 5), seed=0)
    assert one_class["kappa"] is None and one_class["undefinedKappa"] == one_class["resamples"]


def test_the_bootstrap_from_counts_matches_resampling_the_pairs() -> None:
    """Drawing the 2×2 table from a multinomial is resampling the pairs: the intervals of a
    plain resampling of the 400 pairs themselves (20,000 resamples each) agree within 0.02."""
    rng = np.random.default_rng(3)
    ref = rng.random(400) < 0.3
    judge = np.where(rng.random(400) < 0.8, ref, ~ref)
    got = bootstrap_intervals(
        confusion(zip(ref.tolist(), judge.tolist(), strict=True)), seed=1, resamples=20000
    )
    idx = np.random.default_rng(2).integers(0, 400, size=(20000, 400))
    r, j = ref[idx], judge[idx]
    tp, fp = (r & j).sum(1), (~r & j).sum(1)
    fn, tn = (r & ~j).sum(1), (~r & ~j).sum(1)
    p_o = (tp + tn) / 400
    p_e = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / 400**2
    kappa = (p_o - p_e) / (1 - p_e)
    f1 = 2 * tp / (2 * tp + fp + fn)
    for name, values in (("kappa", kappa), ("f1Unmet", f1)):
        lo, hi = np.percentile(values, [2.5, 97.5])
        assert abs(got[name][0] - lo) < 0.02 and abs(got[name][1] - hi) < 0.02, name


def test_rogan_gladen_recovers_the_true_rate_of_a_known_judge() -> None:
    true_rate, tpr, tnr = 0.2, 0.9, 0.95
    observed = true_rate * tpr + (1 - true_rate) * (1 - tnr)
    assert math.isclose(rogan_gladen(observed, tpr, tnr), true_rate)  # type: ignore[arg-type]
    assert rogan_gladen(0.3, 0.5, 0.5) is None  # a judge no better than chance corrects nothing


def test_planner_sizes_and_flags_rare_requirements() -> None:
    plan = labels_needed(0.1, 0.1, tpr=0.9, tnr=0.9)
    # z² p(1-p)/h² = 3.8415·0.09/0.01 → 35 positives; at 10% prevalence 350 rows
    assert plan["positivesNeeded"] == 35 and plan["labelsNeeded"] == 350
    assert labels_needed(0.0, 0.1)["tooRare"] is True
    with pytest.raises(ValueError):
        labels_needed(0.1, 0.0)
