"""`rubric-eval diff` and `rubric-eval gate`: compare two tasks, fail CI on thresholds."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import (
    EXIT_GATE_FAILED,
    StoreOpt,
    _fail,
    _guard,
    _require_store,
    _store_location,
    app,
)
from rubric_engine.stores.location import StoreLocation

#: `gate` exit code when a threshold or the no-regression rule fails

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


def _sides(
    store: StoreLocation,
    baseline_store: StoreLocation | None,
    baseline: str,
    current: str,
    pass_score: int | None,
) -> tuple[Any, Any]:
    from rubric_engine.report import diff_side, load_task
    from rubric_engine.store import TaskStore

    _require_store(store)
    base_path = baseline_store or store
    _require_store(base_path)
    with TaskStore(base_path) as opened:
        base = diff_side(load_task(opened, baseline), pass_score=pass_score)
    with TaskStore(store) as opened:
        cur = diff_side(load_task(opened, current), pass_score=pass_score)
    return base, cur


@app.command()
def diff(
    baseline: Annotated[str, typer.Argument(help="Baseline task id (the accepted run).")],
    current: Annotated[str, typer.Argument(help="Current task id (the run to judge).")],
    store: StoreOpt = DEFAULT_STORE,
    baseline_store: BaselineStoreOpt = None,
    format: Annotated[str, typer.Option("--format", help="md or json.")] = "md",
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    pass_score: PassScoreOpt = None,
) -> None:
    """Baseline diff (seed 001): REGRESSION / IMPROVEMENT / CHANGED at aggregate and case scope."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("md", "json"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use md or json"))

    def run() -> None:
        from rubric_engine.report.diff import diff_tasks
        from rubric_engine.report.outcome import exact_figures
        from rubric_engine.report.render import render_diff_markdown, render_json

        if out is not None and out.is_dir():
            raise ConfigurationError(f"--out {out} is a folder; give a file path for the diff")
        with exact_figures():  # decide on exact values; the diff rounds what it shows
            built = diff_tasks(*_sides(store, baseline_store, baseline, current, pass_score))
        text = render_json(built) if format == "json" else render_diff_markdown(built)
        if out is None:
            sys.stdout.write(text)
        else:
            _write(out, text, "--out")
            typer.echo(
                f"wrote {out}: {built['regressionCount']} regression(s), "
                f"{built['improvementCount']} improvement(s), {built['changedCount']} change(s)"
            )

    _guard(run)


@app.command()
def gate(
    task_id: Annotated[str, typer.Argument(help="Task to check.")],
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
) -> None:
    """CI gate: exit 7 when a threshold or the no-regression rule fails, 0 when all hold."""
    from rubric_engine.errors import ConfigurationError

    def run() -> bool:
        from rubric_engine.report.outcome import exact_figures

        if junit is not None and junit.is_dir():
            raise ConfigurationError(
                f"--junit {junit} is a folder; give a file path, e.g. gate.xml"
            )
        with exact_figures():  # 0.89995 must fail passRate>=0.9: no rounding before comparing
            return _run_gate()

    def _run_gate() -> bool:
        from rubric_engine.report import diff_side, load_task, report_from_task
        from rubric_engine.report.diff import diff_tasks
        from rubric_engine.report.gate import (
            check_complete,
            check_no_regression,
            check_parameters,
            check_threshold,
            parse_threshold,
            slice_fields,
        )
        from rubric_engine.report.junit import junit_xml
        from rubric_engine.store import TaskStore

        if not threshold and not no_regression:
            raise ConfigurationError(
                "nothing to check: give at least one --threshold, or --baseline TASK "
                "--no-regression"
            )
        if no_regression and baseline is None:
            raise ConfigurationError("--no-regression needs --baseline TASK (the accepted run)")
        if baseline is not None and not no_regression:
            raise ConfigurationError(
                "--baseline is only used with --no-regression; add it, or drop --baseline"
            )
        parsed = [parse_threshold(t) for t in threshold or ()]
        _require_store(store)
        with TaskStore(store) as opened:
            current = load_task(opened, task_id)
        report = report_from_task(current, pass_score=pass_score, by=slice_fields(parsed))
        check_parameters(parsed, report)
        checks = [] if allow_partial else [check_complete(report)]
        checks += [check_threshold(t, report) for t in parsed]
        if no_regression and baseline is not None:
            base_path = baseline_store or store
            _require_store(base_path)
            with TaskStore(base_path) as opened:
                base = diff_side(load_task(opened, baseline), pass_score=pass_score)
            checks += check_no_regression(
                diff_tasks(base, diff_side(current, pass_score=pass_score))
            )
        for check in checks:
            mark = "PASS" if check.passed else "FAIL"
            typer.echo(f"{mark}  {check.message}")
        failed = sum(1 for c in checks if not c.passed)
        if junit is not None:
            _write(junit, junit_xml(f"rubric-eval gate {task_id}", checks), "--junit")
            typer.echo(f"wrote {junit}")
        typer.echo(
            f"gate {'failed' if failed else 'passed'}: {len(checks) - failed} of {len(checks)} "
            "check(s) hold"
        )
        return failed == 0

    if not _guard(run):
        raise typer.Exit(EXIT_GATE_FAILED)


def _write(path: Path, text: str, option: str) -> None:
    from rubric_engine.errors import ConfigurationError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot write it ({exc.strerror or exc}); give a file path in a "
            "folder you can write to"
        ) from exc
