"""``gate`` and ``diff`` as library calls over task stores (docs/reports.md, docs/ci.md).

:func:`run_diff` and :func:`run_gate` open the stores, rebuild the reports with exact figures
(a gate decides 1,808 / 2,009 = 0.89995 against ``passRate>=0.9`` on the exact value; a diff
shows figures rounded to 4 places) and call the pure
:func:`~rubric_engine.report.diff.diff_tasks` and
:func:`~rubric_engine.report.gate.evaluate_gate`. The CLI only parses options, calls these,
prints and maps the result to an exit code. An edge: it reads the store, the task's pinned
calibration included when a threshold reads ``calibration.*`` (handed to the pure gate as the
report's :class:`~rubric_engine.report.model.CalibrationSection`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rubric_engine.errors import ConfigurationError, StoreError
from rubric_engine.report.diff import DiffSide, diff_tasks
from rubric_engine.report.diff_list import MAX_ITEMS
from rubric_engine.report.gate import (
    GateCheck,
    GateResult,
    Threshold,
    check_parameters,
    evaluate_gate,
    parse_threshold,
    slice_fields,
)
from rubric_engine.report.model import Diff, Report
from rubric_engine.report.noise import NoiseOptions, case_checks, paired_bootstrap, tolerant_checks
from rubric_engine.report.rows import RowFacts
from rubric_engine.report.stored import (
    StoredTask,
    diff_side,
    load_task,
    report_from_task,
    stored_report_rows,
    stream_report,
    with_calibration,
)
from rubric_engine.results.model import RowResult
from rubric_engine.store.location import StoreLocation, store_exists
from rubric_engine.store.task_store import TaskStore


def require_store(store: StoreLocation) -> None:
    """Refuse a store that does not exist (opening it would create an empty one).

    Raises:
        StoreError: a folder, no file there, or a PostgreSQL database without a store's
            tables (the fix is named); the PostgreSQL server cannot be reached.
    """
    if store_exists(store):  # a folder is refused there, naming a file inside it
        return
    if isinstance(store, Path):
        raise StoreError(
            f"{store}: no task store here; pass --store PATH, or start one: "
            "`rubric-eval rubric publish FILE` then `rubric-eval score INPUT --rubric KEY`"
        )
    raise StoreError(
        f"{store}: the database holds no task store yet; start one: `rubric-eval "
        "rubric publish FILE --store URL` then `rubric-eval score INPUT --rubric KEY`"
    )


def _load(store: StoreLocation, task_id: str) -> StoredTask:
    require_store(store)
    with TaskStore(store) as opened:
        return load_task(opened, task_id)


def read_report(
    task_id: str,
    store: StoreLocation = Path(".rubric-eval/store.sqlite"),
    *,
    pass_score: int | None = None,
    by: Sequence[str] = (),
) -> Report:
    """A stored task's report, rebuilt from its own rubric snapshot (what ``report.json`` holds).

    Args:
        task_id: the task's id, as ``score`` printed it, or its name or ``tag:TAG``
            (:mod:`rubric_engine.store.task_ref`).
        store: the store, a SQLite file or a PostgreSQL URL (default: the CLI's default store).
        pass_score: lowest passing final score (default: one below the scale's top).
        by: slices to add (``intent``, ``category`` or a row metadata field).

    Raises:
        StoreError: no store at ``store``, or its snapshot no longer matches its hash.
        TaskNotFoundError: no such task (the known ones are listed).
        ConfigurationError: a bad ``pass_score`` or ``by`` name (valid choices listed).
    """
    require_store(store)
    with TaskStore(store) as opened:  # a row at a time: the rows are not kept
        return stream_report(opened, task_id, pass_score=pass_score, by=tuple(by)).report


def run_diff(
    store: StoreLocation,
    baseline: str,
    current: str,
    *,
    baseline_store: StoreLocation | None = None,
    pass_score: int | None = None,
    max_items: int | None = MAX_ITEMS,
    items_file: Path | None = None,
) -> Diff:
    """The baseline diff of two stored tasks, read a page of rows at a time (docs/scale.md).

    Args:
        store: the store holding ``current`` (and ``baseline`` unless ``baseline_store``).
        baseline_store: the store holding the baseline task, e.g. a CI artifact.
        pass_score: the pass score of both reports (default: each pack's own default).
        max_items: case items listed, the most important first (``None``: every one); the
            diff's counts are of every item.
        items_file: where every item is written as JSON Lines when some are not listed.

    Raises:
        StoreError: a store path that is not a store file, or a damaged task.
        TaskNotFoundError: no such task.
        ConfigurationError: a ``pass_score`` outside a pack's scale; tasks with nothing
            comparable.
    """
    from rubric_engine.report.diff_stream import stream_diff

    require_store(store)
    if baseline_store is not None:
        require_store(baseline_store)
    with contextlib.ExitStack() as stack:
        cur_store = stack.enter_context(TaskStore(store))
        base_store = (
            stack.enter_context(TaskStore(baseline_store))
            if baseline_store is not None
            else cur_store
        )
        return stream_diff(
            base_store,
            baseline,
            cur_store,
            current,
            pass_score=pass_score,
            max_items=max_items,
            items_file=items_file,
        )


@dataclass(frozen=True)
class StoredRows:
    """A task's rows as the diff reads them, read from the open store afresh on each pass (a
    page of rows at a time: :meth:`~rubric_engine.store.task_store.TaskStore.report_rows`)."""

    store: TaskStore
    task_id: str

    def __iter__(self) -> Iterator[tuple[RowResult, RowFacts]]:
        for row in stored_report_rows(self.store, self.task_id):
            yield row.result, row.facts


def streamed_side(store: TaskStore, task_id: str, *, pass_score: int | None = None) -> DiffSide:
    """One task as the diff reads it without holding its rows: its report built in one pass
    with exact figures (the diff decides on them and rounds what it shows), its rows a
    :class:`StoredRows` stream and its rowIds in input order.

    Raises:
        TaskNotFoundError / StoreError: as :func:`~rubric_engine.report.stored.load_task`.
    """
    task = stream_report(store, task_id, pass_score=pass_score, exact=True)
    query = "SELECT row_id FROM rows WHERE task_id=? ORDER BY seq, row_id"
    ids = [row_id for (row_id,) in store.backend.execute(query, (task.record.id,))]
    return DiffSide(task.report, task.rubric, StoredRows(store, task.record.id), ids)


def run_gate(
    store: StoreLocation,
    task_id: str,
    thresholds: Sequence[str] = (),
    *,
    baseline: str | None = None,
    no_regression: bool = False,
    baseline_store: StoreLocation | None = None,
    pass_score: int | None = None,
    allow_partial: bool = False,
    rule: Literal["strict", "tolerant"] = "strict",
    noise: NoiseOptions | None = None,
    confirm_with: str | None = None,
) -> GateResult:
    """Check a stored task against thresholds and, with ``no_regression``, a baseline task.

    Args:
        thresholds: ``METRIC OP NUMBER`` texts (metrics: :mod:`rubric_engine.report.metrics`).
        baseline: the accepted run; needs ``no_regression`` (and the reverse).
        allow_partial: leave out the ``complete`` check (a task not COMPLETED with every
            planned row otherwise fails the gate).
        rule: ``strict`` fails on every REGRESSION item of the diff; ``tolerant`` tests
            aggregate metrics with a paired bootstrap (:mod:`rubric_engine.report.noise`,
            ``noise`` its options) and counts a case regression only when ``confirm_with``
            (a repeat run of the current version, in ``store``) shows it too.

    Returns:
        The checks in order; :attr:`GateResult.passed` is the gate's outcome.

    Raises:
        ConfigurationError: nothing to check, ``baseline`` without ``no_regression`` or the
            reverse, a bad threshold or metric parameter (the valid ones listed).
        StoreError / TaskNotFoundError: as :func:`run_diff`.
    """
    if not thresholds and not no_regression:
        raise ConfigurationError(
            "nothing to check: give at least one --threshold, or --baseline TASK --no-regression"
        )
    if no_regression and baseline is None:
        raise ConfigurationError("--no-regression needs --baseline TASK (the accepted run)")
    if rule not in ("strict", "tolerant"):
        raise ConfigurationError(f"--regression-rule {rule!r} is not valid; use strict or tolerant")
    if confirm_with is not None and rule != "tolerant":
        raise ConfigurationError("--confirm-with is for --regression-rule tolerant")
    if baseline is not None and not no_regression:
        raise ConfigurationError(
            "--baseline is only used with --no-regression; add it, or drop --baseline"
        )
    parsed = [parse_threshold(t) for t in thresholds]
    # exact: 0.89995 must fail passRate>=0.9, so nothing is rounded before comparing
    by = slice_fields(parsed)
    if baseline is not None and rule == "tolerant":
        return _tolerant_gate(
            store, task_id, parsed, baseline, baseline_store, pass_score, allow_partial,
            noise or NoiseOptions(), confirm_with,
        )  # fmt: skip
    require_store(store)
    with TaskStore(store) as opened:  # a row at a time: the rows are not kept
        task = stream_report(opened, task_id, pass_score=pass_score, by=by, exact=True)
        report = task.report
        if any(t.metric.name.startswith("calibration.") for t in parsed):
            report = with_calibration(opened, task, report)  # stale or missing fails, saying why
    check_parameters(parsed, report)  # before the baseline is read: the cheaper mistake
    diff = None
    if baseline is not None:  # merged a page at a time; every regression counted
        diff = run_diff(
            store, baseline, task.record.id, baseline_store=baseline_store, pass_score=pass_score
        )
    return evaluate_gate(report, parsed, diff=diff, require_complete=not allow_partial)


def _tolerant_gate(
    store: StoreLocation,
    task_id: str,
    parsed: list[Threshold],
    baseline: str,
    baseline_store: StoreLocation | None,
    pass_score: int | None,
    allow_partial: bool,
    noise: NoiseOptions,
    confirm_with: str | None,
) -> GateResult:
    """:func:`run_gate` under the tolerant rule: its paired bootstrap resamples the two tasks'
    rows, so both are read into memory."""
    current = _load(store, task_id)
    report = report_from_task(current, pass_score=pass_score, by=slice_fields(parsed), exact=True)
    if any(t.metric.name.startswith("calibration.") for t in parsed):
        with TaskStore(store) as opened:  # stale or missing fails those checks, saying why
            report = with_calibration(opened, current, report)
    check_parameters(parsed, report)  # before the baseline is read: the cheaper mistake
    base = diff_side(_load(baseline_store or store, baseline), pass_score=pass_score)
    side = diff_side(current, pass_score=pass_score)
    diff = diff_tasks(base, side)
    extra = tolerant_regressions(base, side, diff, noise, store, confirm_with, pass_score)
    return evaluate_gate(
        report, parsed, diff=diff, require_complete=not allow_partial, regression_checks=extra
    )


def tolerant_regressions(
    base: DiffSide,
    current: DiffSide,
    diff: Diff,
    noise: NoiseOptions,
    store: StoreLocation,
    confirm_with: str | None = None,
    pass_score: int | None = None,
) -> list[GateCheck]:
    """The tolerant rule's checks: the bootstrap's per metric, then the case regressions
    (confirmed against the repeat task ``confirm_with`` in ``store`` when given)."""
    results = paired_bootstrap(base, current, noise)
    checks = tolerant_checks(results, diff.baseline_task_id, noise.alpha)
    repeat = None
    if confirm_with is not None:
        repeat = diff_tasks(base, diff_side(_load(store, confirm_with), pass_score=pass_score))
    return checks + case_checks(diff, repeat)
