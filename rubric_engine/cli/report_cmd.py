"""`rubric-eval report` and `rubric-eval tasks`: read the task store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _fail, _guard, _require_store, app, print_columns

if TYPE_CHECKING:
    from rubric_engine.store.task_store import TaskRecord, TaskStore


@app.command()
def report(
    task_id: Annotated[
        str, typer.Argument(help="Task id printed by `score`, a task name, or tag:TAG.")
    ],
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[
        str,
        typer.Option(
            "--format", help="json, md or html (printed to stdout unless --out is given)."
        ),
    ] = "md",
    out: Annotated[
        Path | None,
        typer.Option(help="Write report.json, report.md, report.html and rows.jsonl here."),
    ] = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            help="Slice outcomes and per-requirement compliance by intent, category or a row "
            "metadata field (e.g. scenario); repeatable.",
        ),
    ] = None,
    pass_score: Annotated[
        int | None,
        typer.Option(help="Lowest passing final score (default: one below the scale's top)."),
    ] = None,
) -> None:
    """Rebuild a task's report from the store (its own rubric snapshot, not current files)."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("json", "md", "html"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use json, md or html"))

    def run() -> None:
        from rubric_engine.report.render.json_md import render_json, render_markdown
        from rubric_engine.report.stored import (
            html_report,
            stream_report,
            with_calibration,
            write_reports,
        )
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            from rubric_engine.store.task_ref import resolve_in_store

            resolved = resolve_in_store(opened, task_id)
            # one pass over the rows, a row at a time (memory does not grow with the task)
            # a name given twice (`--by intent --by intent`) is one slice, not two sections
            slices = tuple(dict.fromkeys(by or ()))
            task = stream_report(opened, resolved, pass_score=pass_score, by=slices)
            built = task.report
            # report.json never holds it; report.md and report.html show it once there is one
            built = with_calibration(opened, task, built)
            if out is not None:
                try:
                    files = write_reports(opened, resolved, built, out, task=task)
                except OSError as exc:  # a full disk, a file where the folder should be
                    from rubric_engine.engine.run import ReportFilesError

                    raise ReportFilesError(
                        f"the report files of task {resolved} could not be written to {out} "
                        f"({exc.strerror or exc}); some of report.json, report.md, report.html "
                        "and rows.jsonl may be missing there or left from an earlier run. The "
                        "store is unchanged: free space or pick another --out and run again"
                    ) from exc
                typer.echo(f"wrote {files.json}, {files.markdown}, {files.html}, {files.rows}")
            elif format == "html":
                sys.stdout.write(html_report(opened, task, built))
            else:
                sys.stdout.write(render_json(built) if format == "json" else render_markdown(built))

    _guard(run)


def _shown_state(store: TaskStore, task: TaskRecord) -> str:
    """The stored state; for a RUNNING task no process holds (killed before it could say so)
    that it is stale and how to finish it; for a STOPPED one why it stopped (a budget, the
    judge, or a batch-file task waiting for its answers). The stored state is left as it is."""
    if task.state == "RUNNING" and not store.task_held(task.id):
        return f"RUNNING (stale: no process holds it; score --resume {task.id})"
    reason = task.extra.get("stopReason")
    if task.state == "STOPPED" and isinstance(reason, str) and reason:
        return f"STOPPED ({reason})"
    return task.state


@app.command()
def tasks(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the tasks in the store."""

    def run() -> None:
        from rubric_engine.store.task_ref import TAG_PREFIX, task_name, task_tags
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        rows = [("task", "created", "state", "rubric", "judge", "rows done/planned", "name/tags")]
        with TaskStore(store) as opened:
            done = opened.finished_rows()
            rows += [
                (
                    t.id,
                    t.created_at,
                    _shown_state(opened, t),
                    f"{t.rubric_key} v{t.rubric_version} ({t.rubric_status})",
                    f"{t.model} ({t.judge_mode})",
                    f"{done.get(t.id, 0)}/{t.row_count}",
                    " ".join(
                        [task_name(t.extra) or "", *(TAG_PREFIX + g for g in task_tags(t.extra))]
                    ).strip(),
                )
                for t in opened.tasks()
            ]
        if len(rows) == 1:
            typer.echo(f"{store}: no tasks yet")
            return
        print_columns(rows)

    _guard(run)
