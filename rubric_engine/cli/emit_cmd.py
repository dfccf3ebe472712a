"""`rubric-eval emit`: a stored task's results, sent where the traces live.

docs/integrations.md says what each backend receives."""

from __future__ import annotations

from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, app
from rubric_engine.errors import ConfigurationError


@app.command()
def emit(
    task_id: Annotated[str, typer.Argument(help="Task to send (id, name or tag:TAG).")],
    otlp: Annotated[
        str | None,
        typer.Option(
            help="OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318): one gen_ai.evaluation.result "
            "event per row, linked to the span the row came from. Needs the otel extra.",
        ),
    ] = None,
    phoenix: Annotated[
        str | None,
        typer.Option(
            help="Phoenix base URL (e.g. http://127.0.0.1:6006): one span annotation per row "
            "of a trace input, identified by the rubric KEY@VERSION.",
        ),
    ] = None,
    per_requirement: Annotated[
        bool,
        typer.Option(
            "--per-requirement",
            help="Also one event (annotation) per requirement of each row: its status.",
        ),
    ] = False,
    header: Annotated[
        list[str] | None,
        typer.Option(
            help="HTTP header NAME=VALUE for the endpoint (an API key); repeatable. Also read "
            "from $OTEL_EXPORTER_OTLP_HEADERS by the OTLP exporter.",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Send a task's results to an OpenTelemetry backend (--otlp) or Phoenix (--phoenix)."""

    def run() -> None:
        if otlp is None and phoenix is None:
            raise ConfigurationError("say where to send the results: --otlp URL, --phoenix URL")
        headers = parse_headers(header or ())
        if otlp is not None:
            typer.echo(emit_otlp(store, task_id, otlp, per_requirement, headers))
        if phoenix is not None:
            typer.echo(emit_phoenix(store, task_id, phoenix, per_requirement, headers))

    _guard(run)


def parse_headers(texts: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``NAME=VALUE`` texts as a dict.

    Raises:
        ConfigurationError: a text without ``=`` or with an empty name.
    """
    out = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"--header {text!r} is not NAME=VALUE, e.g. api_key=…")
        out[name.strip()] = value
    return out


def emit_otlp(
    store: object, task_ref: str, url: str, per_requirement: bool, headers: dict[str, str]
) -> str:
    """Send the task's events to ``url``; the line to print."""
    from rubric_engine.integrations.otlp_export import logs_endpoint, send_events
    from rubric_engine.integrations.stored_events import task_events

    logs_endpoint(url)  # a bad URL is refused before the store is read
    rated, events = task_events(store, task_ref, per_requirement)  # type: ignore[arg-type]
    sent = send_events(events, url, headers)
    return (
        f"sent {sent.events} gen_ai.evaluation.result event(s) of task {rated.task_id} "
        f"({rated.rubric_ref}) to {sent.endpoint}; {sent.linked} linked to their source span"
    )


def emit_phoenix(
    store: object, task_ref: str, url: str, per_requirement: bool, headers: dict[str, str]
) -> str:
    """Send the task's results to Phoenix as span annotations; the line to print."""
    from rubric_engine.integrations.phoenix import send_annotations
    from rubric_engine.integrations.stored_events import task_events

    rated, events = task_events(store, task_ref, per_requirement)  # type: ignore[arg-type]
    sent = send_annotations(events, url, rated, headers)
    skipped = f"; {sent.unlinked} row(s) without a source span skipped" if sent.unlinked else ""
    return (
        f"sent {sent.annotations} span annotation(s) of task {rated.task_id} to {url} as "
        f"{rated.rubric_ref}{skipped}"
    )
