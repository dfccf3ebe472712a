"""`rubric-eval work`: one worker on a queued task (docs/stores.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, _require_store, app
from rubric_engine.errors import ExitCode


@app.command()
def work(
    task_id: Annotated[
        str,
        typer.Argument(help="A task queued by `score --workers-only`: its id, name, or tag:TAG."),
    ],
    store: StoreOpt = DEFAULT_STORE,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Judge calls in flight in this worker.")
    ] = 8,
    batch: Annotated[int, typer.Option(min=1, help="Rows claimed at a time.")] = 8,
    lease: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="Seconds a claim holds without a heartbeat; a dead worker's rows are "
            "claimed again after it.",
        ),
    ] = 30.0,
    api_base: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint (default: the task's).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Variable holding the API key (default: the task's).")
    ] = None,
    cassettes: Annotated[
        Path | None, typer.Option(help="Cassette folder on this machine (replay tasks).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0.1, help="Per-request timeout, seconds.")
    ] = None,
    transport: Annotated[
        str | None,
        typer.Option(
            help="direct (the default, or $RUBRIC_EVAL_TRANSPORT) or litellm: how live calls "
            "reach openai/, azure/ and hosted_vllm/ judges, as for score."
        ),
    ] = None,
) -> None:
    """Judge rows of a queued task until none is left; the last row completes the task.

    Run it on as many machines as wanted. Exit 0 when no row is left to claim (the task is
    COMPLETED once every row is stored: `rubric-eval report TASK --store URL`); 6 when the
    task's budget (score --max-calls/--max-cost) is used up (the task is STOPPED).
    """
    from rubric_engine.engine.workers import WorkSettings
    from rubric_engine.engine.workers import work as run_work

    settings = WorkSettings(
        concurrency=concurrency,
        batch=batch,
        lease_s=lease,
        api_base=api_base,
        api_key_env=api_key_env,
        cassettes=cassettes,
        timeout_s=timeout,
        transport=transport,
    )

    def run() -> None:
        _require_store(store)
        summary = run_work(store, task_id, settings)
        state = {
            "COMPLETED": "COMPLETED",
            "STOPPED": f"STOPPED: {summary.stop_reason}",
        }.get(summary.state, "not complete yet (other workers hold rows)")
        typer.echo(
            f"worker {summary.worker}: stored {summary.stored} row(s)"
            + (f", {summary.lost} taken over by other workers" if summary.lost else "")
            + f"; task {summary.task_id} {state}"
        )
        if summary.state == "STOPPED":
            raise typer.Exit(ExitCode.BUDGET)

    _guard(run)
