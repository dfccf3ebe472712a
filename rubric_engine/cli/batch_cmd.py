"""`rubric-eval batch export` and `rubric-eval batch import`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, batch_app

#: ``batch export``'s options that shape a new task; a TASK id keeps its own (parameter name,
#: option as typed)
_NEW_TASK_ONLY = {
    "rubric": "-r/--rubric",
    "draft": "--draft",
    "model": "--model",
    "input_format": "--input-format",
    "max_reasks": "--max-reasks",
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "report_out": "--report-out",
    "output_mode": "--output-mode",
    "system_as_user": "--system-as-user",
}


def _given(ctx: typer.Context, options: dict[str, str]) -> list[str]:
    """Those of ``options`` the user gave (on the command line or by environment), not left
    at their defaults; a default cannot be told from the same value typed, so click is asked
    (by the source's name: typer carries its own copy of click's ``ParameterSource``)."""
    left = ("DEFAULT", "DEFAULT_MAP")
    return [
        shown
        for name, shown in options.items()
        if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in left
    ]


@batch_app.command("export")
def export(
    ctx: typer.Context,
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Dialogue files (as for score), or one TASK id of a batch-file task to write "
            "the follow-up requests (re-asks) it needs."
        ),
    ],
    out: Annotated[Path, typer.Option(help="Folder for requests-NNN.jsonl and manifest.json.")],
    rubric: Annotated[
        str, typer.Option("--rubric", "-r", help="Published KEY[@N], or a pack FILE with --draft.")
    ] = "",
    draft: Annotated[bool, typer.Option("--draft", help="Allow a pack file.")] = False,
    model: Annotated[
        str, typer.Option(help="litellm model name; the files carry the part after 'provider/'.")
    ] = "openai/gpt-4o-mini",
    input_format: Annotated[str, typer.Option(help="auto, jsonl, json, csv or yaml.")] = "auto",
    max_reasks: Annotated[int, typer.Option(min=0, help="Re-asks after an invalid verdict.")] = 2,
    temperature: Annotated[float, typer.Option(min=0.0, max=2.0)] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=16)] = 1024,
    batch_max_requests: Annotated[int, typer.Option(min=1, help="Requests per file.")] = 50_000,
    batch_max_bytes: Annotated[int, typer.Option(min=1024, help="Bytes per file.")] = 200
    * 1024
    * 1024,
    report_out: Annotated[
        Path | None, typer.Option(help="Where `batch import` writes the reports at the end.")
    ] = None,
    output_mode: Annotated[
        str | None,
        typer.Option(
            help="json, schema or tools, as for score (a new task; a TASK keeps its own). "
            "Default: schema for hosted_vllm/, json otherwise."
        ),
    ] = None,
    system_as_user: Annotated[
        bool,
        typer.Option(
            "--system-as-user",
            help="Send the rubric inside the first user message, as for score (a new task).",
        ),
    ] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Write the judge requests of INPUT rows (a new task) or of TASK as batch input files."""
    from rubric_engine.batch.files import ExportResult, export_requests
    from rubric_engine.batch.run import oversized_warning
    from rubric_engine.dialogue.readers import InputFormat
    from rubric_engine.engine import ScoreOptions
    from rubric_engine.errors import ConfigurationError

    task_id = inputs[0] if len(inputs) == 1 and not Path(inputs[0]).exists() else None
    # a TASK keeps what it was exported with: an option given (not left at its default) would
    # be ignored without a word, so it is refused instead
    named = ", ".join(_given(ctx, _NEW_TASK_ONLY)) if task_id else ""
    options = ScoreOptions(
        inputs=[] if task_id else [Path(p) for p in inputs],
        rubric=rubric,
        draft=draft,
        model=model,
        input_format=cast(InputFormat, input_format),
        max_reasks=max_reasks,
        temperature=temperature,
        max_tokens=max_tokens,
        output_mode=output_mode,
        system_as_user=system_as_user,
        store=store,
        out=report_out,
    )

    def run() -> ExportResult:
        if named:  # a follow-up export asks as the task was exported; nothing else is taken
            raise ConfigurationError(
                f"{named}: task {task_id} keeps what it was exported with; omit {named} to "
                "write its follow-up requests"
            )
        return export_requests(options, out, task_id, batch_max_requests, batch_max_bytes)

    result = _guard(run)
    earlier = result.awaiting - result.requests
    none = "no file (nothing needs an answer)" if not earlier else "no new file"
    names = ", ".join(p.name for p in result.files) or none
    typer.echo(f"task id: {result.task_id}")
    typer.echo(f"wrote {result.requests} request(s) to {out}: {names}; {result.manifest.name}")
    if result.oversized:
        typer.echo(oversized_warning(result.oversized, batch_max_bytes), err=True)
    if earlier:
        typer.echo(
            f"{earlier} request(s) exported before still await answers (manifest.json lists "
            "them); their answers lead to any follow-up requests"
        )
    if result.awaiting:
        typer.echo(f"next: answer them, then `rubric-eval batch import {result.task_id} FILE...`")


@batch_app.command("import")
def import_(
    task: Annotated[str, typer.Argument(help="The task id `batch export` printed.")],
    results: Annotated[
        list[Path], typer.Argument(help="Batch output files (OpenAI batch output format).")
    ],
    out: Annotated[Path | None, typer.Option(help="Report folder when the task completes.")] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Store batch results for TASK and judge what they answer; report when every row is done."""
    from rubric_engine.batch.files import import_results

    result = _guard(lambda: import_results(store, task, results, out))
    parts = [f"matched {result.matched} result(s)"]
    if result.already:
        parts.append(f"{result.already} line(s) already imported (their answers are stored)")
    if result.judged:
        parts.append(
            f"{result.judged} line(s) not used: their row was answered by a later request or "
            "judged without them"
        )
    parts.append(f"ignored {result.ignored} foreign line(s)")
    typer.echo("; ".join(parts))
    if result.needed:
        typer.echo(
            f"{result.needed} request(s) still need an answer (re-asks, unanswered lines): "
            f"`rubric-eval batch export {task} --out DIR`, answer, import again"
        )
        return
    assert result.report is not None
    totals = result.report["totals"]
    typer.echo(
        f"task {task} COMPLETED: {totals['scored']} scored, {totals['judgeErrors']} "
        f"JUDGE_ERROR; reports in {result.out}"
    )
