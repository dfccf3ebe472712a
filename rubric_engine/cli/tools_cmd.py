"""`rubric-eval prompt show` and `rubric-eval cassette check|author`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, cassette_app, prompt_app


@prompt_app.command("show")
def prompt_show(
    input_file: Annotated[Path, typer.Argument(help="Dialogue file.")],
    rubric: Annotated[
        str, typer.Option("--rubric", "-r", help="Pack file, or KEY / KEY@VERSION in the store.")
    ],
    row: Annotated[str | None, typer.Option(help="rowId to show (default: the first).")] = None,
    store: StoreOpt = DEFAULT_STORE,
    input_format: Annotated[str, typer.Option(help="auto, jsonl, json, csv or yaml.")] = "auto",
    prompt: Annotated[
        str | None,
        typer.Option(help="Prompt template under prompts/ (default judge_v1; judge_v2, judge_v3)."),
    ] = None,
) -> None:
    """Print the system and user messages the judge receives for one row."""

    def run() -> None:
        from rubric_engine.dialogue.readers import DialogueSource
        from rubric_engine.engine.pipeline import RequestBuilder
        from rubric_engine.errors import DatasetError
        from rubric_engine.judge.prompt import DEFAULT_PROMPT, load_prompt
        from rubric_engine.rubric.versions import rubric_at

        pack, _ = rubric_at(rubric, store)
        source = DialogueSource(input_file, input_format)  # type: ignore[arg-type]
        source.validate()
        builder = RequestBuilder(pack, load_prompt(prompt or DEFAULT_PROMPT))
        ids = []
        for seq, found in enumerate(source):
            if row is None or found.row_id == row:
                for message in builder.prepare(seq, found).request.messages:
                    typer.echo(f"===== {message['role']} =====\n{message['content']}\n")
                return
            ids.append(found.row_id)
        more = f" … ({len(ids)} in all)" if len(ids) > 10 else ""
        raise DatasetError(
            f"{input_file}: no row with rowId {row!r}; rowIds here: {', '.join(ids[:10])}{more}"
        )

    _guard(run)


@cassette_app.command("check")
def cassette_check(
    folder: Annotated[Path, typer.Argument(help="Cassette folder.")] = Path("cassettes"),
) -> None:
    """Validate every cassette under FOLDER and count entries by provenance."""

    def run() -> None:
        from rubric_engine.errors import CassetteError
        from rubric_engine.judge.cassettes.cassette import entry_problems
        from rubric_engine.judge.cassettes.index import CassetteIndex

        if not folder.is_dir():
            raise CassetteError(f"{folder}: cassette folder not found")
        problems: list[str] = []
        index = CassetteIndex.load(folder, problems, strict=True)
        try:
            for entry in index.entries():
                problems += entry_problems(entry)
        finally:  # its file handles, now: the error below keeps the index alive in a traceback
            index.close()
        counts = index.provenance_counts()
        replaced = f" ({index.replaced} older duplicate(s) ignored)" if index.replaced else ""
        if index.torn:
            replaced += f" (half-written last line skipped: {', '.join(index.torn)})"
        typer.echo(
            f"{folder}: {len(index)} entries{replaced}; "
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
    prompt: Annotated[
        str | None,
        typer.Option(
            help="Prompt template the requests are keyed for (default judge_v1; judge_v3 "
            "verdicts carry evidence)."
        ),
    ] = None,
    sample: Annotated[
        int,
        typer.Option(
            min=1,
            help="The sample these verdicts answer (score --samples K): 2 and 3 are a second "
            "and third opinion (docs/stability.md).",
        ),
    ] = 1,
) -> None:
    """Turn hand-written verdicts into an `authored` cassette keyed like a real run."""

    def run() -> None:
        from rubric_engine.judge.cassettes.authoring import author_cassette
        from rubric_engine.judge.prompt import DEFAULT_PROMPT

        count = author_cassette(
            inputs, rubric, verdicts, author, method, out, model, prompt or DEFAULT_PROMPT, sample
        )
        typer.echo(f"wrote {count} authored entries to {out}")

    _guard(run)


@cassette_app.command("author-draft")
def cassette_author_draft(
    policies: Annotated[list[Path], typer.Argument(help="The policy documents drafted from.")],
    proposal: Annotated[
        Path, typer.Option(help="The hand-written proposal (the JSON a model would answer).")
    ],
    author: Annotated[str, typer.Option(help="Who wrote the proposal.")],
    method: Annotated[str, typer.Option(help="How it was written.")],
    out: Annotated[Path, typer.Option(help="Cassette file to write (replaced).")],
    key: Annotated[str, typer.Option(help="Pack key the request names.")],
    model: Annotated[
        str, typer.Option(help="Model the request is keyed for.")
    ] = "openai/gpt-4o-mini",
    language: Annotated[str, typer.Option(help="Language of the rule texts.")] = "en",
) -> None:
    """Turn a hand-written pack proposal into an `authored` answer to `rubric draft`'s request
    (checked as a replay checks it: shape, quotes, the pack's own validation)."""

    def run() -> None:
        from rubric_engine.authoring.draft import author_draft

        entry = author_draft(policies, proposal, key, language, author, method, out, model)
        typer.echo(f"wrote the authored draft answer for {entry.row_id} to {out}")

    _guard(run)


@cassette_app.command("author-summary")
def cassette_author_summary(
    task_id: Annotated[str, typer.Argument(help="Task whose explanation clusters are answered.")],
    answers: Annotated[
        Path,
        typer.Option(
            help="JSONL of hand-written candidate rules, one per cluster: `rows` (the "
            "cluster's row ids) and the rule's JSON fields (text, critical, violationScore, "
            "category)."
        ),
    ],
    author: Annotated[str, typer.Option(help="Who wrote the candidate rules.")],
    method: Annotated[str, typer.Option(help="How they were written.")],
    out: Annotated[Path, typer.Option(help="Cassette file to write (replaced).")],
    store: StoreOpt = DEFAULT_STORE,
    model: Annotated[
        str, typer.Option(help="Model the requests are keyed for.")
    ] = "openai/gpt-4o-mini",
    text_clusters: Annotated[
        int | None, typer.Option(min=1, help="As `actions --text-clusters`.")
    ] = None,
    seed: Annotated[int, typer.Option(help="As `actions --seed`.")] = 0,
) -> None:
    """Turn hand-written candidate rules into the `authored` answers `actions TASK --summarize`
    replays (keyed and checked as a replay keys and checks them)."""

    def run() -> None:
        from rubric_engine.actions.run import ActionOptions, build_actions
        from rubric_engine.actions.summary_authoring import (
            authored_provenance,
            read_answers,
            summary_author,
        )

        provenance = authored_provenance(author, method, answers)
        summarize, entries = summary_author(read_answers(answers), model, provenance)
        options = ActionOptions(text_clusters=text_clusters, seed=seed)
        built = build_actions(store, task_id, options=options, summarize=summarize)
        if not entries:
            from rubric_engine.errors import CassetteError

            raise CassetteError(f"task {built.task_id} has no low row that no rule explains")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(e.to_json() + "\n" for e in entries), encoding="utf-8")
        typer.echo(f"wrote {len(entries)} authored candidate rule(s) to {out}")

    _guard(run)
