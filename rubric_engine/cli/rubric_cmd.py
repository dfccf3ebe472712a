"""`rubric-eval rubric …` (validate, list, show, publish, retire, diff, schema) and
`rubric-eval renormalize`: the rubric lifecycle of docs/rubric-packs.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import (
    StoreOpt,
    _fail,
    _guard,
    _require_store,
    app,
    print_columns,
    rubric_app,
)
from rubric_engine.errors import ExitCode

RefArg = Annotated[
    str, typer.Argument(help="KEY, KEY@VERSION (from the store) or a pack file.", metavar="REF")
]


@rubric_app.command("validate")
def rubric_validate(
    files: Annotated[list[Path], typer.Argument(help="Pack files.")],
    lint: Annotated[
        bool,
        typer.Option(
            "--lint",
            help="Also list what will confuse judges: mixed or open-ended red lines, notes "
            "that redefine a rule, uncapped or duplicate rules, overlapping intents "
            "(docs/authoring.md).",
        ),
    ] = False,
    task: Annotated[
        str | None,
        typer.Option(
            help="With --lint: a task scored with this pack's key; adds what its rows show "
            "(rules unmet in most rows, caps that never or always bind, rules unmet together) "
            "and, where labels exist, the rules judge and labels disagree on most.",
            metavar="TASK",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    fail_on_lint: Annotated[
        bool,
        typer.Option("--fail-on-lint", help="Exit 7 when --lint finds anything (for CI)."),
    ] = False,
) -> None:
    """Validate rubric packs; every problem and warning of a file is listed with its line and
    field (warnings do not fail validation; lint findings only with --fail-on-lint)."""
    from rubric_engine.errors import ConfigurationError, RubricError
    from rubric_engine.rubric import load_rubric_checked

    if (task or fail_on_lint) and not lint:
        _fail(ConfigurationError("--task and --fail-on-lint go with --lint; add --lint"))
    failed = linted = 0
    for path in files:
        try:
            pack, warnings = load_rubric_checked(path)
        except RubricError as exc:
            failed += 1
            typer.echo(f"error: {exc}", err=True)
            continue
        also = f", {len(warnings)} warning(s)" if warnings else ""
        typer.echo(
            f"ok: {path}: {pack.key} v{pack.version} ({pack.status}), "
            f"{len(pack.intents)} intents, {len(pack.requirements_by_id)} requirements, "
            f"{len(pack.red_flags)} red-flag types, hash {pack.content_hash()}{also}"
        )
        for warning in warnings:
            typer.echo(f"  - {warning}")
        if lint:
            linted += _print_lint(pack, task, store)
    if failed:
        raise typer.Exit(ExitCode.BAD_INPUT)
    if fail_on_lint and linted:
        raise typer.Exit(ExitCode.GATE_FAILED)


def _print_lint(pack: Any, task: str | None, store: Any) -> int:
    """Print the lint of one pack (and of ``task`` when given); return the finding count."""
    from rubric_engine.rubric.lint import lint_pack

    found = lint_pack(pack)
    said = "the pack's texts"
    if task is not None:
        from rubric_engine.authoring.lint_task import task_findings

        more, read = _guard(lambda: task_findings(pack, store, task))
        found += more
        said += f" and {read}"
    typer.echo(f"  lint: {len(found)} finding(s) from {said}")
    for finding in found:
        rid = f" {finding.requirement_id}" if finding.requirement_id else ""
        typer.echo(f"  - {finding.code} {finding.path}{rid}: {finding.message}")
        typer.echo(f"    fix: {finding.fix}")
    return len(found)


@rubric_app.command("init")
def rubric_init(
    criteria: Annotated[
        str,
        typer.Option(
            "--criteria",
            help="File of one-line criteria (`-` reads stdin): one rule a line, `!` for a red "
            "line, `| cap N` for a cap, `## KEY: hints` for an intent (docs/authoring.md).",
            metavar="FILE|-",
        ),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Pack file to write (default: print it).")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="Pack key (default: from the criteria file's name).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Pack title (default: from the key).")] = None,
    language: Annotated[
        str | None, typer.Option(help="zh, en, … (default: zh when the criteria hold CJK).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
) -> None:
    """Turn one-line criteria into a DRAFT pack that validates and scores at once: IDs derived
    from the text, categories and red-line types proposed and marked REVIEW, every field
    commented."""

    def run() -> None:
        from rubric_engine.authoring.init import init_pack, key_from_name
        from rubric_engine.errors import ConfigurationError, InputError

        if criteria == "-":
            text, source = sys.stdin.read(), "stdin"
        else:
            path = Path(criteria)
            try:
                text = path.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(
                    f"{path}: cannot read the criteria ({exc}); pass a UTF-8 "
                    "text file, or - for stdin"
                ) from exc
            source = path.name
        if out is not None and out.exists() and not force:
            raise ConfigurationError(f"--out {out} exists; pass --force to replace it")
        made = init_pack(text, source, key or key_from_name(Path(source).stem), name, language)
        if out is None:
            sys.stdout.write(made.text)
            return
        _write(out, made.text)
        pack = made.rubric
        reqs = list(pack.requirements_by_id.values())
        typer.echo(
            f"wrote {out}: {pack.key} v{pack.version} (DRAFT), {len(pack.intents)} intent(s), "
            f"{len(reqs)} requirement(s) ({sum(r.critical for r in reqs)} red line(s), "
            f"{sum(r.check is not None for r in reqs)} with a check), {made.review} "
            "proposal(s) marked REVIEW"
        )
        for warning in made.warnings:
            typer.echo(f"  - {warning}")
        typer.echo(f"next: rubric-eval rubric validate {out} --lint")
        if any(r.check is not None for r in reqs):
            typer.echo(
                f"      rubric-eval score ROWS --rubric {out} --draft --judge none   "
                "(the rules with a check, no judge)"
            )
        typer.echo(f"      rubric-eval score ROWS --rubric {out} --draft --mode live --model MODEL")

    _guard(run)


def _write(out: Path, text: str) -> None:
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.report.render.output import check_output_file, write_atomic

    check_output_file(out)
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise ConfigurationError(
            f"--out {out} cannot be written ({exc.strerror or exc}); pass a path you can write to"
        ) from exc


@rubric_app.command("draft")
def rubric_draft(
    policies: Annotated[
        list[Path], typer.Argument(help="Policy documents (Markdown or text, UTF-8).")
    ],
    model: Annotated[
        str,
        typer.Option(
            help="The model that proposes the pack (litellm name), e.g. "
            "openai/gpt-4o-mini; part of the cassette key."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option(help="DRAFT pack file to write (default: print it).")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="Pack key (default: from the first policy's name).")
    ] = None,
    language: Annotated[
        str | None,
        typer.Option(help="Language of the rule texts (default: zh when the policy holds CJK)."),
    ] = None,
    mode: Annotated[
        str, typer.Option(help="replay (from --cassettes), record (live, answers kept) or live.")
    ] = "replay",
    cassettes: Annotated[Path, typer.Option(help="Cassette folder.")] = Path("cassettes"),
    api_base: Annotated[
        str | None, typer.Option(help="An OpenAI-compatible server (live, record).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the key (live, record).")
    ] = None,
    max_reasks: Annotated[
        int, typer.Option(min=0, help="Re-asks when an answer fails its checks.")
    ] = 2,
    timeout: Annotated[float, typer.Option(help="Seconds per call (live, record).")] = 600.0,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
) -> None:
    """Ask a model to propose a pack from policy documents: requirements (category, red line
    and type, observability, cap) and intents (trigger hints), each rule quoting the policy
    lines it comes from, checked to exist. Writes a DRAFT with the sources as comments;
    nothing is published."""

    def run() -> None:
        from rubric_engine.authoring.draft import draft_pack
        from rubric_engine.authoring.init import key_from_name
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.judge.backends import LiveSettings
        from rubric_engine.judge.one_call import CallSettings
        from rubric_engine.rubric.criteria import language_of

        if out is not None and out.exists() and not force:
            raise ConfigurationError(f"--out {out} exists; pass --force to replace it")
        pack_key = key or key_from_name(policies[0].stem)
        lang = language or _policy_language(policies, language_of)
        settings = CallSettings(
            mode=mode,
            cassettes=cassettes,
            record_file="drafts/" + "+".join(p.stem for p in policies) + ".jsonl",
            live=LiveSettings(api_base=api_base, api_key_env=api_key_env, timeout_s=timeout),
        )
        made = draft_pack(policies, model, pack_key, lang, settings, max_reasks)
        if out is None:
            sys.stdout.write(made.text)
            return
        _write(out, made.text)
        pack = made.rubric
        reqs = list(pack.requirements_by_id.values())
        answer = made.answered.provenance or {"kind": mode}
        typer.echo(
            f"wrote {out}: {pack.key} v{pack.version} (DRAFT), {len(pack.intents)} intent(s), "
            f"{len(reqs)} requirement(s) ({sum(r.critical for r in reqs)} red line(s)), every "
            f"one quoting its policy lines; answer: {answer.get('kind')}"
            + (f", {len(made.answered.reasks)} re-ask(s)" if made.answered.reasks else "")
        )
        typer.echo(f"next: review it, then rubric-eval rubric validate {out} --lint")

    _guard(run)


def _policy_language(policies: list[Path], language_of: Any) -> str:
    try:
        return str(language_of(" ".join(p.read_text("utf-8")[:2000] for p in policies)))
    except (OSError, UnicodeDecodeError):
        return "en"  # the draft reports the unreadable file


@rubric_app.command("schema")
def rubric_schema(
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of the rubric pack format (for editor validation)."""
    from rubric_engine.rubric import dump_json_schema

    text = dump_json_schema()
    if out is None:
        sys.stdout.write(text)
        return

    def write() -> None:
        from rubric_engine.errors import ConfigurationError
        from rubric_engine.report.render.output import check_output_file, write_atomic

        check_output_file(out)
        try:
            write_atomic(out, text)
        except OSError as exc:
            raise ConfigurationError(
                f"--out {out} cannot be written ({exc.strerror or exc}); pass a path you can "
                "write to"
            ) from exc

    _guard(write)
    typer.echo(f"wrote {out}")


@rubric_app.command("publish")
def rubric_publish(
    file: Annotated[Path, typer.Argument(help="Pack file to publish.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Validate a pack file and freeze its version in the store (same content again: no-op)."""

    def run() -> None:
        from rubric_engine.errors import RubricError
        from rubric_engine.rubric.versions import RubricRegistry, load_for_publish
        from rubric_engine.store.task_store import TaskStore

        if not file.is_file():
            raise RubricError(f"{file}: pack file not found")
        pack = load_for_publish(file)  # a bad file must not create an empty store
        with TaskStore(store) as opened:
            outcome = RubricRegistry(opened).publish(file, pack)
        v = outcome.version
        if outcome.created:
            typer.echo(f"published {v.ref} ({v.content_hash[:19]}…) from {file}")
        else:
            typer.echo(f"{v.ref} is already published with this content; nothing changed")

    _guard(run)


@rubric_app.command("retire")
def rubric_retire(
    ref: Annotated[str, typer.Argument(help="KEY@VERSION to retire.", metavar="KEY@VERSION")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Retire a published version: no new tasks may use it; old tasks and reports stay readable."""

    def run() -> None:
        from rubric_engine.rubric.versions import RubricRegistry
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            registry = RubricRegistry(opened)
            version, changed = registry.retire(ref)
            live = [v.ref for v in registry.versions(version.key) if v.status == "PUBLISHED"]
        if not changed:
            typer.echo(f"{version.ref} was already retired on {version.retired_at}")
            return
        left = f"published now: {', '.join(live)}" if live else "no version is published now"
        typer.echo(f"retired {version.ref}; {left}")

    _guard(run)


@rubric_app.command("list")
def rubric_list(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the published and retired rubric versions in the store."""

    def run() -> None:
        from rubric_engine.rubric.versions import RubricRegistry
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            registry = RubricRegistry(opened)
            versions, used = registry.versions(), registry.task_counts()
        if not versions:
            typer.echo(f"{store}: nothing published yet; `rubric-eval rubric publish FILE`")
            return
        rows = [("rubric", "status", "content hash", "published", "retired", "tasks")]
        rows += [
            (
                v.ref,
                str(v.status),
                v.content_hash[:19] + "…",
                v.published_at,
                v.retired_at or "-",
                str(used.get((v.key, v.version), 0)),
            )
            for v in versions
        ]
        print_columns(rows)

    _guard(run)


@rubric_app.command("show")
def rubric_show(
    ref: RefArg,
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="text (summary), json (the stored pack) or yaml (the pack as a DRAFT file: "
            "`--format yaml > v2.yaml` starts the next version).",
        ),
    ] = "text",
) -> None:
    """Show one rubric version: its requirements, intents and red-flag types."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("text", "yaml", "json"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use text, yaml or json"))

    def run() -> None:
        import json

        import yaml

        from rubric_engine.rubric.versions import rubric_at

        rubric, label = rubric_at(ref, store)
        if format == "json":
            sys.stdout.write(json.dumps(rubric.snapshot(), ensure_ascii=False, indent=2) + "\n")
        elif format == "yaml":  # a starting point for the next version's file: a draft
            draft = {**rubric.snapshot(), "status": "DRAFT"}
            sys.stdout.write(
                f"# {label} as a draft to edit: set `version:` to a new number, then "
                "`rubric-eval rubric publish` this file.\n"
                + yaml.safe_dump(draft, allow_unicode=True, sort_keys=False, width=100)
            )
        else:
            _print_pack(rubric, label)

    _guard(run)


def _print_pack(rubric: Any, label: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{rubric.name}[/bold] — {label}, language {rubric.language}, scale "
        f"{rubric.score_scale.min}–{rubric.score_scale.max}, hash {rubric.content_hash()}"
    )
    console.print("intents: " + ", ".join(f"{i.key} ({i.name})" for i in rubric.intents))
    console.print("red-flag types: " + (", ".join(rubric.red_flag_types) or "none (no red lines)"))
    header = ("requirement", "where", "category", "red line", "cap", "observable", "text")
    owners = [("common", r) for r in rubric.common_requirements] + [
        (i.key, r) for i in rubric.intents for r in i.requirements
    ]
    rows = [
        (
            r.id,
            where,
            r.category,
            r.red_flag_type or "",
            "" if r.violation_score is None else str(r.violation_score),
            "yes" if r.observable_in_data else "no",
            " ".join(r.text.split()),
        )
        for where, r in owners
    ]
    if not console.is_terminal:  # piped: plain columns, nothing cut to fit 80 characters
        print_columns([header, *rows])
        return
    table = Table()
    for column in header:
        table.add_column(column, no_wrap=column == "requirement")
    for row in rows:
        table.add_row(*row)
    console.print(table)


@rubric_app.command("diff")
def rubric_diff(
    before: Annotated[
        str,
        typer.Argument(help="KEY, KEY@VERSION or a pack file: the older side.", metavar="BEFORE"),
    ],
    after: Annotated[
        str,
        typer.Argument(help="KEY, KEY@VERSION or a pack file: the newer side.", metavar="AFTER"),
    ],
    store: StoreOpt = DEFAULT_STORE,
    format: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
) -> None:
    """What changed from BEFORE to AFTER: requirements, intents, red-flag types, caps, scale."""
    from rubric_engine.errors import ConfigurationError

    if format not in ("text", "json"):
        _fail(ConfigurationError(f"--format {format!r} is not valid; use text or json"))

    def run() -> None:
        import json

        from rubric_engine.rubric.diff import diff_rubrics
        from rubric_engine.rubric.versions import rubric_at

        (old, old_label), (new, new_label) = rubric_at(before, store), rubric_at(after, store)
        diff = diff_rubrics(old, new)
        if format == "json":
            sys.stdout.write(json.dumps(diff.to_json(), ensure_ascii=False, indent=2) + "\n")
        else:
            typer.echo(f"before: {old_label}\nafter:  {new_label}")
            sys.stdout.write(diff.render())

    _guard(run)


@app.command()
def renormalize(
    task_id: Annotated[str, typer.Argument(help="Task whose stored judge outputs are re-used.")],
    rubric: Annotated[
        str,
        typer.Option(
            "--rubric", "-r", help="KEY@VERSION to re-apply (or a pack file with --draft)."
        ),
    ],
    draft: Annotated[bool, typer.Option("--draft", help="Allow a pack file.")] = False,
    store: StoreOpt = DEFAULT_STORE,
    out: Annotated[
        Path | None, typer.Option(help="Report folder (default reports/<new task id>).")
    ] = None,
) -> None:
    """What-if, no judge calls: re-apply another version's caps, observability and red-flag
    mapping to a task's stored judge outputs; writes a new task and its report."""

    def run() -> None:
        from rich.console import Console

        from rubric_engine.engine import report_command
        from rubric_engine.engine.renormalize import renormalize as run_renormalize
        from rubric_engine.report.render.console import print_summary

        _require_store(store)
        result = run_renormalize(store, task_id, rubric, draft, out)
        sys.stdout.write(result.diff.render())
        console = Console()
        print_summary(result.report, console)
        console.print(f"reports: {result.files.json}  {result.files.markdown}")
        console.print(
            f"task id: {result.task_id} (from {result.source_task_id}); compare with "
            f"`{report_command(result.source_task_id, store)}`"
        )

    _guard(run)
