"""The alternative annotator test against an independent implementation written here from the
paper's description (Calderon, Reichart & Dror, ACL 2025, §3: leave one annotator out, the
alignment scoring functions, the one-sided t-test with margin ε, Benjamini–Yekutieli, the
winning rate ω and the advantage probability ρ) on hypothesis-generated annotations.

The reference below shares no code with rubric_engine.calibration.alt_test: it computes the
alignment scores as the paper writes them (mean accuracy, negative RMSE, as floats), the t
statistic by hand with scipy's t distribution only for its tail, and the BY step-up rule with
the harmonic number, where the module compares exact integer losses and calls ttest_1samp
and false_discovery_control.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rubric_engine.calibration.alt_test import AltTestTally, alt_test_results, baseline_results


def paper_alt_test(
    humans: dict[str, dict[str, Any]],
    judge: dict[str, Any],
    scoring: str,
    epsilon: float,
    q: float,
    min_instances: int,
) -> tuple[float | None, float | None, dict[str, tuple[float | None, float]]]:
    """(ω, ρ, per annotator (p-value, ρ_j)) as the paper describes the procedure."""
    from scipy.stats import t as student

    def align(pred: Any, others: list[Any]) -> float:
        if scoring == "accuracy":
            return sum(1.0 if pred == o else 0.0 for o in others) / len(others)
        return -math.sqrt(sum((pred - o) ** 2 for o in others) / len(others))

    annotators_of: dict[str, list[str]] = defaultdict(list)
    for h, annotations in humans.items():
        for i in annotations:
            annotators_of[i].append(h)
    kept = {i for i, hs in annotators_of.items() if len(hs) >= 2 and i in judge}
    per: dict[str, tuple[float | None, float]] = {}
    for h, annotations in humans.items():
        instances = [i for i in annotations if i in kept]
        if len(instances) < min_instances:
            continue
        w_judge, w_human = [], []
        for i in instances:
            others = [humans[g][i] for g in annotators_of[i] if g != h]
            s_f, s_h = align(judge[i], others), align(annotations[i], others)
            w_judge.append(1 if s_f >= s_h else 0)
            w_human.append(1 if s_h >= s_f else 0)
        d = [a - b for a, b in zip(w_human, w_judge, strict=True)]
        n = len(d)
        mean = sum(d) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        if sd == 0:
            p: float | None = None if mean == epsilon else (0.0 if mean < epsilon else 1.0)
        else:
            p = float(student.cdf((mean - epsilon) / (sd / math.sqrt(n)), n - 1))
        per[h] = (p, sum(w_judge) / n)
    if not per:
        return None, None, per
    names = list(per)
    m = len(names)
    harmonic = sum(1 / k for k in range(1, m + 1))
    ranked = sorted(names, key=lambda h: 2.0 if per[h][0] is None else per[h][0])  # type: ignore[return-value]
    last = 0
    for k, h in enumerate(ranked, start=1):
        p = per[h][0]
        if p is not None and p <= k / m * q / harmonic:
            last = k
    omega = last / m
    rho = sum(rho_j for _, rho_j in per.values()) / m
    return omega, rho, per


@st.composite
def annotations(draw: st.DrawFn) -> tuple[dict[str, dict[str, Any]], dict[str, Any], str]:
    scoring = draw(st.sampled_from(["accuracy", "neg_rmse"]))
    values = st.sampled_from(["A", "B", "C"]) if scoring == "accuracy" else st.integers(1, 5)
    n_humans = draw(st.integers(2, 5))
    n_items = draw(st.integers(0, 60))
    humans: dict[str, dict[str, Any]] = {}
    for h in range(n_humans):
        labelled = draw(st.lists(st.booleans(), min_size=n_items, max_size=n_items))
        humans[f"h{h}"] = {f"i{i}": draw(values) for i in range(n_items) if labelled[i]}
    judge = {f"i{i}": draw(values) for i in range(n_items) if draw(st.integers(0, 9)) > 0}
    return humans, judge, scoring


def ours(
    humans: dict[str, dict[str, Any]],
    judge: dict[str, Any],
    scoring: str,
    epsilon: float,
    q: float,
    min_instances: int,
) -> dict[str, Any]:
    tally = AltTestTally(scoring)  # type: ignore[arg-type]
    for i in sorted({i for annotations in humans.values() for i in annotations}):
        values = {h: annotations[i] for h, annotations in humans.items() if i in annotations}
        tally.add(values, judge.get(i))
    return alt_test_results({"t": tally}, epsilon=epsilon, q=q, min_instances=min_instances)["t"]


@settings(max_examples=300, deadline=None)
@given(
    annotations(),
    st.sampled_from([0.0, 0.1, 0.15, 0.2, 0.3]),
    st.sampled_from([0.05, 0.1, 0.5]),
    st.integers(2, 12),
)
def test_the_alt_test_equals_the_papers_procedure(
    data: tuple[dict[str, dict[str, Any]], dict[str, Any], str],
    epsilon: float,
    q: float,
    min_instances: int,
) -> None:
    humans, judge, scoring = data
    omega, rho, per = paper_alt_test(humans, judge, scoring, epsilon, q, min_instances)
    # a p-value exactly on its BY line (1/3 against 2/2 * 0.5 / 1.5): the reference's k/m*q/H
    # and scipy's adjusted p-value round it to either side, so that draw decides nothing
    ranked = sorted(p for p, _ in per.values() if p is not None)
    m = len(per)
    line = q / sum(1 / k for k in range(1, m + 1)) / m if m else 0.0
    assume(not any(math.isclose(p, k * line, rel_tol=1e-9) for k, p in enumerate(ranked, 1)))
    got = ours(humans, judge, scoring, epsilon, q, min_instances)
    assert got["winningRate"] == omega
    if rho is None:
        assert got["advantageProbability"] is None and got["passed"] is None
    else:
        assert math.isclose(got["advantageProbability"], rho, rel_tol=1e-12)
        assert got["passed"] == (omega is not None and omega >= 0.5)
    tested = {r["reviewer"]: r for r in got["reviewers"]}
    assert set(tested) == set(per)
    for h, (p, rho_j) in per.items():
        if p is None:
            assert tested[h]["pValue"] is None
        else:
            assert math.isclose(tested[h]["pValue"], p, rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(tested[h]["advantageProbability"], rho_j)
    skipped = {s["reviewer"] for s in got["skipped"]}
    assert skipped.isdisjoint(per)


def test_fdr_is_corrected_over_every_test_reported_together() -> None:
    """Each of two reviewers' p-values is 0.0151 (3 of 34 instances where the reviewers agree
    and the judge does not): alone, BY over those two rejects both (0.0151 ≤ 0.05/1.5/2);
    reported beside a field where the judge always loses, BY over four p-values rejects
    neither, and the first field fails too."""
    a, b = AltTestTally("accuracy"), AltTestTally("accuracy")
    for n in range(34):
        a.add({"h0": "A", "h1": "A"}, "B" if n < 3 else "A")
        b.add({"h0": "A", "h1": "A"}, "B")  # the judge never aligns: p = 1
    alone = alt_test_results({"a": a}, epsilon=0.2, min_instances=30)["a"]
    assert [round(r["pValue"], 4) for r in alone["reviewers"]] == [0.0151, 0.0151]
    assert alone["winningRate"] == 1.0 and alone["passed"] is True
    both = alt_test_results({"a": a, "b": b}, epsilon=0.2, min_instances=30)
    assert both["a"]["winningRate"] == 0.0 and both["a"]["passed"] is False
    assert both["b"]["advantageProbability"] == 0.0


def test_a_reviewer_below_the_minimum_is_skipped_and_named() -> None:
    tally = AltTestTally("accuracy")
    for n in range(40):
        values = {"h0": "A", "h1": "A"} if n >= 10 else {"h0": "A", "h1": "A", "h2": "A"}
        tally.add(values, "A")
    got = alt_test_results({"t": tally})["t"]
    assert [s["reviewer"] for s in got["skipped"]] == ["h2"]
    assert got["skipped"][0]["instances"] == 10
    assert {r["reviewer"] for r in got["reviewers"]} == {"h0", "h1"}


def test_the_reviewers_as_the_baseline_rank_the_judge_among_them() -> None:
    """h0 and h1 agree, h2 disagrees with both; the judge sides with h0/h1: it aligns with
    the others better than h2 does, so it is within the reviewers' own disagreement."""
    tally = AltTestTally("accuracy")
    for _ in range(10):
        tally.add({"h0": "A", "h1": "A", "h2": "B"}, "A")
    base = baseline_results(tally)
    assert base is not None
    agreement = {r["reviewer"]: r["agreement"] for r in base["reviewers"]}
    assert agreement == {"h0": 0.5, "h1": 0.5, "h2": 0.0}
    # against h0's others (h1, h2) the judge matches 1 of 2, h1's likewise, h2's 2 of 2
    assert math.isclose(base["judgeAgreement"], (0.5 + 0.5 + 1.0) / 3)
    assert base["judgeRank"] == 1 and base["raters"] == 4 and base["withinReviewers"] is True
