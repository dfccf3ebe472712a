"""`rubric-eval reviewers add|list|link|revoke`: the review app's accounts (docs/review.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import HELP_MARKUP, StoreOpt, _guard, _require_store, app, print_columns

reviewers_app = typer.Typer(
    help="Reviewer accounts of the review app: add, list, link (a new sign-in link), revoke.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(reviewers_app, name="reviewers")

UrlOpt = Annotated[
    str,
    typer.Option("--url", help="Where the team reaches `serve` (the sign-in link starts with it)."),
]
HoursOpt = Annotated[
    int, typer.Option("--valid-hours", help="How long the sign-in link works (one use).")
]


#: where ``serve`` listens unless told otherwise: the links' address when --url is not given
SERVE_URL = "http://127.0.0.1:8765"


def _print_link(name: str, token: str, url: str, hours: int) -> None:
    typer.echo(f"sign-in link for {name} (one use, valid {hours} h; shown only now):")
    typer.echo(f"  {url.rstrip('/')}/signin?token={token}")
    if url == SERVE_URL:
        typer.echo(
            "  (the address of `serve` with its defaults; if the team reaches it elsewhere, "
            f"`rubric-eval reviewers link {name} --url URL` prints a link for that address)"
        )


@reviewers_app.command("add")
def reviewers_add(
    name: Annotated[str, typer.Argument(help="The name every label of theirs records.")],
    role: Annotated[
        str, typer.Option(help="reviewer (reviews queues), lead (+ queues, settles), admin.")
    ] = "reviewer",
    url: UrlOpt = SERVE_URL,
    valid_hours: HoursOpt = 168,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Add an account and print its one-time sign-in link."""

    def run() -> None:
        from rubric_engine.review.accounts import add_reviewer
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            account, token = add_reviewer(opened.backend, name, role, valid_hours)
        typer.echo(f"added {account.name} ({account.role})")
        _print_link(account.name, token, url, valid_hours)

    _guard(run)


@reviewers_app.command("link")
def reviewers_link(
    name: Annotated[str, typer.Argument(help="An active account.")],
    url: UrlOpt = SERVE_URL,
    valid_hours: HoursOpt = 168,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Print a new one-time sign-in link (an unused earlier one stops working)."""

    def run() -> None:
        from rubric_engine.review.accounts import issue_token
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            token = issue_token(opened.backend, name, valid_hours)
        _print_link(name, token, url, valid_hours)

    _guard(run)


@reviewers_app.command("list")
def reviewers_list(store: StoreOpt = DEFAULT_STORE) -> None:
    """Every account: role, since when, revoked or not, how they sign in."""

    def run() -> None:
        from rubric_engine.review.accounts import accounts
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            found = accounts(opened.backend)
        if not found:
            typer.echo("no reviewer accounts yet: `rubric-eval reviewers add NAME --role lead`")
            return
        rows = [["name", "role", "created", "state", "sign-in"]]
        for a in found:
            ways = [
                w
                for w, on in (("password", a.has_password), ("link", bool(a.token_expires_at)))
                if on
            ]
            state = "active" if a.active else f"revoked {a.revoked_at}"
            rows.append([a.name, a.role, a.created_at, state, ", ".join(ways) or "-"])
        print_columns(rows)

    _guard(run)


@reviewers_app.command("revoke")
def reviewers_revoke(
    name: Annotated[str, typer.Argument(help="An active account.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """End the account's sign-ins and sessions at once; the labels it made stay."""

    def run() -> None:
        from rubric_engine.review.accounts import revoke
        from rubric_engine.store.task_store import TaskStore

        _require_store(store)
        with TaskStore(store) as opened:
            revoked = revoke(opened.backend, name)
        typer.echo(f"revoked {revoked.name} at {revoked.revoked_at}; their labels are kept")

    _guard(run)
