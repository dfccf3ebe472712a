"""`rubric-eval diff` and `rubric-eval gate`: compare two tasks, fail CI on thresholds."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import (
    EXIT_GATE_FAILED,
    StoreOpt,
    _fail,
    _guard,
    _store_location,
    app,
    guard_json,
)

if TYPE_CHECKING:
    from rubric_engine.report.gate import GateResult
    from rubric_engine.store.location import StoreLocation

#: report/diff_list.MAX_ITEMS, spelled here so `--help` imports no report model (a test
#: checks the two agree)
MAX_ITEMS = 500

PassScoreOpt = Annotated[
    int | None,
    typer.Option(
        help="Lowest passing final score (default: one below the top of the pack's scale)."
    ),
]
BaselineStoreOpt = Annotated[
    Any,
    typer.Option(
        help="Store holding the baseline task, when it is not --store (e.g. a CI artifact).",
        parser=_store_location,
        metavar="PATH|URL",
    ),
]


@app.command()
def diff(
    baseline: Annotated[
        str, typer.Argument(help="Baseline task (id, name or tag:TAG; the accepted run).")
    ],
    current: Annotated[
        str, typer.Argument(help="Current task (id, name or tag:TAG; the run to judge).")
    ],
    store: StoreOpt = DEFAULT_STORE,
    baseline_store: BaselineStoreOpt = None,
    format: Annotated[str, typer.Option("--format", help="md, json or html.")] = "md",
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    pass_score: PassScoreOpt = None,
    max_items: Annotated[
        int,
        typer.Option(
            min=0,
            help="Case items listed, the most important first (0: all); the counts are of "
            "every item.",
        ),
    ] = MAX_ITEMS,
    items: Annotated[
        Path | None,
        typer.Option(
            help="JSON Lines file for every item when some are not listed (default with "
            "--out: OUT's name with .items.jsonl)."
        ),
    ] = None,
) -> None:
    """Baseline diff: REGRESSION / IMPROVEMENT / CHANGED at aggregate and case scope.

    Reads the tasks a page of rows at a time; a large diff lists the --max-items most
    important case items and writes every item to a JSON Lines file (docs/scale.md)."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("md", "json", "html"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use md, json or html"))

    def run() -> None:
        from rubric_engine.report.render.json_md import render_diff_markdown, render_json
        from rubric_engine.report.run import run_diff

        if out is not None and out.is_dir():
            raise ConfigurationError(f"--out {out} is a folder; give a file path for the diff")
        every = items or (out.with_name(f"{out.stem}.items.jsonl") if out is not None else None)
        if every is not None and (every.is_dir() or every == out):
            raise ConfigurationError(
                f"--items {every} is a folder or the --out file; give another file path"
            )
        if every is not None:
            from rubric_engine.report.render.output import check_output

            check_output(every, "--items" if items else "--out")
        built = run_diff(
            store,
            baseline,
            current,
            baseline_store=baseline_store,
            pass_score=pass_score,
            max_items=max_items or None,
            items_file=every,
        )
        for side, task_id, where in (
            ("baseline", built.baseline_task_id, baseline_store or store),
            ("current", built.current_task_id, store),
        ):
            note = _unfinished_note(side, task_id, where)
            if note:
                typer.echo(note, err=True)
        if format == "html":
            from rubric_engine.report.render.html import render_diff_html

            text = render_diff_html(built)
        else:
            text = render_json(built) if format == "json" else render_diff_markdown(built)
        if out is None:
            sys.stdout.write(text)
        else:
            _write(out, text, "--out")
            typer.echo(
                f"wrote {out}: {built.regression_count} regression(s), "
                f"{built.improvement_count} improvement(s), {built.changed_count} change(s)"
            )
        if built.capped is not None and built.capped.items_file:
            typer.echo(
                f"wrote {built.capped.items_file}: every item ({built.capped.listed:,} of "
                f"{built.capped.case_items:,} case items are listed in the diff)",
                err=out is None,
            )

    _guard(run)


def _unfinished_note(side: str, task_id: str, store: StoreLocation) -> str | None:
    """A note for a diffed task that has not finished (stopped, interrupted, killed, still
    running): its rows missing from the diff are rows it never judged, not lost ones."""
    from rubric_engine.engine.task import resume_command
    from rubric_engine.store.task_store import TaskStore

    with TaskStore(store) as opened:
        record = opened.task(task_id)
        rows = opened.stored_row_count(task_id)
    if record.state == "COMPLETED" and rows == record.row_count:
        return None
    shown = "no result in the current task" if side == "current" else "only in the current task"
    return (
        f"note: the {side} task {task_id} is {record.state} with {rows} of {record.row_count} "
        f"planned row(s); the rows it has not judged show as '{shown}'; "
        f"finish it first: `{resume_command(task_id, store)}`"
    )


@app.command()
def gate(
    task_id: Annotated[str, typer.Argument(help="Task to check (id, name or tag:TAG).")],
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            "-t",
            help="METRIC OP NUMBER, e.g. 'passRate>=0.9', 'redFlags.BACKEND_EXPOSURE==0'; "
            "repeatable. An unknown metric is an error that lists the valid names.",
        ),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Baseline task id for --no-regression.")
    ] = None,
    no_regression: Annotated[
        bool,
        typer.Option(
            "--no-regression", help="Fail on any REGRESSION item of `diff BASELINE TASK`."
        ),
    ] = False,
    junit: Annotated[
        Path | None, typer.Option(help="Write the checks as JUnit XML here (one testcase each).")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    baseline_store: BaselineStoreOpt = None,
    pass_score: PassScoreOpt = None,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Do not fail when the task is not COMPLETED with every planned row.",
        ),
    ] = False,
    regression_rule: Annotated[
        str,
        typer.Option(
            help="strict: every REGRESSION item fails; tolerant: an aggregate drop fails only "
            "when it is at least --min-effect and its paired-bootstrap interval excludes 0."
        ),
    ] = "strict",
    alpha: Annotated[
        float, typer.Option(help="Tolerant rule: 1 - alpha interval (default 0.05: 95%).")
    ] = 0.05,
    bootstrap_seed: Annotated[int, typer.Option(help="Tolerant rule: resampling seed.")] = 0,
    resamples: Annotated[int, typer.Option(help="Tolerant rule: bootstrap resamples.")] = 2000,
    min_effect: Annotated[
        list[str] | None,
        typer.Option(
            help="Tolerant rule: NAME=DROP, NAME a metric (passRate) or kind (share, score); "
            "defaults share=0.05, score=0.25. Repeatable."
        ),
    ] = None,
    confirm_with: Annotated[
        str | None,
        typer.Option(
            help="Tolerant rule: a repeat run of the current version; a case regression "
            "fails only when it holds there too."
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object on stdout and nothing else: taskId, passed, exitCode "
            "and its meaning, every check (docs/json-output.md).",
        ),
    ] = False,
) -> None:
    """CI gate: exit 7 when a threshold or the no-regression rule fails, 0 when all hold."""
    from rubric_engine.errors import ConfigurationError

    def run() -> GateResult:
        from rubric_engine.report.render.junit import gate_junit
        from rubric_engine.report.run import run_gate

        if junit is not None and junit.is_dir():
            raise ConfigurationError(
                f"--junit {junit} is a folder; give a file path, e.g. gate.xml"
            )
        from rubric_engine.report.noise import NoiseOptions, parse_min_effect

        noise = NoiseOptions(alpha, bootstrap_seed, resamples, parse_min_effect(min_effect or ()))
        result = run_gate(
            store,
            task_id,
            threshold or (),
            baseline=baseline,
            no_regression=no_regression,
            baseline_store=baseline_store,
            pass_score=pass_score,
            allow_partial=allow_partial,
            rule=regression_rule,  # type: ignore[arg-type]  # checked by run_gate
            noise=noise,
            confirm_with=confirm_with,
        )
        if junit is not None:
            _write(junit, gate_junit(result), "--junit")
        return result

    if json_out:
        from rubric_engine.report.summary import GateSummary, gate_summary

        def as_json() -> int:
            result = run()
            code = EXIT_GATE_FAILED if result.failed else 0
            typer.echo(gate_summary(result, code, str(junit) if junit else None).to_json())
            return code

        guard_json(GateSummary, as_json)
    result = _guard(run)
    for check in result.checks:
        typer.echo(f"{'PASS' if check.passed else 'FAIL'}  {check.message}")
    if junit is not None:
        typer.echo(f"wrote {junit}")
    checks = len(result.checks)
    typer.echo(
        f"gate {'failed' if result.failed else 'passed'}: {checks - result.failed} of "
        f"{checks} check(s) hold"
    )
    if not result.passed:
        raise typer.Exit(EXIT_GATE_FAILED)


def _write(path: Path, text: str, option: str) -> None:
    from rubric_engine.report.render.output import write_output

    write_output(path, text, option)
