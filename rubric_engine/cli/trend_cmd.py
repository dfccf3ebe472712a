"""`rubric-eval trend`: how the metrics of a name's or a tag's tasks move, oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, app, print_columns

if TYPE_CHECKING:
    from rubric_engine.report.model import Report
    from rubric_engine.report.trend import RowMark, TrendPoint
    from rubric_engine.store.task_store import TaskRecord


@app.command()
def trend(
    ref: Annotated[
        str, typer.Argument(help="A task name (every task of it) or tag:TAG (every task with it).")
    ],
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            "-m",
            help="A metric of the gate's table (meanScore, passRate, redFlags.TYPE, "
            "compliance.ID, intents.KEY.meanScore, calibration.…); repeatable. Default: "
            "meanScore, passRate, redFlagRate, judgeErrors.",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(help="Also write the trend as an HTML page with an SVG chart per metric."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Print each task's figures, red-flag rates per type and mean score per intent, mark what
    got worse (▼) and where the rubric, model or prompt changed (*)."""

    def run() -> None:
        from rubric_engine.report.trend import build_trend, check_metrics

        chosen = check_metrics(metric or ())
        tasks, marks = _tasks(store, ref)
        built = build_trend(ref, tasks, chosen, marks)
        _print(built)
        if html is not None:
            from rubric_engine.report.render.trend_svg import trend_html

            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(trend_html(built), encoding="utf-8")
            typer.echo(f"wrote {html}")

    _guard(run)


def _tasks(
    store: object, ref: str
) -> tuple[list[tuple[str, str, str, Report]], list[dict[str, RowMark]]]:
    """``(id, label, prompt version, report)`` of every task of the name or tag, oldest first,
    and each task's rows as (outcome, final score) by rowId, for their run-to-run agreement.

    Raises:
        TaskNotFoundError: no task has that name or tag (the known ones listed).
    """
    from rubric_engine.report.outcome import row_outcome
    from rubric_engine.report.run import require_store
    from rubric_engine.report.stored import stream_report
    from rubric_engine.store.task_ref import TAG_PREFIX, resolve_task, task_name, task_tags
    from rubric_engine.store.task_store import TaskStore

    require_store(store)  # type: ignore[arg-type]
    with TaskStore(store) as opened:  # type: ignore[arg-type]
        records = opened.tasks()
        if ref.startswith(TAG_PREFIX):
            found = [t for t in records if ref[len(TAG_PREFIX) :] in task_tags(t.extra)]
        else:
            found = [t for t in records if task_name(t.extra) == ref]
        if not found:
            _not_a_series(records, ref)
            resolve_task(records, ref, str(opened.path))
        tasks: list[tuple[str, str, str, Report]] = []
        marks: list[dict[str, RowMark]] = []
        for t in found:
            report = stream_report(opened, t.id).report
            tasks.append((t.id, t.id, t.prompt_version, report))
            pass_score = report.totals.pass_score
            marks.append({
                r.result.row_id: (row_outcome(r.result, pass_score), r.result.final_score)
                for r in opened.rows(t.id)
            })  # fmt: skip
        return tasks, marks


def _not_a_series(records: Sequence[TaskRecord], ref: str) -> None:
    """Raises: TaskNotFoundError: ``ref`` is one task's id; trend follows a name or a tag, so
    the message says which of them that task has, or how to give it one."""
    from rubric_engine.errors import TaskNotFoundError
    from rubric_engine.store.task_ref import TAG_PREFIX, task_name, task_tags

    task = next((t for t in records if t.id == ref), None)
    if task is None:
        return
    name, tags = task_name(task.extra), task_tags(task.extra)
    refs = ([name] if name else []) + [TAG_PREFIX + t for t in tags]
    follow = (
        f"it belongs to {', '.join(refs)}: run `rubric-eval trend {refs[0]}`"
        if refs
        else "it has no name or tag: give the runs to follow one with `score --name NAME` "
        "or `--tag TAG`, then run `rubric-eval trend NAME` or `trend tag:TAG`"
    )
    raise TaskNotFoundError(
        f"{ref!r} is one task's id; trend follows every task of a name or tag, and {follow}"
    )


def _print(built: object) -> None:
    from rubric_engine.report.trend import Trend

    assert isinstance(built, Trend)
    worse = {(d.metric, d.task_id) for d in built.drops}
    header = ["#", "task", "rubric", "rows", *built.metrics, "changed"]
    lines = [header]
    for i, point in enumerate(built.points):
        cells = [
            ("—" if v is None else f"{v:.4g}") + (" ▼" if (m, point.task_id) in worse else "")
            for m, v in zip(built.metrics, point.values, strict=True)
        ]
        changed = "* " + "; ".join(point.changes) if point.changes else ""
        lines.append([str(i + 1), point.task_id, point.rubric, str(point.rows), *cells, changed])
    typer.echo(f"trend of {built.ref}: {len(built.points)} task(s), oldest first")
    print_columns(lines)
    types = sorted({t for p in built.points for t in p.red_flag_rates})
    if types:
        typer.echo("\nred-flag rate per type (rows with it / scored rows):")
        print_columns([["#", *types]] + [
            [str(i + 1), *(_rate(built.points, i, t) for t in types)]
            for i in range(len(built.points))
        ])  # fmt: skip
    intents = sorted({k for p in built.points for k in p.intent_means})
    if intents:
        typer.echo("\nmean final score per intent:")
        print_columns([["#", *intents]] + [
            [str(i + 1), *(f"{p.intent_means[k]:.3g}" if k in p.intent_means else "—"
                           for k in intents)]
            for i, p in enumerate(built.points)
        ])  # fmt: skip
    if len(built.points) > 1 and built.points[1].agreement is not None:
        typer.echo("\nrun-to-run agreement with the task before (rows judged in both):")
        lines = [["#", "shared rows", "share same outcome", "outcome changed", "score changed"]]
        for i, point in enumerate(built.points[1:], start=2):
            st = point.agreement
            assert st is not None
            same = st.same_outcome_rate
            lines.append([str(i), str(st.shared), "—" if same is None else f"{same:.3g}",
                          str(st.outcome_changed), str(st.score_changed)])  # fmt: skip
        print_columns(lines)
    if built.drops:
        typer.echo(f"\ngot worse ({len(built.drops)}):")
        for d in built.drops:
            typer.echo(f"  ▼ {d.metric}: {d.before:.4g} → {d.after:.4g} (task {d.task_id})")


def _rate(points: Sequence[TrendPoint], i: int, flag: str) -> str:
    """A red-flag type's rate in task ``i``, marked ▼ when it rose from the task before."""
    rate = points[i].red_flag_rates.get(flag, 0)
    rose = i > 0 and rate > points[i - 1].red_flag_rates.get(flag, 0)
    return f"{rate:.3g}" + (" ▼" if rose else "")
