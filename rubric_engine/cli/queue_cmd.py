"""`rubric-eval queue create|list|rows|set`: review queues kept with their task (docs/review.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import HELP_MARKUP, StoreOpt, _guard, _require_store, app, print_columns

queue_app = typer.Typer(
    help="Review queues, stored with their task and read by every `serve`: create, list, rows, "
    "set.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(queue_app, name="queue")

MemberOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--member",
        help="A reviewer assigned to the queue; NAME:blind or NAME:sighted sets their own "
        "blindness (else --blind decides). Repeat for each. None: every reviewer may work it.",
    ),
]


def _members(db: Any, given: list[str] | None, blind: bool) -> dict[str, bool]:
    """``--member`` values → reviewer → blind, each an active account."""
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.review.accounts import account, accounts

    out: dict[str, bool] = {}
    for text in given or ():
        name, _, how = text.partition(":")
        if how not in ("", "blind", "sighted"):
            raise ConfigurationError(f"--member {text!r}: write NAME, NAME:blind or NAME:sighted")
        found = account(db, name)
        if found is None or not found.active:
            known = ", ".join(a.name for a in accounts(db) if a.active) or "none yet"
            raise ConfigurationError(
                f"--member {name}: no active reviewer account of that name (active: {known}); "
                f"add it first: `rubric-eval reviewers add {name}`"
            )
        out[name] = blind if how == "" else how == "blind"
    return out


@queue_app.command("create")
def queue_create(
    task: Annotated[str, typer.Argument(help="Task id, name or tag:TAG.")],
    name: Annotated[str, typer.Option(help="The queue's name within the task.")] = "main",
    strategy: Annotated[
        str,
        typer.Option(
            help="random, disagreement, red-flag, low-score, rare or unstable-first (a task "
            "scored with --samples K: the rows whose samples disagreed first)."
        ),
    ] = "random",
    reviewers_per_row: Annotated[int, typer.Option(help="Reviewers every row needs.")] = 1,
    second_review: Annotated[
        float,
        typer.Option(
            help="Share of rows (0-1) a second reviewer re-checks: exactly round(share x rows)."
        ),
    ] = 0.2,
    seed: Annotated[int, typer.Option(help="Seed of the sample and the random order.")] = 0,
    blind: Annotated[
        bool, typer.Option(help="Members review without seeing the judge's verdict.")
    ] = False,
    claim_ttl: Annotated[
        int, typer.Option(help="Seconds an opened row stays reserved for its reviewer.")
    ] = 600,
    member: MemberOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Draw a queue over the task's rows and store it, with its second-review sample."""

    def run() -> None:
        import getpass

        from rubric_engine.review.queue import QueueSettings, check_strategy
        from rubric_engine.review.queue_store import create_queue
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            task_id = resolve_in_store(opened, task)
            settings = QueueSettings(
                name=name,
                strategy=check_strategy(strategy),
                reviewers_per_row=reviewers_per_row,
                second_review=second_review,
                seed=seed,
                blind=blind,
                claim_ttl_s=claim_ttl,
                members=_members(opened.backend, member, blind),
            )
            made = create_queue(opened, task_id, settings, f"cli:{getpass.getuser()}")
        typer.echo(
            f"queue {made.name} of task {task_id}: {made.row_count} row(s) ({strategy}), "
            f"{made.sample_size} in the second-review sample (seed {seed}), "
            f"{reviewers_per_row} reviewer(s) per row"
        )
        typer.echo(_who(made.settings))

    _guard(run)


def _who(settings: Any) -> str:
    if not settings.members:
        return f"open to every reviewer ({'blind' if settings.blind else 'verdict shown'})"
    return "members: " + ", ".join(
        f"{n} ({'blind' if b else 'verdict shown'})" for n, b in settings.members.items()
    )


@queue_app.command("list")
def queue_list(
    task: Annotated[str, typer.Argument(help="Task id, name or tag:TAG.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """The task's queues with their settings and progress."""

    def run() -> None:
        from rubric_engine.review.queue_store import progress, queues
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            task_id = resolve_in_store(opened, task)
            found = queues(opened.backend, task_id)
            if not found:
                typer.echo(f"task {task_id} has no queue yet: `rubric-eval queue create {task}`")
                return
            rows = [
                [
                    "queue",
                    "strategy",
                    "rows",
                    "second review",
                    "per row",
                    "complete",
                    "disputed",
                    "settled",
                    "who",
                ]
            ]
            for q in found:
                done = progress(opened.backend, q, "")
                s = q.settings
                rows.append(
                    [
                        q.name,
                        s.strategy,
                        str(q.row_count),
                        f"{q.sample_size} (seed {s.seed})",
                        str(s.reviewers_per_row),
                        f"{done.complete}/{done.total}",
                        str(done.disputed),
                        str(done.settled),
                        _who(s),
                    ]
                )
        print_columns(rows)

    _guard(run)


@queue_app.command("rows")
def queue_rows(
    task: Annotated[str, typer.Argument(help="Task id, name or tag:TAG.")],
    name: Annotated[str, typer.Argument(help="The queue's name.")] = "main",
    limit: Annotated[int, typer.Option(min=1, help="Rows to list.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Rows to skip first.")] = 0,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """The queue's rows in the order it offers them, with their review state and, for a
    task scored with --samples K, how much each row's samples disagreed."""

    def run() -> None:
        from rubric_engine.review.queue_store import get_queue, queued_rows
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            task_id = resolve_in_store(opened, task)
            queue = get_queue(opened.backend, task_id, name)
            listed = queued_rows(opened, queue, limit, offset)
        sampled = any(r.summary is not None and r.summary.sampled for r in listed)
        header = ["#", "row", "state", "reviews", "second", "final"]
        lines = [header + (["samples"] if sampled else [])]
        for r in listed:
            s = r.summary
            line = [
                str(r.position + 1),
                r.row_id,
                r.state,
                f"{r.reviews}/{r.needed}",
                "yes" if r.second else "",
                "–" if s is None or s.final_score is None else str(s.final_score),
            ]
            if sampled:
                line.append(_samples_note(s))
            lines.append(line)
        print_columns(lines)
        shown = offset + len(listed)
        if shown < queue.row_count:
            typer.echo(f"({shown} of {queue.row_count}; --offset {shown} for more)")

    _guard(run)


def _samples_note(summary: Any) -> str:
    if summary is None or not summary.sampled:
        return "–"
    if summary.sample_count == 1:  # clear after one ask (--samples-when unsure): not compared
        return "1 sample (clear after one)"
    if not summary.disagreements:
        return "stable"
    return (
        f"unstable: {summary.disagreements} disagreement(s), lowest agreement "
        f"{summary.lowest_agreement:.2f}"
    )


@queue_app.command("set")
def queue_set(
    task: Annotated[str, typer.Argument(help="Task id, name or tag:TAG.")],
    name: Annotated[str, typer.Argument(help="The queue.")],
    reviewers_per_row: Annotated[
        int | None, typer.Option(help="Reviewers every row needs.")
    ] = None,
    blind: Annotated[
        bool | None, typer.Option(help="Members without their own setting review blind.")
    ] = None,
    claim_ttl: Annotated[int | None, typer.Option(help="Seconds a claim lasts.")] = None,
    member: MemberOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Change who works a queue and how; its rows, order and sample stay as drawn."""

    def run() -> None:
        from dataclasses import replace

        from rubric_engine.review.queue_store import get_queue, update_queue
        from rubric_engine.store.task_ref import resolve_in_store
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            task_id = resolve_in_store(opened, task)
            queue = get_queue(opened.backend, task_id, name)
            s = queue.settings
            new_blind = s.blind if blind is None else blind
            changed = replace(
                s,
                reviewers_per_row=s.reviewers_per_row
                if reviewers_per_row is None
                else reviewers_per_row,
                blind=new_blind,
                claim_ttl_s=s.claim_ttl_s if claim_ttl is None else claim_ttl,
                members=s.members
                if member is None
                else _members(opened.backend, member, new_blind),
            )
            update_queue(opened.backend, queue, changed)
        typer.echo(
            f"queue {name} of task {task_id}: {changed.reviewers_per_row} reviewer(s) per row"
        )
        typer.echo(_who(changed))

    _guard(run)
