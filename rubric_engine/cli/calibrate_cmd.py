"""`rubric-eval calibrate`: how often the judge agrees with human labels, and whether it can
stand in for a reviewer (docs/calibration.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, _require_store, app


@app.command()
def calibrate(
    task_id: Annotated[
        str | None, typer.Argument(help="Task whose judge results to calibrate.")
    ] = None,
    labels: Annotated[
        Path | None, typer.Option(help="Reference labels (JSONL or CSV); default: the store's.")
    ] = None,
    reviewer: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these reviewers' labels, in this precedence; repeatable. The gate reads "
            "only calibrations over all reviewers."
        ),
    ] = None,
    judge_labels: Annotated[
        list[Path] | None,
        typer.Option(
            help="The judge's labels as a file (with --labels, no task needed); repeat it to "
            "compare judges side by side on the alt-test."
        ),
    ] = None,
    against: Annotated[
        str | None,
        typer.Option(help="Judge vs judge: compare TASK with this task over the same rows."),
    ] = None,
    compare_with: Annotated[
        list[str] | None,
        typer.Option(
            help="Another task of the same rows: its judge's alt-test beside TASK's, against "
            "the same labels; repeatable."
        ),
    ] = None,
    alt_test: Annotated[
        bool,
        typer.Option(
            "--alt-test",
            help="Show the alternative annotator test in full (per reviewer and requirement); "
            "it is computed whenever two or more reviewers labelled the same rows.",
        ),
    ] = False,
    epsilon: Annotated[
        float,
        typer.Option(
            help="Alt-test cost-benefit margin ε: 0.2 expert reviewers, 0.15 skilled, 0.1 crowd."
        ),
    ] = 0.2,
    fdr_q: Annotated[
        float, typer.Option(help="Alt-test Benjamini-Yekutieli level over all its tests.")
    ] = 0.05,
    min_instances: Annotated[
        int,
        typer.Option(
            help="Alt-test: instances a reviewer needs to be tested (the paper's 30; fewer "
            "weakens the t-test)."
        ),
    ] = 30,
    include_changed: Annotated[
        bool,
        typer.Option(
            "--include-changed",
            help="Also use stored labels of requirements whose text, category, red line, "
            "observability or cap changed since they were labelled.",
        ),
    ] = False,
    format: Annotated[str, typer.Option("--format", help="text, json or md.")] = "text",
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    plan_half_width: Annotated[
        float | None,
        typer.Option(help="Also plan the labels each requirement needs for ±this half-width."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap intervals.")] = 0,
    save: Annotated[
        bool, typer.Option(help="Store the calibration record (TASK mode) for gates.")
    ] = True,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """How often the judge agrees with human labels (κ, recall, TNR, F1, red flags, scores) and
    whether it can stand in for one of the reviewers (the alternative annotator test).

    TASK (every reviewer's stored labels) or TASK --labels FILE or TASK --reviewer NAME: the
    task's judge against labels; the record is stored, pinned to the task's rubric, prompt,
    model and parameters. --judge-labels FILE --labels FILE: two label files. TASK --against
    TASK2: judge against judge (flip rates).
    """

    def run() -> None:
        from rubric_engine.calibration.render import RENDERERS

        _check_options(format, plan_half_width, epsilon, fdr_q, min_instances)
        result = _calibrate(
            task_id, labels, tuple(reviewer or ()), judge_labels or [], against,
            compare_with or [], _options(epsilon, fdr_q, min_instances), include_changed,
            plan_half_width, seed, save, store,
        )  # fmt: skip
        text = RENDERERS[format](result, alt_test)
        if out is None:
            sys.stdout.write(text)
        else:
            from rubric_engine.report.render.output import write_output

            write_output(out, text)
            typer.echo(f"wrote {out}")

    _guard(run)


def _options(epsilon: float, q: float, min_instances: int) -> Any:
    from rubric_engine.calibration.alt_fields import AltTestOptions

    return AltTestOptions(epsilon, q, min_instances)


def _check_options(
    format: str, half_width: float | None, epsilon: float, q: float, min_instances: int
) -> None:
    from rubric_engine.errors import ConfigurationError

    if format not in ("text", "json", "md"):
        raise ConfigurationError(f"--format {format!r} is not valid; use text, json or md")
    if half_width is not None and not 0 < half_width <= 0.5:
        raise ConfigurationError(f"--plan-half-width {half_width} must be in (0, 0.5], e.g. 0.1")
    if not 0 <= epsilon < 1:
        raise ConfigurationError(
            f"--epsilon {epsilon} must be in [0, 1): 0.2 for expert reviewers, 0.15 skilled, "
            "0.1 crowd workers"
        )
    if not 0 < q < 1:
        raise ConfigurationError(f"--fdr-q {q} must be in (0, 1), e.g. 0.05")
    if min_instances < 2:
        raise ConfigurationError(
            f"--min-instances {min_instances} must be at least 2 (a t-test needs two); the "
            "paper's minimum is 30"
        )


def _calibrate(
    task_id: str | None,
    labels: Path | None,
    reviewers: tuple[str, ...],
    judge_labels: list[Path],
    against: str | None,
    compare_with: list[str],
    options: Any,
    include_changed: bool,
    half_width: float | None,
    seed: int,
    save: bool,
    store: Any,
) -> dict[str, Any]:
    from rubric_engine.calibration import run as calibration
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.store.task_store import TaskStore

    if judge_labels:
        if task_id is not None or labels is None or against is not None or compare_with:
            raise ConfigurationError(
                "--judge-labels compares label files: give --labels FILE and no TASK, "
                "--against or --compare-with"
            )
        results = {
            path.name: calibration.calibrate_files(
                path, labels, half_width=half_width, seed=seed, alt_test=options
            )
            for path in judge_labels
        }
        return _with_comparison(results)
    if task_id is None:
        raise ConfigurationError(
            "give a TASK (its stored labels, --labels FILE or --reviewer NAME), or "
            "--judge-labels FILE --labels FILE"
        )
    _require_store(store)
    with TaskStore(store) as opened:
        if against is not None:
            return calibration.compare_tasks(opened, task_id, against, seed=seed)
        results = {}
        for i, task in enumerate([task_id, *compare_with]):
            results[task] = calibration.calibrate_task(
                opened,
                task,
                labels_file=labels,
                reviewers=reviewers,
                include_changed=include_changed,
                half_width=half_width,
                seed=seed,
                save=save and i == 0,
                alt_test=options,
            )
    return _with_comparison(results)


def _with_comparison(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from rubric_engine.calibration.run import judge_comparison

    first = next(iter(results.values()))
    if len(results) > 1:
        first["judgeComparison"] = judge_comparison(results)
    return first
