"""The web app: configuration, the shared page helpers and the route table (docs/review.md).
An edge: it reads and writes the task store.

Every request opens the store anew and closes it, so what another process commits (a scoring
run, another `serve`) shows on the next reload, and every write is one short transaction. Who
is asking comes from the signed session, the trusted proxy's header or the one local account
(:mod:`rubric_engine.serve.auth`), never from a form field; every state-changing request
carries the session's CSRF token; :mod:`rubric_engine.serve.security` checks Host and Origin.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from rubric_engine.errors import RubricEvalError, TaskNotFoundError
from rubric_engine.report.model import Diff
from rubric_engine.report.run import require_store
from rubric_engine.review.accounts import Account
from rubric_engine.review.queue import STRATEGIES
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.versions import verified_snapshot
from rubric_engine.serve.security import LOOPBACK_HOSTS, SecurityMiddleware
from rubric_engine.store.location import StoreLocation, parse_location
from rubric_engine.store.task_ref import resolve_in_store
from rubric_engine.store.task_store import TaskRecord, TaskStore

__all__ = ["SESSION_COOKIE", "Pages", "Refused", "ServeConfig", "create_app"]

SESSION_COOKIE = "rubric_eval_session"
#: a session lasts this long after the last request
SESSION_MAX_AGE_S = 14 * 24 * 3600
AuthMode = Literal["token", "proxy", "local"]


@dataclass
class ServeConfig:
    """What ``rubric-eval serve`` was started with.

    Attributes:
        auth: ``token`` (accounts sign in with a one-time link or a password), ``proxy`` (a
            trusted proxy names the user in ``user_header``) or ``local`` (one account,
            ``reviewer``, is signed in: one person on a laptop).
        trusted_proxies: addresses or networks (``10.0.0.5``, ``10.0.0.0/24``) whose
            ``user_header`` is believed (``proxy`` only).
        allowed_hosts: the names the app answers to (Host header).
        secure_cookies: the session cookie is sent over HTTPS only (behind a TLS proxy).
    """

    store: StoreLocation
    auth: AuthMode = "token"
    reviewer: str | None = None
    trusted_proxies: tuple[str, ...] = ()
    user_header: str = "X-Forwarded-User"
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    secure_cookies: bool = False
    #: (task id, state, stored rows) → the list page's figures, so a reload is cheap
    summaries: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    #: (task id, rubric hash) → the task's verified rubric snapshot (immutable per task)
    rubrics: dict[tuple[str, str], EvalRubric] = field(default_factory=dict)
    #: (task id, state, stored rows, calibration) → the report page, most recent last
    reports: dict[tuple[str, str, int, str], str] = field(default_factory=dict)
    #: (baseline and current task: id, state, stored rows) → their diff, most recent last
    diffs: dict[tuple[str, str, int, str, str, int], Diff] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.store = parse_location(self.store)  # a path or URL given as text


class Refused(Exception):
    """A request the app will not serve: shown as a page with ``status``."""

    def __init__(self, status: int, message: str, *, sign_in: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.sign_in = sign_in


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("rubric_engine.serve", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "–" if v is None else f"{v * 100:.1f}%"
    env.filters["q"] = lambda v: quote(str(v), safe="")
    env.globals["queue_strategies"] = STRATEGIES
    return env


def csrf_token(request: Request) -> str:
    """The session's CSRF token (made on first use; forms carry it as ``csrf``)."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return token


class Pages:
    """The routes' shared state and helpers: configuration, templates, the store, identity."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.env = environment()
        #: guards the configuration's caches, written from worker threads too
        self.lock = threading.Lock()

    @contextmanager
    def store(self) -> Iterator[TaskStore]:
        require_store(self.config.store)
        with TaskStore(self.config.store) as opened:
            yield opened

    def render(
        self,
        request: Request,
        name: str,
        me: Account | None,
        status: int = 200,
        **values: Any,
    ) -> HTMLResponse:
        template = self.env.get_template(name)
        html = template.render(
            me=me,
            csrf=csrf_token(request),
            path=request.url.path,
            auth=self.config.auth,
            **values,
        )
        return HTMLResponse(html, status_code=status)

    def task(self, store: TaskStore, ref: str) -> tuple[TaskRecord, EvalRubric]:
        """The task ``ref`` names and its verified rubric snapshot (kept per task and hash)."""
        record = store.task(resolve_in_store(store, ref))
        key = (record.id, record.rubric_hash)
        if key not in self.config.rubrics:
            self.config.rubrics[key] = verified_snapshot(
                record.rubric_snapshot, record.rubric_hash, f"task {record.id}"
            )
        return record, self.config.rubrics[key]

    def me(self, request: Request, store: TaskStore) -> Account:
        """The signed-in account. Raises: Refused: nobody is signed in (403)."""
        from rubric_engine.serve.auth import identity

        found = identity(self.config, request, store.backend)
        if found is None:
            raise Refused(403, "sign in to use the review app", sign_in=True)
        return found

    def signed_in(self, request: Request) -> Account | None:
        """Who is signed in, for an error page's header; ``None`` when nobody is, or when it
        cannot be worked out (the store may be what the page failed on)."""
        from rubric_engine.serve.auth import identity

        try:
            with self.store() as store:
                return identity(self.config, request, store.backend)
        except Exception:  # the page reports the first error, not this one
            return None

    def lead(self, request: Request, store: TaskStore) -> Account:
        """Raises: Refused: not signed in, or not a lead or admin (403)."""
        me = self.me(request, store)
        if not me.leads:
            raise Refused(403, f"{me.name} is a {me.role}; this page is for leads and admins")
        return me

    async def posted(self, request: Request) -> dict[str, Any]:
        """A state-changing request's form, after its CSRF token was checked.

        Raises:
            Refused: the token is missing or not this session's (403); nothing is stored.
        """
        form = await request.form()
        given = str(form.get("csrf") or request.headers.get("x-csrf-token") or "")
        expected = request.session.get("csrf")
        if not isinstance(expected, str) or not secrets.compare_digest(given, expected):
            raise Refused(
                403,
                "refused: this form's security token is missing or not from this session "
                "(signed out, or sent from another site); nothing was stored. Reload the page "
                "and send it again.",
            )
        data: dict[str, Any] = {k: str(v) for k, v in form.items()}
        data["flag"] = [str(v) for v in form.getlist("flag")]
        data["member"] = [str(v) for v in form.getlist("member")]
        return data


async def _refused(request: Request, exc: Exception) -> Response:
    pages: Pages = request.app.state.pages
    assert isinstance(exc, Refused)
    if exc.sign_in:
        return pages.render(
            request,
            "signin.html.j2",
            None,
            status=exc.status,
            message=str(exc),
            token="",
            next=request.url.path,
        )
    return pages.render(request, "error.html.j2", None, status=exc.status, message=str(exc))


async def _error_page(request: Request, exc: Exception) -> Response:
    pages: Pages = request.app.state.pages
    status = 404 if isinstance(exc, TaskNotFoundError) else 400
    me = pages.signed_in(request)
    # the store's path or URL is the server's business, not every signed-in reviewer's
    message = str(exc).replace(str(pages.config.store), "the store")
    return pages.render(request, "error.html.j2", me, status=status, message=message)


def create_app(config: ServeConfig) -> Starlette:
    """The Starlette app over ``config.store``.

    Raises:
        StoreError: the store is missing or damaged; ConfigurationError: ``local`` mode names
            no active account.
    """
    from rubric_engine.review.accounts import session_secret
    from rubric_engine.serve.routes import AllPages, routes

    require_store(config.store)
    with TaskStore(config.store) as opened:
        secret = session_secret(opened.backend)
    pages = AllPages(config)
    middleware = [
        Middleware(SecurityMiddleware, allowed_hosts=config.allowed_hosts),
        Middleware(
            SessionMiddleware,
            secret_key=secret,
            session_cookie=SESSION_COOKIE,
            max_age=SESSION_MAX_AGE_S,
            same_site="lax",
            https_only=config.secure_cookies,
        ),
    ]
    app = Starlette(
        routes=routes(pages),
        middleware=middleware,
        exception_handlers={Refused: _refused, RubricEvalError: _error_page},
    )
    app.state.pages = pages
    return app
