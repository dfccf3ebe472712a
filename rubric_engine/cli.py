"""``rubric-eval`` command line: parse options, call the library, map errors to exit codes.

Exit codes: 0 done; 2 bad input or options (nothing scored); 3 store problem; 4 replay ran but
some rows had no cassette entry (they are JUDGE_ERROR rows; the message says how to record
them); 5 no row could be scored (every row JUDGE_ERROR, or the first rows all failed to reach
the judge and the run stopped); 130 interrupted (finished rows are kept); 1 anything unexpected.
Heavy modules are imported inside commands so ``--help`` is fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from rubric_engine import DEFAULT_STORE

if TYPE_CHECKING:
    from rubric_engine.scoring import ScoreResult

app = typer.Typer(
    name="rubric-eval",
    help="Score batches of real dialogues with versioned rubric packs and an LLM judge.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
rubric_app = typer.Typer(
    help="Validate rubric packs and export their JSON Schema.", no_args_is_help=True
)
cassette_app = typer.Typer(help="Check and author judge cassettes.", no_args_is_help=True)
prompt_app = typer.Typer(help="Show what the judge is sent.", no_args_is_help=True)
app.add_typer(rubric_app, name="rubric")
app.add_typer(cassette_app, name="cassette")
app.add_typer(prompt_app, name="prompt")

EXIT_CASSETTE_MISS = 4
EXIT_NOTHING_SCORED = 5
StoreOpt = Annotated[
    Path, typer.Option("--store", help="SQLite task store.", envvar="RUBRIC_EVAL_STORE")
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


@app.command()
def score(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help="Dialogue files: .jsonl rows, a .json array or tau2-bench results file, or .csv."
        ),
    ],
    rubric: Annotated[Path, typer.Option("--rubric", "-r", help="Rubric pack file (YAML).")],
    mode: Annotated[
        str,
        typer.Option(
            help="replay: answer from cassettes, offline; record: "
            "call the provider and save cassettes; live: call the "
            "provider."
        ),
    ] = "replay",
    cassettes: Annotated[
        Path,
        typer.Option(
            help="Cassette folder (replay reads all *.jsonl "
            "under it; record appends to "
            "DIR/<rubricKey>/<input>.jsonl)."
        ),
    ] = Path("cassettes"),
    model: Annotated[
        str, typer.Option(help="litellm model name of the judge.")
    ] = "openai/gpt-4o-mini",
    api_base: Annotated[
        str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the API key (never stored); default: the "
            "provider's usual one, e.g. OPENAI_API_KEY."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge calls in flight.")] = 8,
    store: StoreOpt = DEFAULT_STORE,
    out: Annotated[
        Path | None, typer.Option(help="Report folder (default reports/<task id>).")
    ] = None,
    input_format: Annotated[str, typer.Option(help="auto, jsonl, json or csv.")] = "auto",
    max_reasks: Annotated[int, typer.Option(min=0, help="Re-asks after an invalid verdict.")] = 2,
    temperature: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="Judge sampling temperature.")
    ] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=16, help="Judge output token limit.")] = 1024,
    timeout: Annotated[float, typer.Option(min=0.1, help="Per-request timeout, seconds.")] = 120.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score dialogue files with a rubric pack; print a summary and the task id."""
    from rubric_engine.dialogue.readers import InputFormat
    from rubric_engine.scoring import Mode, ScoreOptions

    options = ScoreOptions(
        inputs=inputs,
        rubric=rubric,
        mode=cast(Mode, mode),
        cassettes=cassettes,
        model=model,
        api_base=api_base,
        api_key_env=api_key_env,
        concurrency=concurrency,
        store=store,
        out=out,
        input_format=cast(InputFormat, input_format),
        max_reasks=max_reasks,
        temperature=temperature,
        max_tokens=max_tokens,
        timeout_s=timeout,
    )
    result = _guard(lambda: _run_score(options, quiet))
    _print_summary(result)
    if result.cassette_misses:
        first = result.cassette_misses[0].error
        typer.echo(
            f"error: {len(result.cassette_misses)} row(s) had no cassette entry and are "
            f"JUDGE_ERROR. First: {first.message if first else ''}\n"
            "Record them with the same options plus `--mode record` (needs the provider and its "
            "API key), or point --cassettes at the folder that holds them.",
            err=True,
        )
        raise typer.Exit(EXIT_CASSETTE_MISS)
    if not result.report["totals"]["scored"]:
        typer.echo(
            "error: no row was scored (every row is JUDGE_ERROR; reasons above and in rows.jsonl)",
            err=True,
        )
        raise typer.Exit(EXIT_NOTHING_SCORED)


def _run_score(options: Any, quiet: bool) -> ScoreResult:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rubric_engine.scoring import report_command, score

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
    )
    state: dict[str, Any] = {"done": 0}

    def start(task_id: str, total: int) -> None:
        state.update(task=task_id, total=total)
        state["bar"] = progress.add_task(f"task {task_id}", total=total)
        if not console.is_terminal and not quiet:
            typer.echo(f"task {task_id}: scoring {total} row(s) …", err=True)

    def advance(_row: Any) -> None:
        state["done"] += 1
        progress.advance(state["bar"])

    try:
        with progress:
            return score(options, on_start=start, on_row=advance)
    except KeyboardInterrupt:
        if "task" in state:
            typer.echo(
                f"\ninterrupted: task {state['task']} keeps {state['done']} of "
                f"{state['total']} finished row(s); "
                f"`{report_command(state['task'], options.store)}` shows them",
                err=True,
            )
        raise typer.Exit(130) from None


def _print_summary(result: ScoreResult) -> None:
    from rich.console import Console

    from rubric_engine.report.console import print_summary

    console = Console()
    print_summary(result.report, console)
    files = result.files
    console.print(f"reports: {files.json}  {files.markdown}  {files.rows}")
    console.print(f"task id: {result.task_id}")


@app.command()
def report(
    task_id: Annotated[str, typer.Argument(help="Task id printed by `score`.")],
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[
        str, typer.Option("--format", help="json or md (printed to stdout unless --out is given).")
    ] = "md",
    out: Annotated[
        Path | None, typer.Option(help="Write report.json, report.md and rows.jsonl here.")
    ] = None,
) -> None:
    """Rebuild a task's report from the store (its own rubric snapshot, not current files)."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("json", "md"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use json or md"))

    def run() -> None:
        from rubric_engine.report import report_for_task, write_reports
        from rubric_engine.report.render import render_json, render_markdown
        from rubric_engine.store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            built = report_for_task(opened, task_id)
            if out is not None:
                files = write_reports(opened, task_id, built, out)
                typer.echo(f"wrote {files.json}, {files.markdown}, {files.rows}")
            else:
                sys.stdout.write(render_json(built) if format == "json" else render_markdown(built))

    _guard(run)


def _require_store(store: Path) -> None:
    from rubric_engine.errors import StoreError

    if not store.is_file():
        raise StoreError(
            f"{store}: no task store here; run `rubric-eval score` first or pass --store PATH"
        )


@app.command()
def tasks(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the tasks in the store."""

    def run() -> None:
        from rich.console import Console
        from rich.table import Table

        from rubric_engine.store import TaskStore

        _require_store(store)
        table = Table()
        table.add_column("task", no_wrap=True, min_width=22)
        for column in ("created", "state", "rubric", "judge", "rows done/planned"):
            table.add_column(column)
        with TaskStore(store) as opened:
            done = opened.finished_rows()
            for t in opened.tasks():
                table.add_row(
                    t.id,
                    t.created_at,
                    t.state,
                    f"{t.rubric_key} v{t.rubric_version}",
                    f"{t.model} ({t.judge_mode})",
                    f"{done.get(t.id, 0)}/{t.row_count}",
                )
        Console().print(table)

    _guard(run)


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


@prompt_app.command("show")
def prompt_show(
    input_file: Annotated[Path, typer.Argument(help="Dialogue file.")],
    rubric: Annotated[Path, typer.Option("--rubric", "-r", help="Rubric pack file.")],
    row: Annotated[str | None, typer.Option(help="rowId to show (default: the first).")] = None,
    input_format: Annotated[str, typer.Option(help="auto, jsonl, json or csv.")] = "auto",
) -> None:
    """Print the system and user messages the judge receives for one row."""

    def run() -> None:
        from rubric_engine.dialogue.readers import DialogueSource
        from rubric_engine.errors import DatasetError
        from rubric_engine.pipeline import RequestBuilder
        from rubric_engine.prompt import load_prompt
        from rubric_engine.rubric import load_rubric

        pack = load_rubric(rubric)
        source = DialogueSource(input_file, input_format)  # type: ignore[arg-type]
        source.validate()
        builder = RequestBuilder(pack, load_prompt())
        for seq, found in enumerate(source):
            if row is None or found.row_id == row:
                for message in builder.prepare(seq, found).request.messages:
                    typer.echo(f"===== {message['role']} =====\n{message['content']}\n")
                return
        raise DatasetError(f"{input_file}: no row with rowId {row!r}")

    _guard(run)


@cassette_app.command("check")
def cassette_check(
    folder: Annotated[Path, typer.Argument(help="Cassette folder.")] = Path("cassettes"),
) -> None:
    """Validate every cassette under FOLDER and count entries by provenance."""

    def run() -> None:
        from rubric_engine.cassette import CassetteIndex
        from rubric_engine.errors import CassetteError

        if not folder.is_dir():
            raise CassetteError(f"{folder}: cassette folder not found")
        problems: list[str] = []
        index = CassetteIndex.load(folder, problems)
        counts = index.provenance_counts()
        replaced = f" ({index.replaced} older duplicate(s) ignored)" if index.replaced else ""
        typer.echo(
            f"{folder}: {len(index.by_key)} entries{replaced}; "
            + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "empty")
        )
        if problems:
            raise CassetteError(
                f"{len(problems)} bad cassette line(s):\n  - " + "\n  - ".join(problems)
            )

    _guard(run)


@cassette_app.command("author")
def cassette_author(
    inputs: Annotated[list[Path], typer.Argument(help="Dialogue files the verdicts judge.")],
    rubric: Annotated[Path, typer.Option("--rubric", "-r", help="Rubric pack file.")],
    verdicts: Annotated[
        Path,
        typer.Option(
            help="JSONL of hand-written verdicts, one per row "
            "(the judge's JSON fields, rowId required)."
        ),
    ],
    author: Annotated[str, typer.Option(help="Who judged the dialogues.")],
    method: Annotated[str, typer.Option(help="How they were judged.")],
    out: Annotated[Path, typer.Option(help="Cassette file to write (replaced).")],
    model: Annotated[
        str, typer.Option(help="Model the requests are keyed for.")
    ] = "openai/gpt-4o-mini",
) -> None:
    """Turn hand-written verdicts into an `authored` cassette keyed like a real run."""

    def run() -> None:
        from rubric_engine.authoring import author_cassette

        count = author_cassette(inputs, rubric, verdicts, author, method, out, model)
        typer.echo(f"wrote {count} authored entries to {out}")

    _guard(run)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
