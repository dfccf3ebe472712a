"""`rubric-eval labels import|export|convert`: human labels in and out of the task store."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import HELP_MARKUP, StoreOpt, _guard, _require_store, app
from rubric_engine.errors import ExitCode

labels_app = typer.Typer(
    help="Human labels per requirement: import, export, convert published label sets.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(labels_app, name="labels")
_SOURCES = ("review", "import", "adjudication")


@labels_app.command("import")
def labels_import(
    file: Annotated[Path, typer.Argument(help="Labels, JSONL (.jsonl) or CSV (.csv).")],
    task: Annotated[
        str | None,
        typer.Option(help="Check the labels against this task's rows, requirements and rubric."),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(help="Set every label's source: review, import or adjudication."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Validate every line, then store all labels (append-only) or none."""
    stored: list[bool] = []

    def run() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.store.task_store import TaskStore

        if source is not None and source not in _SOURCES:
            raise ConfigurationError(f"--source {source!r} is not valid; use {', '.join(_SOURCES)}")
        if task is not None:
            _require_store(store)
            with TaskStore(store) as opened:
                added, superseding, unchanged, extra = _import_for_task(opened, file, task, source)
        else:
            from rubric_engine.labels.import_file import import_label_file

            with TaskStore(store) as opened:  # the file is read a line at a time
                imported = import_label_file(opened, file, source)
            added, superseding, unchanged = imported.added, imported.superseding, imported.unchanged
            extra = list(imported.unknown_fields)
        stored.append(True)
        if extra:
            typer.echo(
                f"note: kept field(s) this format does not define under metadata: "
                f"{', '.join(extra)} (a misspelt field name shows here)",
                err=True,
            )
        typer.echo(
            f"imported {added} label(s) from {file} ({superseding} superseding an "
            f"earlier label), {unchanged} unchanged"
        )

    try:
        _guard(run)
    except KeyboardInterrupt:
        if not stored:  # the import is one transaction, rolled back
            typer.echo(
                f"interrupted: nothing of {file} was stored (an import is stored whole or not "
                "at all); run the import again",
                err=True,
            )
        raise typer.Exit(ExitCode.INTERRUPTED) from None


def _import_for_task(
    opened: Any, file: Path, task: str, source: str | None
) -> tuple[int, int, int, list[str]]:
    """``labels import FILE --task TASK``: the labels checked against the task's rows, stored
    and the rows' review state refreshed; (added, superseding, unchanged, unknown fields)."""
    from rubric_engine.errors import InputError
    from rubric_engine.labels.io import read_against_task, reviewer_case_problems, unknown_fields
    from rubric_engine.labels.store import labels_transaction, reviewer_order, store_labels
    from rubric_engine.report import load_task
    from rubric_engine.review.queue_store import refresh_rows

    loaded = load_task(opened, task)
    labels = read_against_task(file, loaded, opened.backend, source)
    rows = sorted({lab.row_id for lab in labels})
    key = loaded.record.rubric_key
    stored = reviewer_order(opened.backend, key)
    twins = reviewer_case_problems(file, key, (lab.reviewer for lab in labels), stored)
    if twins:
        raise InputError(f"{file}: {len(twins)} problem(s); nothing was imported", twins)
    with labels_transaction(opened.backend):  # and the rows' review state in the task's queues
        outcome = store_labels(opened.backend, labels)
        refresh_rows(opened, loaded.record.id, rows)
    superseding = sum(1 for lab in outcome.added if lab.supersedes)
    return len(outcome.added), superseding, outcome.unchanged, unknown_fields(labels)


@labels_app.command("export")
def labels_export(
    task: Annotated[str, typer.Argument(help="Task whose rows' labels to export.")],
    format: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
    all_versions: Annotated[
        bool, typer.Option("--all", help="Include superseded labels (the full history).")
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Labels of the task's rubric on the task's rows, in the order they were stored."""

    def run() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.labels.io import label_lines
        from rubric_engine.labels.store import labels_on_task_rows
        from rubric_engine.report.render.output import write_output
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        if format not in ("jsonl", "csv"):
            raise ConfigurationError(f"--format {format!r} is not valid; use jsonl or csv")
        _require_store(store)
        with TaskStore(store) as opened:  # a page of labels at a time, each written as read
            record = opened.task(resolve_in_store(opened, task))
            found = labels_on_task_rows(
                opened.backend, record.rubric_key, record.id, include_superseded=all_versions
            )
            count = [0]

            def counted() -> Iterator[Any]:
                for label in found:
                    count[0] += 1
                    yield label

            lines = label_lines(counted(), format)
            if out is None:
                sys.stdout.writelines(lines)
            else:
                write_output(out, lines, make_folder=False)
                typer.echo(f"wrote {count[0]} label(s) to {out}")

    _guard(run)


@labels_app.command("convert")
def labels_convert(
    kind: Annotated[str, typer.Argument(help="llm-rubric, tau2 or healthbench.")],
    path: Annotated[
        Path,
        typer.Argument(
            help="llm-rubric: its data folder; tau2: a results JSON; healthbench: graded JSONL."
        ),
    ],
    out: Annotated[Path, typer.Option(help="Folder for the label file(s).")] = Path("labels"),
    question: Annotated[str, typer.Option(help="llm-rubric: the question (Q0–Q8).")] = "Q0",
    answer: Annotated[
        str, typer.Option(help="llm-rubric: the judge's answer: expected, argmax or sample.")
    ] = "expected",
) -> None:
    """Turn a published label set into label files (llm-rubric: human.jsonl + judge.jsonl)."""

    def run() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.labels import datasets
        from rubric_engine.labels.io import render_labels

        files: dict[str, list] = {}  # type: ignore[type-arg]
        if kind == "llm-rubric":
            if answer not in ("expected", "argmax", "sample"):
                raise ConfigurationError(
                    f"--answer {answer!r} is not valid; use expected, argmax or sample"
                )
            human, judge = datasets.llm_rubric_labels(path, question=question, answer=answer)  # type: ignore[arg-type]
            files = {"human.jsonl": human, "judge.jsonl": judge}
            if answer == "expected":
                rounded = sum(1 for lab in judge if lab.score != lab.metadata["expectedAnswer"])
                typer.echo(
                    f"the judge's expected answer is rounded to the nearest whole point, halves "
                    f"up ({rounded} of {len(judge)} changed; metadata.expectedAnswer keeps it)"
                )
        elif kind == "tau2":
            files = {f"{path.stem}.labels.jsonl": datasets.tau2_labels(path)}
        elif kind == "healthbench":
            files = {f"{path.stem}.labels.jsonl": datasets.healthbench_labels(path)}
        else:
            raise ConfigurationError(
                f"{kind!r} is not a known label set; valid: llm-rubric, tau2, healthbench"
            )
        from rubric_engine.report.render.output import write_output

        for name, labels in files.items():
            write_output(out / name, render_labels(labels, "jsonl"))
            typer.echo(f"wrote {len(labels)} label(s) to {out / name}")

    _guard(run)
