"""`rubric-eval export`: a task's rows as CSV, Parquet or JSON Lines for analysts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, app


@app.command()
def export(
    task_id: Annotated[str, typer.Argument(help="Task id printed by `score`.")],
    format: Annotated[str, typer.Option("--format", help="csv, parquet or jsonl.")] = "csv",
    long: Annotated[
        bool,
        typer.Option("--long", help="One row per (dialogue, requirement) instead of per dialogue."),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Output file (default <task id>[-long].<format>).")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    pass_score: Annotated[
        int | None,
        typer.Option(help="Lowest passing final score (default: one below the scale's top)."),
    ] = None,
) -> None:
    """Export one row per dialogue (outcome, verdict, scores, red flags, intent, metadata
    columns) or, with --long, one per (dialogue, requirement). Parquet needs
    `pip install 'rubric-engine[parquet]'`."""

    def run() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.report.outcome import default_pass_score
        from rubric_engine.report.render.export import (
            FORMATS,
            long_records,
            wide_records,
            write_export,
        )
        from rubric_engine.report.run import _load

        if format not in FORMATS:
            raise ConfigurationError(
                f"--format {format!r} is not valid; use one of {', '.join(FORMATS)}"
            )
        task = _load(store, task_id)
        ps = pass_score if pass_score is not None else default_pass_score(task.rubric)
        records = (long_records if long else wide_records)(task, ps)
        target = Path(f"{task_id}{'-long' if long else ''}.{format}") if out is None else out
        write_export(records, format, target)
        typer.echo(f"wrote {target}: {len(records)} row(s)")

    _guard(run)
