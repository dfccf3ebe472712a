"""`rubric-eval actions`: low-score clusters as ranked action items (docs/actions.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _fail, _guard, _store_location, app


@app.command()
def actions(
    task_id: Annotated[str, typer.Argument(help="Task id, task name or tag:TAG.")],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="An earlier task of the same pack: say whether each cluster "
            "appeared, grew, shrank or was fixed.",
            metavar="TASK",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    baseline_store: Annotated[
        str | None,
        typer.Option(help="The baseline's store, when not --store.", metavar="PATH|URL"),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="md (Markdown), json, or github (a JSON list of issues: title, body, labels).",
        ),
    ] = "md",
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    top: Annotated[int, typer.Option(min=0, help="Items in md and github output (0: all).")] = 20,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            help="With --baseline: list only items in this state (NEW, "
            "GREW, SHRANK, SAME, MOVED, FIXED) in md and github output; repeatable.",
        ),
    ] = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by", help="Split clusters by a row metadata field (e.g. scenario); repeatable."
        ),
    ] = None,
    owner_field: Annotated[
        str, typer.Option(help="The row metadata field that names an owner.")
    ] = "owner",
    pass_score: Annotated[
        int | None,
        typer.Option(help="Lowest passing final score (default: one below the scale's top)."),
    ] = None,
    text_clusters: Annotated[
        int | None,
        typer.Option(
            min=1, help="Clusters of explanations no rule names (default: from their number)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="The text clustering's seed.")] = 0,
    summarize: Annotated[
        bool,
        typer.Option(
            "--summarize",
            help="Ask --model for a candidate rule per cluster of "
            "explanations (replayable from --cassettes).",
        ),
    ] = False,
    model: Annotated[str, typer.Option(help="Model for --summarize.")] = "openai/gpt-4o-mini",
    mode: Annotated[str, typer.Option(help="--summarize: replay, record or live.")] = "replay",
    cassettes: Annotated[Path, typer.Option(help="Cassette folder.")] = Path("cassettes"),
    api_base: Annotated[
        str | None, typer.Option(help="--summarize: an OpenAI-compatible server.")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="--summarize: the key's environment variable.")
    ] = None,
) -> None:
    """Rank the clusters of a task's low rows as action items: by unmet requirement, intent
    and metadata, impact (rows × severity) with red lines first, evidence rows and turns, an
    owner from metadata; against a baseline, which clusters appeared, grew, shrank or were
    fixed; and the low rows no rule explains, their explanations clustered into candidate
    requirements."""
    from rubric_engine.actions.render import FORMATS
    from rubric_engine.errors import ConfigurationError

    if format not in FORMATS:
        _fail(ConfigurationError(f"--format {format!r} is not valid; use md, json or github"))
    states = tuple(s.upper() for s in state or ())
    valid = ("NEW", "GREW", "SHRANK", "SAME", "MOVED", "FIXED")
    if any(s not in valid for s in states) or (states and baseline is None):
        _fail(ConfigurationError(f"--state takes {', '.join(valid)}, with --baseline"))

    def run() -> None:
        from rubric_engine.actions.render import render, shown_items
        from rubric_engine.actions.run import ActionOptions, build_actions

        summarizer = None
        if summarize:
            from rubric_engine.actions.summary import summarizer_for
            from rubric_engine.judge.backends import LiveSettings
            from rubric_engine.judge.one_call import CallSettings

            settings = CallSettings(
                mode=mode,
                cassettes=cassettes,
                record_file="actions/summaries.jsonl",
                live=LiveSettings(api_base=api_base, api_key_env=api_key_env),
            )
            summarizer = summarizer_for(model, settings)
        options = ActionOptions(
            pass_score=pass_score,
            by=tuple(dict.fromkeys(by or ())),
            owner_field=owner_field,
            text_clusters=text_clusters,
            seed=seed,
        )
        other = _store_location(baseline_store) if baseline_store else None
        built = build_actions(store, task_id, baseline, other, options, summarizer)
        text = render(built, format, top, states)
        if out is None:
            sys.stdout.write(text)
            return
        from rubric_engine.report.render.output import check_output_file, write_atomic

        check_output_file(out)
        try:
            write_atomic(out, text)
        except OSError as exc:
            raise ConfigurationError(
                f"--out {out} cannot be written ({exc.strerror or exc})"
            ) from exc
        written, found = len(shown_items(built, format, top, states)), len(built.items)
        typer.echo(
            f"wrote {out}: {written} item(s)"
            + (f" of {found}" if written != found else "")
            + f" from {built.low_rows} low row(s)"
            + (
                f"; {', '.join(f'{n} {s}' for s, n in built.states.items())}"
                if built.states
                else ""
            )
        )

    _guard(run)
