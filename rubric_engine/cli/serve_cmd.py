"""`rubric-eval serve`: the review web app over a task store (docs/review.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, _require_store, app

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_notice(host: str, port: int, store: object) -> tuple[str, bool]:
    """What ``serve`` prints before it listens, and whether it is a warning (stderr)."""
    if is_loopback(host):
        return (
            f"serving {store} on http://{host}:{port}/ (loopback only: not reachable from "
            "other machines)",
            False,
        )
    return (
        f"warning: serving {store} on {host}:{port}, reachable from other machines; there are "
        "no accounts: anyone who can reach it can read the dialogues and write labels. Use the "
        "default --host 127.0.0.1 unless you mean this.",
        True,
    )


@app.command()
def serve(
    store: StoreOpt = DEFAULT_STORE,
    host: Annotated[
        str,
        typer.Option(help="Address to bind. The default is reachable from this machine only."),
    ] = LOOPBACK,
    port: Annotated[
        int, typer.Option(help="Port to listen on (0: any free port).", min=0, max=65535)
    ] = 8765,
    reviewer: Annotated[
        str | None,
        typer.Option(help="Your reviewer name (else the page asks on first use)."),
    ] = None,
    blind: Annotated[
        bool,
        typer.Option(help="Review pages hide the judge's verdict until the reviewer answers."),
    ] = False,
    reviewers_per_row: Annotated[int, typer.Option(help="Reviewers every row needs.")] = 1,
    second_review: Annotated[
        float, typer.Option(help="Share of rows (0-1) that get one more reviewer.")
    ] = 0.2,
    claim_ttl: Annotated[
        int, typer.Option(help="Seconds an opened row stays reserved for its reviewer.")
    ] = 600,
    seed: Annotated[
        int, typer.Option(help="Seed of the second-review sample and random queue.")
    ] = 0,
) -> None:
    """Browse tasks, compare runs and review judge verdicts in the browser (labels are stored).

    Needs the `serve` extra: pip install 'rubric-engine[serve]'.
    """

    def run() -> None:
        from rubric_engine.errors import ConfigurationError

        try:
            import uvicorn
        except ImportError as exc:
            raise ConfigurationError(
                "serve needs the optional web packages: pip install 'rubric-engine[serve]'"
            ) from exc
        from rubric_engine.review.queue import QueuePolicy
        from rubric_engine.serve.app import ServeConfig, create_app

        _require_store(store)
        if not 1 <= claim_ttl <= 86400:
            raise ConfigurationError("--claim-ttl must be 1 to 86400 seconds")
        policy = QueuePolicy(reviewers_per_row, second_review, seed)
        config = ServeConfig(
            store, reviewer=reviewer, blind=blind, policy=policy, claim_ttl_s=claim_ttl
        )
        notice, warning = bind_notice(host, port, store)
        typer.echo(notice, err=warning)
        uvicorn.run(create_app(config), host=host, port=port, log_level="warning")

    _guard(run)
