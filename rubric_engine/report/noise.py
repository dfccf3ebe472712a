"""A no-regression rule that tolerates noise: a paired bootstrap over the rows both tasks share.

The strict rule (:func:`rubric_engine.report.gate.check_no_regression`) fails on every
REGRESSION item of the diff, so one row of a live judge going from 3 to 2 fails CI. Here an
aggregate metric regresses only when both hold:

1. the drop is at least a **minimum effect** (:data:`MIN_EFFECT`: 0.05 of a share, i.e. five
   points of pass rate or compliance; 0.25 of a score point): smaller moves are not worth a
   failed release even when real;
2. the drop is **unlikely under resampling**: the rows both tasks judged are resampled with
   replacement ``resamples`` times, *paired* (a drawn row brings its baseline and its current
   result), with ``numpy.random.default_rng(seed)``; the ``1 - alpha`` percentile interval of
   the difference (``numpy.quantile``, linear) must lie wholly on the worse side. A move that
   rests on one or two rows keeps 0 inside its interval and passes.

Every metric is a ratio of per-row sums, so one resample costs two sums: ``passRate``
(passed / rows with an outcome), ``meanScore`` (final score / scored rows), ``redFlags.<TYPE>``
(rows with the type / rows with an outcome, a share here, lower is better),
``compliance.<REQUIREMENT_ID>`` (followed / followed + partial + violated, on IDs both rubrics
declare) and ``judgeErrorRate``. A resample whose denominator is 0 on either side is left out.
Intent means are not tested (a row may change intent between runs, so they do not pair).

Defaults and why: ``alpha=0.05`` (a regression shown at 95%, the usual bar); 2,000 resamples
(the interval's ends move by less than 0.01 between seeds on the demo's 26 rows); seed 0 (the
same tasks always give the same verdict). Deterministic for a seed; no global randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.diff import DiffSide
from rubric_engine.report.gate import GateCheck
from rubric_engine.report.metrics import Better, MetricKind
from rubric_engine.report.model import Diff
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus

#: the smallest drop that can count, by metric kind (a metric name may override it)
MIN_EFFECT: dict[str, float] = {MetricKind.SHARE: 0.05, MetricKind.SCORE: 0.25}

Pair = tuple[float, float]  # (numerator, denominator) of one row
PerRow = Callable[[RowResult, int], Pair]


@dataclass(frozen=True)
class NoiseOptions:
    """How the tolerant rule decides (see the module docstring for the defaults' reasons)."""

    alpha: float = 0.05
    seed: int = 0
    resamples: int = 2000
    #: minimum effect by metric name (``passRate``) or kind (``share``, ``score``)
    min_effect: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ConfigurationError(f"--alpha {self.alpha!r} must be between 0 and 1, e.g. 0.05")
        if self.resamples < 100:
            raise ConfigurationError(f"--resamples {self.resamples} must be at least 100")

    def effect(self, name: str, kind: MetricKind) -> float:
        given = dict(self.min_effect)
        return given.get(name, given.get(str(kind), MIN_EFFECT[kind]))


def parse_min_effect(texts: Iterable[str]) -> tuple[tuple[str, float], ...]:
    """``NAME=DROP`` pairs (``passRate=0.1``, ``score=0.5``).

    Raises:
        ConfigurationError: not of that form, or DROP not a non-negative number.
    """
    out = []
    for text in texts:
        name, _, value = text.partition("=")
        try:
            drop = float(value)
        except ValueError:
            drop = -1.0
        if not name.strip() or drop < 0:
            raise ConfigurationError(
                f"--min-effect {text!r} is not NAME=DROP; e.g. passRate=0.1 or score=0.5 "
                "(NAME a metric or a kind: share, score)"
            )
        out.append((name.strip(), drop))
    return tuple(out)


@dataclass(frozen=True)
class BootstrapResult:
    """One metric compared on the shared rows.

    ``delta`` is current - baseline; ``low``/``high`` the ``1 - alpha`` interval of it;
    ``worse`` the drop in the metric's bad direction (positive = worse).
    """

    metric: str
    better: Better
    baseline: float
    current: float
    delta: float
    low: float
    high: float
    rows: int
    min_effect: float
    regression: bool

    @property
    def worse(self) -> float:
        return -self.delta if self.better is Better.HIGHER else self.delta


def _has_outcome(r: RowResult) -> bool:
    return r.status is not RowStatus.JUDGE_ERROR


def _metrics(base: DiffSide, cur: DiffSide) -> list[tuple[str, MetricKind, Better, PerRow]]:
    def passed(r: RowResult, ps: int) -> Pair:
        return (float(row_outcome(r, ps) == "PASS"), float(_has_outcome(r)))

    def score(r: RowResult, _: int) -> Pair:
        return (float(r.final_score or 0), float(r.final_score is not None))

    def errors(r: RowResult, _: int) -> Pair:
        return (float(r.status is RowStatus.JUDGE_ERROR), 1.0)

    def flag(kind: str) -> PerRow:
        return lambda r, _: (float(kind in r.red_flag_types), float(_has_outcome(r)))

    def compliance(rid: str) -> PerRow:
        counted = {
            RequirementStatus.FOLLOWED,
            RequirementStatus.PARTIAL,
            RequirementStatus.VIOLATED,
        }

        def read(r: RowResult, _: int) -> Pair:
            entry = next((e for e in r.reference_basis if e.requirement_id == rid), None)
            if entry is None or entry.status not in counted:
                return (0.0, 0.0)
            return (float(entry.status is RequirementStatus.FOLLOWED), 1.0)

        return read

    S, SC = MetricKind.SHARE, MetricKind.SCORE
    out: list[tuple[str, MetricKind, Better, PerRow]] = [
        ("passRate", S, Better.HIGHER, passed),
        ("meanScore", SC, Better.HIGHER, score),
        ("judgeErrorRate", S, Better.LOWER, errors),
    ]
    out += [(f"redFlags.{f}", S, Better.LOWER, flag(f)) for f in cur.rubric.red_flag_types]
    shared = [rid for rid in cur.rubric.requirements_by_id if rid in base.rubric.requirements_by_id]
    out += [(f"compliance.{rid}", S, Better.HIGHER, compliance(rid)) for rid in shared]
    return out


def paired_bootstrap(
    base: DiffSide, cur: DiffSide, options: NoiseOptions = NoiseOptions()
) -> list[BootstrapResult]:
    """Every metric that got worse on the shared rows, with its interval and decision.

    Rows are paired by ``rowId`` in the current task's order; a metric that did not get worse
    (or has no value on either side) is left out. All metrics use one index matrix drawn from
    ``default_rng(seed).integers(0, n, size=(resamples, n))``.

    Raises:
        ImportError: numpy is missing (it is a dependency of rubric-engine).
    """
    import numpy as np

    base_rows = {r.row_id: r for r, _ in base.rows}
    pairs = [(base_rows[r.row_id], r) for r, _ in cur.rows if r.row_id in base_rows]
    n = len(pairs)
    if n == 0:
        return []
    idx = np.random.default_rng(options.seed).integers(0, n, size=(options.resamples, n))
    pb, pc = base.report.totals.pass_score, cur.report.totals.pass_score
    found: list[BootstrapResult] = []
    for name, kind, better, per_row in _metrics(base, cur):
        b = np.array([per_row(x, pb) for x, _ in pairs], dtype=float)
        c = np.array([per_row(y, pc) for _, y in pairs], dtype=float)
        if b[:, 1].sum() == 0 or c[:, 1].sum() == 0:
            continue
        delta = c[:, 0].sum() / c[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()
        worse = -delta if better is Better.HIGHER else delta
        if worse <= 0:
            continue
        db, dc = b[idx, 1].sum(axis=1), c[idx, 1].sum(axis=1)
        ok = (db > 0) & (dc > 0)
        boot = c[idx, 0].sum(axis=1)[ok] / dc[ok] - b[idx, 0].sum(axis=1)[ok] / db[ok]
        low, high = np.quantile(boot, [options.alpha / 2, 1 - options.alpha / 2])
        effect = options.effect(name, kind)
        beyond = high < 0 if better is Better.HIGHER else low > 0
        found.append(
            BootstrapResult(
                name, better, float(b[:, 0].sum() / b[:, 1].sum()),
                float(c[:, 0].sum() / c[:, 1].sum()), float(delta), float(low), float(high), n,
                effect, bool(beyond and worse >= effect),
            )
        )  # fmt: skip
    return found


def tolerant_checks(
    results: Iterable[BootstrapResult], baseline_task: str, alpha: float
) -> list[GateCheck]:
    """One check per worsened metric: failing when it is a regression, passing (within noise
    or below the minimum effect) otherwise; one passing check when nothing got worse."""
    checks = []
    level = f"{(1 - alpha) * 100:g}%"
    for r in results:
        interval = f"[{r.low:+.4f}, {r.high:+.4f}]"
        why = (
            "a regression: the drop is at least the minimum effect and the interval excludes 0"
            if r.regression
            else (
                "below the minimum effect"
                if r.worse < r.min_effect
                else "within noise: the interval includes 0"
            )
        )
        checks.append(
            GateCheck(
                f"noRegression (tolerant): {r.metric}",
                not r.regression,
                f"{r.metric} {r.baseline:.4f} → {r.current:.4f} (Δ {r.delta:+.4f}, {level} "
                f"interval {interval} over {r.rows} paired rows, minimum effect "
                f"{r.min_effect:g}) against task {baseline_task}: {why}",
                f"paired bootstrap, interval {interval}",
            )
        )
    if not checks:
        checks.append(
            GateCheck(
                "noRegression (tolerant)", True, f"no metric got worse against task {baseline_task}"
            )
        )
    return checks


def case_checks(diff: Diff, repeat: Diff | None) -> list[GateCheck]:
    """Per-case regressions under the tolerant rule: each one fails only when a repeat run of
    the current version (``repeat``: the diff of the baseline against it) shows the same
    regression (same row, same metric); without a repeat they are listed in one passing check,
    since a single judged run cannot tell a changed agent from a judge's wobble."""
    cases = [i for i in diff.items if i.type == "REGRESSION" and i.scope == "case"]
    if not cases:
        return []
    if repeat is None:
        rows = sorted({i.case_id or "" for i in cases})
        return [
            GateCheck(
                "noRegression (tolerant): cases",
                True,
                f"{len(cases)} case regression(s) in {len(rows)} row(s) ({', '.join(rows[:5])}"
                f"{' …' if len(rows) > 5 else ''}) not counted: confirm them with a repeat run "
                "(--confirm-with TASK)",
            )
        ]
    again = {(i.case_id, i.metric) for i in repeat.items if i.type == "REGRESSION"}
    return [
        GateCheck(
            f"noRegression (tolerant): case {i.case_id} {i.metric}",
            (i.case_id, i.metric) not in again,
            f"{i.message}: "
            + (
                "held on the repeat run, a regression"
                if (i.case_id, i.metric) in again
                else "did not hold on the repeat run, judge noise"
            ),
        )
        for i in cases
    ]
