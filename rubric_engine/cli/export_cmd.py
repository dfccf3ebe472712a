"""`rubric-eval export`: a task's rows as CSV, Parquet or JSON Lines for analysts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, app
from rubric_engine.errors import ConfigurationError


@app.command()
def export(
    task_id: Annotated[
        str, typer.Argument(help="Task id printed by `score`, a task name, or tag:TAG.")
    ],
    format: Annotated[str, typer.Option("--format", help="csv, parquet or jsonl.")] = "csv",
    long: Annotated[
        bool,
        typer.Option("--long", help="One row per (dialogue, requirement) instead of per dialogue."),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output file (default <task id>[-long].<format>, the id of the task named)."
        ),
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
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        check_format(format)
        _check_suffix(out, format)
        require_store(store)
        with TaskStore(store) as opened:  # the rows a page at a time, each written as read
            task_id_found = resolve_in_store(opened, task_id)  # a name or tag:TAG: its newest
            target = out or Path(f"{task_id_found}{'-long' if long else ''}.{format}")
            check_output(target)
            try:
                count = export_task(
                    opened, task_id_found, format, target, long=long, pass_score=pass_score
                )
            except OSError as exc:
                raise unwritable(target, "--out", exc) from exc
        typer.echo(f"wrote {target}: {count} row(s)")

    _guard(run)


#: the file name endings that say a format; ``--out`` with another format's is refused
_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}


def _check_suffix(out: Path | None, format: str) -> None:
    """Refuse ``--out`` whose ending names another format than ``--format`` (``--out x.json``
    with the default csv wrote CSV into a .json file)."""
    said = _SUFFIXES.get(out.suffix.lower()) if out is not None else None
    if out is not None and said is not None and said != format:
        raise ConfigurationError(
            f"--out {out} ends in {out.suffix}, but --format is {format}: pass --format "
            f"{said}, or name the file {out.with_suffix('.' + format).name}"
        )
