"""The typer app, its sub-apps and the helpers every command shares."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

# small and free of I/O; typer reads the annotations when the app is built
from rubric_engine.stores.location import StoreLocation, parse_location

app = typer.Typer(
    name="rubric-eval",
    help="Score batches of real dialogues with versioned rubric packs and an LLM judge.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from rubric_engine import __version__

        typer.echo(f"rubric-eval {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Score batches of real dialogues with versioned rubric packs and an LLM judge."""


rubric_app = typer.Typer(
    help="Rubric packs and their lifecycle: validate, publish, retire, list, show, diff.",
    no_args_is_help=True,
)
cassette_app = typer.Typer(help="Check and author judge cassettes.", no_args_is_help=True)
prompt_app = typer.Typer(help="Show what the judge is sent.", no_args_is_help=True)
app.add_typer(rubric_app, name="rubric")
app.add_typer(cassette_app, name="cassette")
app.add_typer(prompt_app, name="prompt")

EXIT_CASSETTE_MISS = 4
EXIT_NOTHING_SCORED = 5
EXIT_BUDGET = 6
EXIT_GATE_FAILED = 7


def _store_location(value: Any) -> StoreLocation:
    # a postgresql:// URL must not pass through Path, which collapses its "//"
    return parse_location(value)


#: typer takes no Union annotation; the parser returns a StoreLocation (Path | PostgresUrl)
StoreOpt = Annotated[
    Any,
    typer.Option(
        "--store",
        help="Task store: a SQLite file path, or a postgresql:// URL (a team store).",
        envvar="RUBRIC_EVAL_STORE",
        parser=_store_location,
        metavar="PATH|URL",
    ),
]


def _fail(error: Exception) -> NoReturn:
    from rubric_engine.errors import RubricEvalError

    code = error.exit_code if isinstance(error, RubricEvalError) else 1
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(code)


def _guard(fn: Any) -> Any:
    """Run a command body; turn our errors into a message and an exit code, no traceback."""
    from rubric_engine.errors import RubricEvalError

    try:
        return fn()
    except RubricEvalError as exc:
        _fail(exc)


def _require_store(store: StoreLocation) -> None:
    from rubric_engine.errors import StoreError
    from rubric_engine.stores.location import store_exists

    if not isinstance(store, Path):  # a PostgreSQL URL (parsed by StoreOpt)
        if not store_exists(store):
            raise StoreError(
                f"{store}: the database holds no task store yet; start one: `rubric-eval "
                "rubric publish FILE --store URL` then `rubric-eval score INPUT --rubric KEY`"
            )
        return
    if store.is_dir():
        raise StoreError(f"{store} is a folder; --store takes the path of a store file")
    if not store.is_file():
        raise StoreError(
            f"{store}: no task store here; pass --store PATH, or start one: "
            "`rubric-eval rubric publish FILE` then `rubric-eval score INPUT --rubric KEY`"
        )


def print_columns(rows: Sequence[Sequence[str]]) -> None:
    """Plain aligned columns (first row = header): never truncated, easy to grep."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
