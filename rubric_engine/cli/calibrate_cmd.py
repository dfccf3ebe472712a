"""`rubric-eval calibrate`: how often the judge agrees with human labels (docs/calibration.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

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
        typer.Option(help="Only these reviewers' labels, in this precedence; repeatable."),
    ] = None,
    judge_labels: Annotated[
        Path | None,
        typer.Option(help="The judge's labels as a file (with --labels, no task needed)."),
    ] = None,
    against: Annotated[
        str | None,
        typer.Option(help="Judge vs judge: compare TASK with this task over the same rows."),
    ] = None,
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
    """How often the judge agrees with human labels (κ, recall, TNR, F1, red flags, scores).

    TASK --labels FILE or TASK --reviewer NAME: the task's judge against labels; the record is
    stored, pinned to the task's rubric, prompt, model and parameters. --judge-labels FILE
    --labels FILE: two label files. TASK --against TASK2: judge against judge (flip rates).
    """

    def run() -> None:
        from rubric_engine.calibration import run as calibration
        from rubric_engine.calibration.render import (
            render_calibration_json,
            render_calibration_markdown,
            render_calibration_text,
        )
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.store.task_store import TaskStore

        if format not in ("text", "json", "md"):
            raise ConfigurationError(f"--format {format!r} is not valid; use text, json or md")
        if plan_half_width is not None and not 0 < plan_half_width <= 0.5:
            raise ConfigurationError(
                f"--plan-half-width {plan_half_width} must be in (0, 0.5], e.g. 0.1"
            )
        if judge_labels is not None:
            if task_id is not None or labels is None or against is not None:
                raise ConfigurationError(
                    "--judge-labels compares two files: give --labels FILE and no TASK or --against"
                )
            result = calibration.calibrate_files(
                judge_labels, labels, half_width=plan_half_width, seed=seed
            )
        elif task_id is None:
            raise ConfigurationError(
                "give a TASK (with --labels FILE or --reviewer NAME), or --judge-labels FILE "
                "--labels FILE"
            )
        else:
            _require_store(store)
            with TaskStore(store) as opened:
                if against is not None:
                    result = calibration.compare_tasks(opened, task_id, against, seed=seed)
                else:
                    result = calibration.calibrate_task(
                        opened,
                        task_id,
                        labels_file=labels,
                        reviewers=tuple(reviewer or ()),
                        half_width=plan_half_width,
                        seed=seed,
                        save=save,
                    )
        render = {
            "json": render_calibration_json,
            "md": render_calibration_markdown,
            "text": render_calibration_text,
        }[format]
        text = render(result)
        if out is None:
            sys.stdout.write(text)
        else:
            from rubric_engine.report.render.output import write_output

            write_output(out, text)
            typer.echo(f"wrote {out}")

    _guard(run)
