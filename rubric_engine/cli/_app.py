"""The typer app, its sub-apps and the helpers every command shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError

# small and free of I/O; typer reads the annotations when the app is built
from rubric_engine.store.location import StoreLocation, parse_location

T = TypeVar("T")

#: help as click lays it out, not rich's panels: click wraps each option's help beside its
#: full name in any terminal width (rich's table cut names to ``--batch-max-reque…`` and the
#: help to a few words at 80 columns) and leaves ``[parquet]`` in help text alone (rich took
#: it for markup and printed nothing)
HELP_MARKUP = None

app = typer.Typer(
    name="rubric-eval",
    help="Score batches of real dialogues with versioned rubric packs and an LLM judge.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
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
    import warnings

    warnings.showwarning = _show_warning


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """A warning as one line, ``warning: …`` (redacted), not Python's file:line and source."""
    from rubric_engine.judge.secrets import redact

    typer.echo(f"warning: {redact(str(message))}", err=True)


rubric_app = typer.Typer(
    help="Rubric packs and their lifecycle: validate, publish, retire, list, show, diff.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
cassette_app = typer.Typer(
    help="Check and author judge cassettes.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP
)
prompt_app = typer.Typer(
    help="Show what the judge is sent.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP
)
batch_app = typer.Typer(
    help="Batch files for any runner: export a task's requests (OpenAI batch input format), "
    "import the results (OpenAI batch output format). docs/batch.md.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(rubric_app, name="rubric")
app.add_typer(cassette_app, name="cassette")
app.add_typer(prompt_app, name="prompt")
app.add_typer(batch_app, name="batch")

#: old name of ``ExitCode.GATE_FAILED``, kept while ``gate_cmd`` imports it
EXIT_GATE_FAILED = ExitCode.GATE_FAILED


def _store_location(value: Any) -> StoreLocation:
    # a postgresql:// URL must not pass through Path, which collapses its "//"
    try:
        return parse_location(value)
    except ConfigurationError as exc:  # a usage error: typer prints it beside the usage line
        raise typer.BadParameter(str(exc)) from None


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
    """Print ``error`` and exit with its code (:class:`ExitCode`; 1 for a foreign error)."""
    from rubric_engine.judge.secrets import redact

    code = error.exit_code if isinstance(error, RubricEvalError) else ExitCode.UNEXPECTED
    # a message may quote an option (--api-base with ?key=…) or a provider's echo of a key
    typer.echo(f"error: {redact(str(error))}", err=True)
    raise typer.Exit(code)


def _guard(fn: Callable[[], T]) -> T:
    """Run a command body; turn our errors into a message and an exit code, no traceback."""
    try:
        return fn()
    except RubricEvalError as exc:
        _fail(exc)


def guard_json(model: type[Any], fn: Callable[[], int]) -> NoReturn:
    """Run a ``--json`` command body that prints its own summary and returns the exit code;
    when it fails before that, print ``model``'s failure summary (``error`` set) on stdout,
    the message on stderr, and exit with the error's code. stdout gets one JSON object."""
    from rubric_engine.judge.secrets import redact
    from rubric_engine.report.summary import failed_summary

    try:
        code = fn()
    except RubricEvalError as exc:
        message = redact(str(exc))
        typer.echo(f"error: {message}", err=True)
        typer.echo(failed_summary(model, int(exc.exit_code), message).to_json())
        raise typer.Exit(exc.exit_code) from None
    except typer.Exit as stop:  # interrupted: the messages went to stderr already
        if stop.exit_code:
            typer.echo(failed_summary(model, stop.exit_code, "interrupted").to_json())
        raise
    raise typer.Exit(code)


def _require_store(store: StoreLocation) -> None:
    """Refuse a store that does not exist (see :func:`rubric_engine.report.run.require_store`)."""
    from rubric_engine.report.run import require_store

    require_store(store)


def print_columns(rows: Sequence[Sequence[str]]) -> None:
    """Plain aligned columns (first row = header): never truncated, easy to grep."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
