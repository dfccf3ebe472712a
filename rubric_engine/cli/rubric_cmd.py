"""`rubric-eval rubric …` (validate, list, show, publish, retire, diff, schema) and
`rubric-eval renormalize`: the rubric lifecycle of SPEC §3."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import (
    StoreOpt,
    _fail,
    _guard,
    _require_store,
    app,
    print_columns,
    rubric_app,
)
from rubric_engine.errors import ExitCode

RefArg = Annotated[
    str, typer.Argument(help="KEY, KEY@VERSION (from the store) or a pack file.", metavar="REF")
]


@rubric_app.command("validate")
def rubric_validate(files: Annotated[list[Path], typer.Argument(help="Pack files.")]) -> None:
    """Validate rubric packs; every problem and warning of a file is listed with its line and
    field (warnings do not fail validation)."""
    from rubric_engine.errors import RubricError
    from rubric_engine.rubric import load_rubric_checked

    failed = 0
    for path in files:
        try:
            pack, warnings = load_rubric_checked(path)
        except RubricError as exc:
            failed += 1
            typer.echo(f"error: {exc}", err=True)
            continue
        also = f", {len(warnings)} warning(s)" if warnings else ""
        typer.echo(
            f"ok: {path}: {pack.key} v{pack.version} ({pack.status}), "
            f"{len(pack.intents)} intents, {len(pack.requirements_by_id)} requirements, "
            f"{len(pack.red_flags)} red-flag types, hash {pack.content_hash()}{also}"
        )
        for warning in warnings:
            typer.echo(f"  - {warning}")
    if failed:
        raise typer.Exit(ExitCode.BAD_INPUT)


@rubric_app.command("schema")
def rubric_schema(
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of the rubric pack format (for editor validation)."""
    from rubric_engine.rubric import dump_json_schema

    text = dump_json_schema()
    if out is None:
        sys.stdout.write(text)
        return

    def write() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.report.render.output import check_output_file, write_atomic

        check_output_file(out)
        try:
            write_atomic(out, text)
        except OSError as exc:
            raise ConfigurationError(
                f"--out {out} cannot be written ({exc.strerror or exc}); pass a path you can "
                "write to"
            ) from exc

    _guard(write)
    typer.echo(f"wrote {out}")


@rubric_app.command("publish")
def rubric_publish(
    file: Annotated[Path, typer.Argument(help="Pack file to publish.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Validate a pack file and freeze its version in the store (same content again: no-op)."""

    def run() -> None:
        from rubric_engine.errors import RubricError
        from rubric_engine.rubric.versions import RubricRegistry, load_for_publish
        from rubric_engine.store.task_store import TaskStore

        if not file.is_file():
            raise RubricError(f"{file}: pack file not found")
        pack = load_for_publish(file)  # a bad file must not create an empty store
        with TaskStore(store) as opened:
            outcome = RubricRegistry(opened).publish(file, pack)
        v = outcome.version
        if outcome.created:
            typer.echo(f"published {v.ref} ({v.content_hash[:19]}…) from {file}")
        else:
            typer.echo(f"{v.ref} is already published with this content; nothing changed")

    _guard(run)


@rubric_app.command("retire")
def rubric_retire(
    ref: Annotated[str, typer.Argument(help="KEY@VERSION to retire.", metavar="KEY@VERSION")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Retire a published version: no new tasks may use it; old tasks and reports stay readable."""

    def run() -> None:
        from rubric_engine.rubric.versions import RubricRegistry
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            registry = RubricRegistry(opened)
            version, changed = registry.retire(ref)
            live = [v.ref for v in registry.versions(version.key) if v.status == "PUBLISHED"]
        if not changed:
            typer.echo(f"{version.ref} was already retired on {version.retired_at}")
            return
        left = f"published now: {', '.join(live)}" if live else "no version is published now"
        typer.echo(f"retired {version.ref}; {left}")

    _guard(run)


@rubric_app.command("list")
def rubric_list(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the published and retired rubric versions in the store."""

    def run() -> None:
        from rubric_engine.rubric.versions import RubricRegistry
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            registry = RubricRegistry(opened)
            versions, used = registry.versions(), registry.task_counts()
        if not versions:
            typer.echo(f"{store}: nothing published yet; `rubric-eval rubric publish FILE`")
            return
        rows = [("rubric", "status", "content hash", "published", "retired", "tasks")]
        rows += [
            (
                v.ref,
                str(v.status),
                v.content_hash[:19] + "…",
                v.published_at,
                v.retired_at or "-",
                str(used.get((v.key, v.version), 0)),
            )
            for v in versions
        ]
        print_columns(rows)

    _guard(run)


@rubric_app.command("show")
def rubric_show(
    ref: RefArg,
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="text (summary), json (the stored pack) or yaml (the pack as a DRAFT file: "
            "`--format yaml > v2.yaml` starts the next version).",
        ),
    ] = "text",
) -> None:
    """Show one rubric version: its requirements, intents and red-flag types."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("text", "yaml", "json"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use text, yaml or json"))

    def run() -> None:
        import json

        import yaml

        from rubric_engine.rubric.versions import rubric_at

        rubric, label = rubric_at(ref, store)
        if format == "json":
            sys.stdout.write(json.dumps(rubric.snapshot(), ensure_ascii=False, indent=2) + "\n")
        elif format == "yaml":  # a starting point for the next version's file: a draft
            draft = {**rubric.snapshot(), "status": "DRAFT"}
            sys.stdout.write(
                f"# {label} as a draft to edit: set `version:` to a new number, then "
                "`rubric-eval rubric publish` this file.\n"
                + yaml.safe_dump(draft, allow_unicode=True, sort_keys=False, width=100)
            )
        else:
            _print_pack(rubric, label)

    _guard(run)


def _print_pack(rubric: Any, label: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{rubric.name}[/bold] — {label}, language {rubric.language}, scale "
        f"{rubric.score_scale.min}–{rubric.score_scale.max}, hash {rubric.content_hash()}"
    )
    console.print("intents: " + ", ".join(f"{i.key} ({i.name})" for i in rubric.intents))
    console.print("red-flag types: " + (", ".join(rubric.red_flag_types) or "none (no red lines)"))
    header = ("requirement", "where", "category", "red line", "cap", "observable", "text")
    owners = [("common", r) for r in rubric.common_requirements] + [
        (i.key, r) for i in rubric.intents for r in i.requirements
    ]
    rows = [
        (
            r.id,
            where,
            r.category,
            r.red_flag_type or "",
            "" if r.violation_score is None else str(r.violation_score),
            "yes" if r.observable_in_data else "no",
            " ".join(r.text.split()),
        )
        for where, r in owners
    ]
    if not console.is_terminal:  # piped: plain columns, nothing cut to fit 80 characters
        print_columns([header, *rows])
        return
    table = Table()
    for column in header:
        table.add_column(column, no_wrap=column == "requirement")
    for row in rows:
        table.add_row(*row)
    console.print(table)


@rubric_app.command("diff")
def rubric_diff(
    before: Annotated[
        str,
        typer.Argument(help="KEY, KEY@VERSION or a pack file: the older side.", metavar="BEFORE"),
    ],
    after: Annotated[
        str,
        typer.Argument(help="KEY, KEY@VERSION or a pack file: the newer side.", metavar="AFTER"),
    ],
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
) -> None:
    """What changed from BEFORE to AFTER: requirements, intents, red-flag types, caps, scale."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("text", "json"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use text or json"))

    def run() -> None:
        import json

        from rubric_engine.rubric.diff import diff_rubrics
        from rubric_engine.rubric.versions import rubric_at

        (old, old_label), (new, new_label) = rubric_at(before, store), rubric_at(after, store)
        diff = diff_rubrics(old, new)
        if format == "json":
            sys.stdout.write(json.dumps(diff.to_json(), ensure_ascii=False, indent=2) + "\n")
        else:
            typer.echo(f"before: {old_label}\nafter:  {new_label}")
            sys.stdout.write(diff.render())

    _guard(run)


@app.command()
def renormalize(
    task_id: Annotated[str, typer.Argument(help="Task whose stored judge outputs are re-used.")],
    rubric: Annotated[
        str,
        typer.Option(
            "--rubric", "-r", help="KEY@VERSION to re-apply (or a pack file with --draft)."
        ),
    ],
    draft: Annotated[bool, typer.Option("--draft", help="Allow a pack file.")] = False,
    store: StoreOpt = DEFAULT_STORE,
    out: Annotated[
        Path | None, typer.Option(help="Report folder (default reports/<new task id>).")
    ] = None,
) -> None:
    """What-if, no judge calls: re-apply another version's caps, observability and red-flag
    mapping to a task's stored judge outputs; writes a new task and its report."""

    def run() -> None:
        from rich.console import Console

        from rubric_engine.engine import report_command
        from rubric_engine.engine.renormalize import renormalize as run_renormalize
        from rubric_engine.report.render.console import print_summary

        _require_store(store)
        result = run_renormalize(store, task_id, rubric, draft, out)
        sys.stdout.write(result.diff.render())
        console = Console()
        print_summary(result.report, console)
        console.print(f"reports: {result.files.json}  {result.files.markdown}")
        console.print(
            f"task id: {result.task_id} (from {result.source_task_id}); compare with "
            f"`{report_command(result.source_task_id, store)}`"
        )

    _guard(run)
