"""`rubric-eval store …`: whole-store operations (docs/stores.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from rubric_engine.cli._app import HELP_MARKUP, _guard, _store_location, app
from rubric_engine.errors import ExitCode, StoreError

store_app = typer.Typer(
    help="Whole-store operations: copy a store into another.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(store_app, name="store")


@store_app.command("migrate")
def store_migrate(
    source: Annotated[
        Any,
        typer.Option(
            "--from",
            help="The store to copy: sqlite:PATH (or a PATH), or a postgresql:// URL.",
            parser=_store_location,
            metavar="sqlite:PATH|URL",
        ),
    ],
    target: Annotated[
        Any,
        typer.Option(
            "--to",
            help="The store to copy into: a SQLite file (made if new) or a postgresql:// URL "
            "of a database that exists (`createdb NAME`), e.g. postgresql://user@host/db.",
            parser=_store_location,
            metavar="URL|PATH",
        ),
    ],
) -> None:
    """Copy a whole store (tasks, rows, rubric versions, labels) into another store.

    Reports rebuild byte for byte from either afterwards. Nothing is overwritten: a task or a
    rubric version already in the target with other content is refused.
    """

    def run() -> None:
        from rubric_engine.store.copy import copy_store
        from rubric_engine.store.location import store_exists

        if not store_exists(source):
            raise StoreError(
                f"--from {source}: no task store here, so nothing to copy; pass --from the store "
                "to copy: a SQLite file (the default store is .rubric-eval/store.sqlite) or a "
                "postgresql:// URL"
            )
        try:
            summary = copy_store(source, target)
        except KeyboardInterrupt:  # the copy is one transaction on the target, rolled back
            typer.echo(
                f"interrupted: nothing was copied into {target} (a copy is stored whole or not "
                "at all); run the same command again",
                err=True,
            )
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        copied = ", ".join(f"{n} {table}" for table, n in summary.copied.items())
        typer.echo(f"copied {source} into {target}: {copied}")
        if summary.skipped_versions:
            typer.echo(
                "already there with the same content (kept): " + ", ".join(summary.skipped_versions)
            )

    _guard(run)
