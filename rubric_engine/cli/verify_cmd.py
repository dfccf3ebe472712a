"""`rubric-eval verify`: re-derive a stored task's rows and check their digests (docs/verify.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, _require_store, app

#: failing rows printed before "… and N more"
_SHOWN = 50


@app.command()
def verify(
    task_id: Annotated[
        str, typer.Argument(help="Task id printed by `score`, a task name, or tag:TAG.")
    ],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Re-derive every stored row of a task from its stored judge replies and rubric snapshot,
    compare byte for byte, check each row's digest and that its scores are possible (exit 3 on
    any difference)."""

    def run() -> None:
        from rubric_engine.engine.verify import verify_task
        from rubric_engine.errors import StoreError
        from rubric_engine.store.digest import SIGNING_KEY_ENV

        _require_store(store)
        found = verify_task(store, task_id)
        for row_id, problem in found.problems[:_SHOWN]:
            typer.echo(f"{row_id}: {problem}")
        if len(found.problems) > _SHOWN:
            typer.echo(f"… and {len(found.problems) - _SHOWN} more")
        for problem in found.aggregates:
            typer.echo(f"task: {problem}")
        digests = (
            f"digests checked ({found.digests})"
            if found.digests
            else f"{found.undigested} row(s) not verifiable by digest: stored before digests"
            + (" (unsigned: the signing key has nothing to check)" if found.key_set else "")
        )
        summary = (
            f"task {found.task_id}: {found.derived} of {found.rows} row(s) re-derived byte for "
            f"byte from their stored replies; {digests}"
        )
        if found.unsigned and found.problems == [] and len(found.aggregates) == 1:
            raise StoreError(
                f"verify failed for {summary}, but the signing key is set and the task's rows "
                f"are not signed: it was scored without the key (unset ${SIGNING_KEY_ENV} to "
                "verify it by its plain digests), or its signatures were replaced by plain "
                "digests (restore the store from a backup)"
            )
        if not found.ok:
            failing = len({row for row, _ in found.problems})
            raise StoreError(
                f"verify failed for {summary}; {failing} row(s) with problems listed above"
                + (", and the task's aggregates" if found.aggregates else "")
                + ". The store was changed after the rows were written, or the rows were not "
                "written by this rubric-eval; restore it from a backup or score again"
            )
        typer.echo(f"verified {summary}; aggregates possible")
        if found.state != "COMPLETED":
            typer.echo(
                f"the task is {found.state}: {found.rows} of {found.planned} planned rows are "
                "stored and were verified; the rest are not judged yet (`rubric-eval score "
                f"--resume {found.task_id}` judges them, then verify again)"
            )

    _guard(run)
