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
    columns) or, with --long, one per (dialogue, requirement). Parquet needs the parquet extra:
    `pip install 'rubric-engine[parquet]'` (in a clone: `pip install -e '.[parquet]'`)."""

    def run() -> None:
        from rubric_engine.report.render.export import check_format, export_task
        from rubric_engine.report.render.output import check_output, unwritable
        from rubric_engine.report.run import require_store
        from rubric_engine.store.task_store import TaskStore

        check_format(format)
        target = Path(f"{task_id}{'-long' if long else ''}.{format}") if out is None else out
        check_output(target)
        require_store(store)
        with TaskStore(store) as opened:  # the rows a page at a time, each written as read
            try:
                count = export_task(
                    opened, task_id, format, target, long=long, pass_score=pass_score
                )
            except OSError as exc:
                raise unwritable(target, "--out", exc) from exc
        typer.echo(f"wrote {target}: {count} row(s)")

    _guard(run)
