"""`rubric-eval rubric …`: validate packs, export the schema."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rubric_engine.cli._app import rubric_app


@rubric_app.command("validate")
def rubric_validate(files: Annotated[list[Path], typer.Argument(help="Pack files.")]) -> None:
    """Validate rubric packs; every problem of a file is listed with its line and field."""
    from rubric_engine.errors import RubricError
    from rubric_engine.rubric import load_rubric

    failed = 0
    for path in files:
        try:
            pack = load_rubric(path)
        except RubricError as exc:
            failed += 1
            typer.echo(f"error: {exc}", err=True)
            continue
        typer.echo(
            f"ok: {path}: {pack.key} v{pack.version} ({pack.status}), "
            f"{len(pack.intents)} intents, {len(pack.requirements_by_id)} requirements, "
            f"{len(pack.red_flags)} red-flag types, hash {pack.content_hash()}"
        )
    if failed:
        raise typer.Exit(2)


@rubric_app.command("schema")
def rubric_schema(
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of the rubric pack format (for editor validation)."""
    from rubric_engine.rubric import dump_json_schema

    text = dump_json_schema()
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}")
