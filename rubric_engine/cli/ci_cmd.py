"""`rubric-eval ci`: every dataset of the suite file scored and gated at once (docs/ci.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rubric_engine.cli._app import _guard, app, guard_json, print_columns
from rubric_engine.cli.score_cmd import sigterm_as_ctrl_c
from rubric_engine.errors import ExitCode

if TYPE_CHECKING:
    from rubric_engine.suite.model import Dataset


@app.command()
def ci(
    suite: Annotated[
        Path, typer.Option("--suite", help="Suite file (default ./rubric-eval.yaml).")
    ] = Path("rubric-eval.yaml"),
    junit: Annotated[
        Path | None, typer.Option(help="JUnit XML file (default <out>/junit.xml).")
    ] = None,
    store: Annotated[Path | None, typer.Option(help="Overrides the suite's store.")] = None,
    out: Annotated[Path | None, typer.Option(help="Overrides the suite's report folder.")] = None,
    mode: Annotated[str | None, typer.Option(help="Overrides judge.mode.")] = None,
    model: Annotated[str | None, typer.Option(help="Overrides judge.model.")] = None,
    api_base: Annotated[str | None, typer.Option(help="Overrides judge.apiBase.")] = None,
    cassettes: Annotated[Path | None, typer.Option(help="Overrides judge.cassettes.")] = None,
    regression_rule: Annotated[
        str | None, typer.Option(help="Overrides baseline.rule: strict or tolerant.")
    ] = None,
    baseline: Annotated[
        list[str] | None,
        typer.Option(help="DATASET=TASK: compare that dataset with this task; repeatable."),
    ] = None,
    branch: Annotated[
        str | None, typer.Option(help="Branch of this run (default: the CI's, else git's).")
    ] = None,
    schema: Annotated[
        bool, typer.Option("--schema", help="Print the suite file's JSON Schema and exit.")
    ] = False,
    markdown: Annotated[
        Path | None,
        typer.Option(
            help="Also write the checklist, failed regressions and tasks as Markdown here (for "
            "$GITHUB_STEP_SUMMARY or a pull-request comment)."
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object on stdout and nothing else: suite, passed, exitCode "
            "and its meaning, datasets and tasks, every check, regressions "
            "(docs/json-output.md); progress goes to stderr.",
        ),
    ] = False,
) -> None:
    """Run the suite: score every dataset, then print the release checklist (✓/✗ with figure
    and threshold) and write JUnit XML. Exit 7 when any check fails."""
    if schema:
        import json

        from rubric_engine.suite import suite_json_schema

        typer.echo(json.dumps(suite_json_schema(), indent=2, ensure_ascii=False))
        return

    def run() -> int:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.suite import load_suite
        from rubric_engine.suite.load import read_env
        from rubric_engine.suite.run import checklist_markdown, checklist_rows, run_suite

        loaded = load_suite(suite)
        # the .env beside the suite also feeds the judge's key check (the environment wins)
        for key, value in read_env(suite.parent).items():
            os.environ.setdefault(key, value)
        judge: dict[str, Any] = {k: v for k, v in (
            ("mode", mode), ("model", model), ("api_base", api_base), ("cassettes", cassettes),
        ) if v is not None}  # fmt: skip
        rule: dict[str, Any] = {"rule": regression_rule} if regression_rule else {}
        if regression_rule not in (None, "strict", "tolerant"):
            raise ConfigurationError(
                f"--regression-rule {regression_rule!r} is not valid; use strict or tolerant"
            )
        tasks = dict(loaded.baseline.tasks)
        for pair in baseline or ():
            name, _, task = pair.partition("=")
            if name not in {d.name for d in loaded.datasets} or not task:
                raise ConfigurationError(
                    f"--baseline {pair!r} is not DATASET=TASK with a dataset of the suite: "
                    f"{', '.join(d.name for d in loaded.datasets)}"
                )
            tasks[name] = task
        merged = loaded.model_copy(update={
            **({"store": store} if store else {}), **({"out": out} if out else {}),
            "judge": loaded.judge.model_copy(update=judge),
            "baseline": loaded.baseline.model_copy(update={**rule, "tasks": tasks}),
        })  # fmt: skip
        started: dict[str, str] = {}  # dataset → its task, once stored
        scored: list[str] = []

        def done(dataset: Dataset, task: str) -> None:
            scored.append(dataset.name)
            typer.echo(f"scored {dataset.name} ({dataset.tier}): task {task}", err=json_out)

        try:
            with sigterm_as_ctrl_c():
                result = run_suite(
                    merged,
                    branch=branch,
                    on_dataset=done,
                    on_start=lambda d, t: started.update({d.name: t}),
                )
        except KeyboardInterrupt:
            typer.echo(f"\n{_interrupted(started, scored, merged.store)}", err=True)
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        target = junit or merged.out / "junit.xml"
        from rubric_engine.report.render.output import write_output

        write_output(target, result.junit(), "--junit")
        if markdown is not None:
            write_output(markdown, checklist_markdown(result, merged.out), "--markdown")
        code = 0 if result.passed else ExitCode.GATE_FAILED
        if json_out:
            from rubric_engine.report.summary import ci_summary

            summary = ci_summary(result.suite, result.tasks, result.lines, code, str(target))
            typer.echo(summary.to_json())
            return code
        print_columns(checklist_rows(result))
        failed = sum(1 for line in result.lines if not line.passed)
        typer.echo(f"wrote {target}")
        if markdown is not None:
            typer.echo(f"wrote {markdown}")
        typer.echo(
            f"ci {'failed' if failed else 'passed'}: {len(result.lines) - failed} of "
            f"{len(result.lines)} check(s) hold"
            + (": " + ", ".join(x.name for x in result.lines if not x.passed) if failed else "")
        )
        return code

    if json_out:
        from rubric_engine.report.summary import CiSummary

        guard_json(CiSummary, run)
    if code := _guard(run):
        raise typer.Exit(code)


def _interrupted(started: dict[str, str], scored: list[str], store: Path) -> str:
    """What a Ctrl-C or SIGTERM during ``ci`` left and how to go on: the dataset being scored
    and its task (kept, INTERRUPTED, with the rows judged so far); no check was made."""
    from rubric_engine.engine import resume_command

    after = "no check was made and no JUnit XML written; `rubric-eval ci` again scores every "
    after += "dataset afresh"
    if not started:
        return f"interrupted: ci stopped before any dataset's task was stored; {after}"
    name, task = list(started.items())[-1]
    if name in scored:
        return f"interrupted: ci stopped after scoring its datasets, while checking them; {after}"
    return (
        f"interrupted: ci stopped while scoring dataset {name}: task {task} keeps the rows "
        f"judged so far (`{resume_command(task, store)}` finishes it); {after}"
    )
