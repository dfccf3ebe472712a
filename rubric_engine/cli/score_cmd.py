"""`rubric-eval score`: parse the options, call :func:`rubric_engine.engine.score`, print.

Every default comes from :data:`rubric_engine.engine.options.DEFAULTS` and every value is
checked by :func:`~rubric_engine.engine.options.check_options`, so the command and the
library accept the same values with the same messages.
"""

from __future__ import annotations

import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from rubric_engine.cli._app import StoreOpt, _guard, app, guard_json
from rubric_engine.engine.options import DEFAULTS as D
from rubric_engine.errors import ExitCode

if TYPE_CHECKING:
    from types import FrameType

    from rich.progress import TaskID

    from rubric_engine.engine import ScoreOptions, ScoreResult
    from rubric_engine.results.model import RowResult


@app.command()
def score(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Dialogue or case files: .jsonl rows, a .json array (or tau2-bench results, "
            "tau-bench trajectories, diagnosis cases), .csv or .yaml. Not with --resume."
        ),
    ] = None,
    rubric: Annotated[
        str,
        typer.Option(
            "--rubric",
            "-r",
            help="Published rubric KEY (its latest PUBLISHED version) or KEY@VERSION from the "
            "store; or a pack FILE together with --draft. Optional with --judge none.",
        ),
    ] = str(D.rubric),
    judge: Annotated[
        list[str] | None,
        typer.Option(
            help="llm (default): the LLM judge (--model) plus rule checks; none: rule checks "
            "only (no judge call, no cassettes, no API key); MODEL: that judge model. Given "
            "more than once with models (--judge A --judge B), a panel: every row is judged "
            "by each judge (--samples K times each), every answer kept, the row's result "
            "their aggregate, and the report compares the judges (docs/panels.md).",
            metavar="llm|none|MODEL",
        ),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            help="replay: answer from cassettes, offline; record: "
            "call the provider and save cassettes; live: call the "
            "provider; batch: the same requests through the provider's batch API (about half "
            "the price, results within 24 h; docs/batch.md)."
        ),
    ] = D.mode,
    cassettes: Annotated[
        Path,
        typer.Option(
            help="Cassette folder (replay reads all *.jsonl "
            "under it; record appends to "
            "DIR/<rubricKey>/<input>.jsonl)."
        ),
    ] = D.cassettes,
    model: Annotated[str, typer.Option(help="litellm model name of the judge.")] = D.model,
    api_base: Annotated[
        str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    ] = D.api_base,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the API key (never stored); default: the "
            "provider's usual one, e.g. OPENAI_API_KEY."
        ),
    ] = D.api_key_env,
    concurrency: Annotated[int, typer.Option(help="Judge calls in flight.")] = D.concurrency,
    store: StoreOpt = D.store,
    out: Annotated[
        Path | None, typer.Option(help="Report folder (default reports/<task id>).")
    ] = D.out,
    input_format: Annotated[
        str, typer.Option(help="auto, jsonl, json, csv or yaml.")
    ] = D.input_format,
    prompt: Annotated[
        str | None,
        typer.Option(
            help="Judge prompt template under prompts/ (default judge_v1, which the demo "
            "cassettes are keyed by; judge_v3 also asks for evidence turns)."
        ),
    ] = None,
    max_reasks: Annotated[
        int, typer.Option(help="Re-asks after an invalid verdict (0 or more).")
    ] = D.max_reasks,
    temperature: Annotated[
        float, typer.Option(help="Judge sampling temperature, 0 to 2.")
    ] = D.temperature,
    max_tokens: Annotated[
        int, typer.Option(help="Judge output token limit (at least 16).")
    ] = D.max_tokens,
    samples: Annotated[
        int,
        typer.Option(
            help="Ask the judge K times per row (1 to 25); the row's result is the samples' "
            "aggregate and the report gains a stability section (docs/stability.md)."
        ),
    ] = D.samples,
    samples_when: Annotated[
        str,
        typer.Option(
            help="always: every judged row K times; unsure: a second sample only for rows near "
            "the pass line or with a red flag, the rest only when the first two disagree."
        ),
    ] = D.samples_when,
    seed: Annotated[
        int | None,
        typer.Option(help="Sampling seed sent to the provider (where supported); recorded."),
    ] = D.seed,
    timeout: Annotated[
        float, typer.Option(help="Per-request timeout, seconds (at least 0.1).")
    ] = D.timeout_s,
    restart_wait: Annotated[
        float,
        typer.Option(
            help="Seconds a refused connection to a self-hosted --api-base (loopback or a "
            "private network) is retried for, so a server restarting (loading its model) "
            "loses no row; 0 retries it like any error."
        ),
    ] = D.restart_wait_s,
    transport: Annotated[
        str | None,
        typer.Option(
            help="direct (the default, or $RUBRIC_EVAL_TRANSPORT) or litellm: how live calls "
            "reach openai/, azure/ and hosted_vllm/ judges; direct is one HTTP session sending "
            "the requests litellm would, with far less CPU per call."
        ),
    ] = D.transport,
    draft: Annotated[
        bool,
        typer.Option(
            "--draft",
            help="Allow --rubric to be a pack file that is not published (a trial run; the task "
            "and report say draft).",
        ),
    ] = D.draft,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="TASK",
            help="Finish a stopped, interrupted or killed task: judge only its rows that have no "
            "result (and rows that never reached the judge). Inputs, rubric, model and mode "
            "come from the task. TASK is its id, name or tag:TAG (the newest task carrying it).",
        ),
    ] = D.resume,
    max_calls: Annotated[
        int | None,
        typer.Option(
            help="Budget of this run: at most this many judge calls (all attempts: re-asks "
            "and retries too; at least 1). It is not kept for --resume: give it again there "
            "(a new count for that run). With --workers-only it is the task's, across workers."
        ),
    ] = D.max_calls,
    max_cost: Annotated[
        float | None,
        typer.Option(
            help="Budget of this run: stop after this much spend, in USD. It is not kept for "
            "--resume: give it again there (a new amount for that run). With --workers-only "
            "it is the task's, across workers."
        ),
    ] = D.max_cost_usd,
    name: Annotated[
        str | None,
        typer.Option(
            help="A name for the task; report, diff, gate, calibrate and serve take it for the "
            "id (the newest task of that name)."
        ),
    ] = D.name,
    tag: Annotated[
        list[str] | None,
        typer.Option(help="A tag for the task (repeatable); refer to it as tag:TAG."),
    ] = None,
    output_mode: Annotated[
        str | None,
        typer.Option(
            help="How the verdict's shape is asked for: json (schema in the prompt, JSON "
            "mode), schema (the server enforces the constrained schema; falls back once from "
            "OpenAI's json_schema form to json_object+schema), tools (a forced tool call). "
            "Default: schema for hosted_vllm/, json otherwise. See docs/self-hosted-judge.md."
        ),
    ] = D.output_mode,
    system_as_user: Annotated[
        bool,
        typer.Option(
            "--system-as-user",
            help="Send the rubric inside the first user message, for servers whose chat "
            "template drops system messages (a different prompt, so other cassettes).",
        ),
    ] = D.system_as_user,
    prompt_cache: Annotated[
        bool,
        typer.Option(
            "--prompt-cache/--no-prompt-cache",
            help="Mark the static rubric prefix cacheable for providers whose prompt caching "
            "needs explicit markers (anthropic/, Claude on bedrock/ and vertex_ai/); OpenAI-"
            "protocol providers cache on their own and are never changed. A transport "
            "setting: cassette keys do not depend on it.",
        ),
    ] = D.prompt_cache,
    max_context: Annotated[
        int | None,
        typer.Option(
            help="The judge model's context in tokens: rows that will not fit are warned "
            "about before the first call (default: litellm's model info, when known)."
        ),
    ] = D.max_context,
    batch_max_requests: Annotated[
        int, typer.Option(help="--mode batch: requests per batch (OpenAI: 50,000).")
    ] = D.batch.max_requests,
    batch_max_bytes: Annotated[
        int, typer.Option(help="--mode batch: bytes per batch input file (OpenAI: 200 MB).")
    ] = D.batch.max_bytes,
    batch_poll_interval: Annotated[
        float, typer.Option(help="--mode batch: seconds between polls of the open batches.")
    ] = D.batch.poll_interval_s,
    batch_fallback: Annotated[
        str,
        typer.Option(
            help="--mode batch: none (re-send unanswered requests in a follow-up batch) or live "
            "(send requests that expired or errored in a batch as live calls at once)."
        ),
    ] = D.batch.fallback,
    batch_record: Annotated[
        bool,
        typer.Option(
            "--batch-record",
            help="--mode batch: also write every answer to a cassette under --cassettes with "
            "the key a live call has, so the run replays offline.",
        ),
    ] = D.batch.record,
    workers_only: Annotated[
        bool,
        typer.Option(
            "--workers-only",
            help="Create the task and queue its rows without judging them; `rubric-eval work "
            "TASK` judges them (on any number of machines). Needs a postgresql:// --store.",
        ),
    ] = False,
    judge_param: Annotated[
        list[str] | None,
        typer.Option(
            help="Provider-specific litellm option KEY=VALUE (VALUE read as JSON when it is), "
            'e.g. seed=7, api_version=2024-10-21, \'extra_headers={"X-Team": "qa"}\'; '
            "repeatable. Sampling options join the cassette key; api_version/headers do not.",
        ),
    ] = None,
    judge_when: Annotated[
        str | None,
        typer.Option(
            help="Call the judge only on rows whose metadata meets FIELD=VALUE, FIELD!=VALUE or "
            "'FIELD in A,B' (e.g. risk_level=high); rule checks decide the others (CHECKED).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Make every check, count the rows, judge calls and prompt tokens, price them "
            "and check them against the context; call no judge and store nothing.",
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only errors: no progress, no summary, no notes."),
    ] = False,
    emit_otlp: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="When scored, send one gen_ai.evaluation.result event per row to this OTLP/HTTP "
            "endpoint, linked to the row's source span (as `rubric-eval emit --otlp`).",
        ),
    ] = None,
    emit_phoenix: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="When scored, annotate each row's source span in the Phoenix at URL (as "
            "`rubric-eval emit --phoenix`).",
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object on stdout and nothing else: taskId, state, exitCode and "
            "its meaning, row counts, key metrics, report paths, notes (docs/json-output.md). "
            "Messages still go to stderr.",
        ),
    ] = False,
    display: Annotated[
        str | None,
        typer.Option(
            help="rich: a progress bar; plain: a line every N rows or few seconds (rows done, "
            "rate, JUDGE_ERROR rows, ETA); none. Default: rich on a terminal, else plain."
        ),
    ] = None,
) -> None:
    """Score dialogue files with a rubric pack; print a summary and the task id.

    Exit codes: 0 done, 2 bad input/options, 3 store problem, 4 cassette misses, 5 nothing
    scored, 6 a budget (--max-calls/--max-cost) stopped the run, 8 the provider refused the
    credentials (401/403), 9 rows stored but the report files not written (`rubric-eval
    report TASK --out DIR` writes them), 130 interrupted (Ctrl-C or SIGTERM).
    """
    from rubric_engine.batch.settings import BatchSettings, Fallback
    from rubric_engine.dialogue.readers import InputFormat
    from rubric_engine.engine import JudgeKind, Mode, ScoreOptions
    from rubric_engine.engine.options import parse_judge_params
    from rubric_engine.engine.panel import judges_from_flags
    from rubric_engine.report.summary import ScoreSummary

    def build() -> ScoreOptions:
        kind, judge_model, panel = judges_from_flags(judge or [], model, D.model)
        return ScoreOptions(
            inputs=inputs or [],
            rubric=rubric,
            mode=cast(Mode, mode),
            cassettes=cassettes,
            model=judge_model,
            panel=panel,
            api_base=api_base,
            api_key_env=api_key_env,
            concurrency=concurrency,
            store=store,
            out=out,
            input_format=cast(InputFormat, input_format),
            prompt_version=prompt,
            max_reasks=max_reasks,
            temperature=temperature,
            max_tokens=max_tokens,
            samples=samples,
            samples_when=samples_when,
            seed=seed,
            timeout_s=timeout,
            restart_wait_s=restart_wait,
            transport=transport,
            draft=draft,
            resume=resume,
            max_calls=max_calls,
            max_cost_usd=max_cost,
            judge=cast(JudgeKind, kind),
            name=name,
            tags=tuple(tag or ()),
            judge_params=parse_judge_params(judge_param or ()),
            judge_when=judge_when,
            output_mode=output_mode,
            system_as_user=system_as_user,
            prompt_cache=prompt_cache,
            max_context=max_context,
            batch=BatchSettings(
                max_requests=batch_max_requests,
                max_bytes=batch_max_bytes,
                poll_interval_s=batch_poll_interval,
                fallback=cast(Fallback, batch_fallback),
                record=batch_record,
            ),
        )

    _guard(lambda: _check_display(display))  # here: -q shows no display, so never reads it
    if dry_run:
        _dry_run(_guard(build))
        return
    emits = (emit_otlp, emit_phoenix)
    if json_out:
        guard_json(ScoreSummary, lambda: _score_json(build(), display, workers_only, emits))
        return
    options = _guard(build)
    if workers_only:
        _queue(options)
        return
    result = _guard(lambda: _run_score(options, "none" if quiet else display))
    code, messages = _outcome(result, options)
    if not quiet:
        _print_summary(result)
    for level, text in messages:
        if level == "error" or not quiet:
            typer.echo(text, err=True)
    for line in _guard(lambda: _emit(result.task_id, options, emits)):
        if not quiet:
            typer.echo(line)
    if code:
        raise typer.Exit(code)


def _check_display(display: str | None) -> None:
    """Refuse a ``--display`` value other than rich, plain and none before anything runs.

    Raises:
        ConfigurationError: naming the value and the valid ones.
    """
    from rubric_engine.cli.progress import DISPLAYS
    from rubric_engine.errors import ConfigurationError

    if display is not None and display not in DISPLAYS:
        raise ConfigurationError(
            f"--display {display!r} is not valid; use one of rich, plain, none"
        )


def _emit(task_id: str, options: ScoreOptions, emits: tuple[str | None, str | None]) -> list[str]:
    """``--emit-otlp`` / ``--emit-phoenix``: send the scored task's results; lines to print."""
    from rubric_engine.cli.emit_cmd import emit_otlp, emit_phoenix

    otlp, phoenix = emits
    lines = []
    if otlp is not None:
        lines.append(emit_otlp(options.store, task_id, otlp, False, {}))
    if phoenix is not None:
        lines.append(emit_phoenix(options.store, task_id, phoenix, False, {}))
    return lines


def _score_json(
    options: ScoreOptions,
    display: str | None,
    workers_only: bool,
    emits: tuple[str | None, str | None] = (None, None),
) -> int:
    """``score --json``: the run, then its one summary object on stdout; the exit code."""
    from rubric_engine.report.summary import RowCounts, ScoreSummary, score_summary

    if workers_only:
        from rubric_engine.engine.task import work_command
        from rubric_engine.engine.workers import queue_task

        queued = queue_task(options)
        summary = ScoreSummary(
            task_id=queued.task_id, state="QUEUED", exit_code=0, exit_meaning="done",
            rows=RowCounts(planned=queued.rows, total=0, scored=0, judge_errors=0, checked=0,
                           passed=0),
            notes=[f"judge the rows with `{work_command(queued.task_id, options.store)}`"],
        )  # fmt: skip
        typer.echo(summary.to_json())
        return 0
    result = _run_score(options, display or "none")
    code, messages = _outcome(result, options)
    for _, text in messages:
        typer.echo(text, err=True)
    files = {"json_": str(result.files.json), "markdown": str(result.files.markdown),
             "html": str(result.files.html), "rows": str(result.files.rows)}  # fmt: skip
    notes = [text.split(": ", 1)[1] if ": " in text else text for _, text in messages]
    for line in _emit(result.task_id, options, emits):
        typer.echo(line, err=True)
        notes.append(line)
    typer.echo(score_summary(result.report, code, files, notes).to_json())
    return code


def _outcome(result: ScoreResult, options: ScoreOptions) -> tuple[int, list[tuple[str, str]]]:
    """The exit code of a finished run and what to say on stderr, ``(level, text)`` each with
    level ``note`` or ``error`` (``-q`` prints only errors)."""
    from rubric_engine.engine import resume_command
    from rubric_engine.judge.secrets import redact

    messages: list[tuple[str, str]] = []
    if result.sampling_note:
        messages.append(("note", result.sampling_note))
    for name, message in result.dropped_params.items():
        messages.append(
            (
                "note",
                f"note: the provider rejected {name} ({redact(message)}); it was not "
                "sent again after that (the task records it as droppedParams)",
            )
        )
    if result.already_complete:
        messages.append(
            (
                "note",
                f"note: task {result.task_id} was already complete: nothing "
                "was judged; its report files were written again",
            )
        )
    if result.cassette_misses:
        first = result.cassette_misses[0].error
        messages.append(
            (
                "error",
                f"error: {len(result.cassette_misses)} row(s) had no cassette entry and are "
                f"JUDGE_ERROR. First: {first.message if first else ''}\n"
                "Record them with the same options plus `--mode record` (needs the provider "
                "and its API key), or point --cassettes at the folder that holds them.",
            )
        )
        return ExitCode.CASSETTE_MISS, messages
    if result.stopped:
        flag, what = (
            ("--max-cost USD", "USD is what the resume may spend")
            if result.stopped.startswith("--max-cost")
            else ("--max-calls N", "N is the calls the resume may make")
        )
        messages.append(
            (
                "error",
                f"stopped: {result.stopped}; {result.report.totals.rows} of "
                f"{result.report.task.planned_rows} row(s) have a result. Finish with "
                f"`{resume_command(result.task_id, options.store)} {flag}`: a budget holds "
                f"for one run, not for the task, so {what}, from nothing spent; without "
                f"{flag.split()[0]} the resume has no budget and judges every row left.",
            )
        )
        return ExitCode.BUDGET, messages
    totals = result.report.totals
    if not totals.scored and not totals.checked:
        messages.append(
            (
                "error",
                "error: no row was scored (every row is JUDGE_ERROR; reasons "
                "above and in rows.jsonl)",
            )
        )
        return ExitCode.NOTHING_SCORED, messages
    return ExitCode.OK, messages


def _dry_run(options: ScoreOptions) -> None:
    from rubric_engine.engine.dry_run import dry_run
    from rubric_engine.judge.secrets import redact

    def show(message: Warning | str, *_: object, **__: object) -> None:
        typer.echo(f"warning: {redact(str(message))}", err=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        planned = _guard(lambda: dry_run(options))
    for line in planned.lines():
        typer.echo(line)


def _queue(options: ScoreOptions) -> None:
    from rubric_engine.engine.task import work_command
    from rubric_engine.engine.workers import queue_task

    queued = _guard(lambda: queue_task(options))
    typer.echo(
        f"task {queued.task_id}: {queued.rows} row(s) queued for workers; judge them with "
        f"`{work_command(queued.task_id, options.store)}` on as many machines as wanted"
    )
    typer.echo(f"task id: {queued.task_id}")


def _run_score(options: ScoreOptions, display: str | None) -> ScoreResult:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rubric_engine.cli.progress import PlainProgress
    from rubric_engine.engine import report_command, resume_command, score
    from rubric_engine.judge.secrets import redact
    from rubric_engine.results.model import RowStatus

    console = Console(stderr=True)
    shown = display or ("rich" if console.is_terminal else "plain")  # checked: _check_display
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=shown != "rich",
    )
    plain = PlainProgress(lambda line: typer.echo(line, err=True)) if shown == "plain" else None
    state = _Progress()

    def start(task_id: str, total: int) -> None:
        state.task, state.total = task_id, total
        state.bar = progress.add_task(f"task {task_id}", total=total)
        if plain is not None:
            plain.start(task_id, total)

    def advance(row: RowResult) -> None:
        state.done += 1
        if state.bar is not None:
            progress.advance(state.bar)
        if plain is not None:
            plain.row(row.status is RowStatus.JUDGE_ERROR)

    def event(text: str) -> None:
        text = redact(text)  # a batch's provider error may quote a credential
        if shown == "none":
            return
        if shown == "rich":
            progress.console.print(text)
        else:
            typer.echo(text, err=True)

    # on Ctrl-C, calls cut off mid-flight leave litellm coroutines that were never awaited
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        typer.echo(f"warning: {redact(str(message))}", err=True)

    # the handlers stay until the advice is printed: a signal then is ignored, not fatal
    with sigterm_as_ctrl_c():
        try:
            with progress, warnings.catch_warnings():
                warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
                warnings.showwarning = show
                return score(options, on_start=start, on_row=advance, on_event=event)
        except KeyboardInterrupt:
            # a second Ctrl-C while the advice below is read from the store and printed (well
            # under a second) killed the process mid-message: it is ignored until the exit
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            stored = _stored_state(options, state.task) if state.task is not None else None
            if state.task is not None and stored is not None and stored[0] == "COMPLETED":
                typer.echo(
                    f"\ninterrupted while the report files were written: task {state.task} is "
                    f"COMPLETED (all {state.total} row(s) stored); "
                    f"`{report_command(state.task, options.store)} --out DIR` writes its files",
                    err=True,
                )
            elif state.task is not None:
                # the task's rows, not this run's: a resumed run judges only the rest
                kept = f"{stored[1]} of {stored[2]}" if stored else f"{state.done} of {state.total}"
                typer.echo(
                    f"\ninterrupted: task {state.task} keeps {kept} row(s); "
                    f"`{report_command(state.task, options.store)}` shows them; "
                    f"`{resume_command(state.task, options.store)}` finishes the task",
                    err=True,
                )
                running = _open_batches(options, state.task) if options.mode == "batch" else []
                if running:
                    shown = ", ".join(running[:5]) + (" …" if len(running) > 5 else "")
                    typer.echo(
                        f"{len(running)} batch(es) submitted to the provider keep running there "
                        f"and are billed for what they answer, whether or not the task is resumed "
                        f"({shown}). The resume polls them and stores their answers (nothing is "
                        "submitted twice). To stop them, cancel them at the provider (its console, "
                        "or its batch API's cancel call with the ids above); a resume then stores "
                        "what they answered before the cancel and asks the rest in new batches "
                        '(docs/batch.md "Interrupting a batch run")',
                        err=True,
                    )
            raise typer.Exit(ExitCode.INTERRUPTED) from None


def _stored_state(options: ScoreOptions, task_id: str) -> tuple[str, int, int] | None:
    """The task's state as stored, its stored rows and its planned rows, or ``None`` when the
    store cannot be read just now."""
    from rubric_engine.store.task_store import TaskStore

    try:
        with TaskStore(options.store) as store:
            task = store.task(task_id)
            return str(task.state), store.stored_row_count(task_id), task.row_count
    except Exception:  # only chooses which advice to print; the store's own error is not ours
        return None


def _open_batches(options: ScoreOptions, task_id: str) -> list[str]:
    """The ids of the task's batches the provider still runs (``--mode batch``: submitted
    and not seen to end; a batch being created is named by its job), or ``[]`` when the
    store cannot be read just now."""
    from rubric_engine.batch.ledger import Ledger
    from rubric_engine.store.task_store import TaskStore

    try:
        with TaskStore(options.store) as store:
            jobs = Ledger(store).jobs(task_id)
    except Exception:  # only adds advice; the store's own error is not ours
        return []
    return [
        j.batch_id or f"job {j.job_no}, being created"
        for j in jobs
        if j.state in ("SUBMITTING", "SUBMITTED")
    ]


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While inside: SIGTERM (what CI cancellation and ``kill`` send) is a Ctrl-C, and Ctrl-C
    is one even when the process started with SIGINT ignored; both handlers are put back on
    the way out, also after the ``KeyboardInterrupt`` is handled (its advice printed)."""
    previous = signal.signal(signal.SIGTERM, _as_ctrl_c)
    # started with SIGINT ignored (`score … &` in a script, some supervisors), asyncio puts no
    # handler of its own on SIGINT, so SIGTERM's KeyboardInterrupt was raised inside whichever
    # coroutine ran and printed "Task exception was never retrieved" (~80 lines); with
    # Python's default handler in place asyncio cancels the run as for Ctrl-C
    sigint_at_start = signal.getsignal(signal.SIGINT)
    if sigint_at_start == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, sigint_at_start)


def _as_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (what CI cancellation and ``kill`` send) goes the way of Ctrl-C: to the SIGINT
    handler in force (asyncio's while the run is on its loop: cancel the run, mark the task
    INTERRUPTED, keep its rows), so it ends with exit 130 and the resume advice."""
    handler = signal.getsignal(signal.SIGINT)
    if handler == signal.SIG_IGN:  # the interrupt advice is being printed: the exit is next
        return
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


@dataclass
class _Progress:
    """What the progress display knows of the run: its task, rows planned and done."""

    task: str | None = None
    total: int = 0
    done: int = 0
    bar: TaskID | None = None


def _print_summary(result: ScoreResult) -> None:
    from rich.console import Console

    from rubric_engine.report.render.console import print_summary

    console = Console()
    print_summary(result.report, console)
    files = result.files
    console.print(f"reports: {files.json}  {files.markdown}  {files.html}  {files.rows}")
    console.print(f"task id: {result.task_id}")
