"""`rubric-eval trend`: how the metrics of a name's or a tag's tasks move, oldest first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, app, print_columns

if TYPE_CHECKING:
    from rubric_engine.report.model import Report


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
        built = build_trend(ref, _tasks(store, ref), chosen)
        _print(built)
        if html is not None:
            from rubric_engine.report.render.trend_svg import trend_html

            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(trend_html(built), encoding="utf-8")
            typer.echo(f"wrote {html}")

    _guard(run)


def _tasks(store: object, ref: str) -> list[tuple[str, str, str, Report]]:
    """``(id, label, prompt version, report)`` of every task of the name or tag, oldest first.

    Raises:
        TaskNotFoundError: no task has that name or tag (the known ones listed).
    """
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
            resolve_task([t for t in records if t.id != ref], ref, str(opened.path))
        return [(t.id, t.id, t.prompt_version, stream_report(opened, t.id).report) for t in found]


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
            [str(i + 1), *(f"{p.red_flag_rates.get(t, 0):.3g}" for t in types)]
            for i, p in enumerate(built.points)
        ])  # fmt: skip
    intents = sorted({k for p in built.points for k in p.intent_means})
    if intents:
        typer.echo("\nmean final score per intent:")
        print_columns([["#", *intents]] + [
            [str(i + 1), *(f"{p.intent_means[k]:.3g}" if k in p.intent_means else "—"
                           for k in intents)]
            for i, p in enumerate(built.points)
        ])  # fmt: skip
    if built.drops:
        typer.echo(f"\ngot worse ({len(built.drops)}):")
        for d in built.drops:
            typer.echo(f"  ▼ {d.metric}: {d.before:.4g} → {d.after:.4g} (task {d.task_id})")
