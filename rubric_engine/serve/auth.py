"""Who is asking: the signed session, a trusted proxy's header, or the one local account
(docs/review.md "Team set-up"); and the sign-in, sign-out and account pages.

- ``token`` (the default): an account signs in once with the one-time link
  `rubric-eval reviewers add|link` printed, or with the password it set on its account page;
  the session (a cookie signed with the store's secret) names the account and its epoch, so
  revoking the account ends every session at once.
- ``proxy``: the oauth2-proxy pattern; a request from a trusted address names its user in a
  header (the account must exist and be active). From any other address the header is ignored.
- ``local``: one person on a laptop; ``serve --reviewer NAME`` on loopback signs NAME in.
"""

from __future__ import annotations

import ipaddress
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rubric_engine.errors import InputError
from rubric_engine.review.accounts import (
    Account,
    account,
    check_password,
    redeem_token,
    set_password,
)
from rubric_engine.serve.app import Pages, Refused, ServeConfig
from rubric_engine.store.backend import Backend

__all__ = ["AuthPages", "identity", "trusted"]


def trusted(config: ServeConfig, address: str | None) -> bool:
    """Whether ``address`` is one of the trusted proxies (an address or a network)."""
    if address is None:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in config.trusted_proxies)


def identity(config: ServeConfig, request: Request, db: Backend) -> Account | None:
    """The active account this request is made by, or ``None``."""
    if config.auth == "local":
        name: object = config.reviewer
    elif config.auth == "proxy":
        if not trusted(config, request.client.host if request.client else None):
            return None
        name = request.headers.get(config.user_header)
    else:
        name = request.session.get("who")
    if not isinstance(name, str) or not name:
        return None
    found = account(db, name)
    if found is None or not found.active:
        return None
    if config.auth == "token" and request.session.get("epoch") != found.session_epoch:
        return None  # revoked since, or signed in before a revocation
    return found


def _local_path(target: str) -> str:
    """``target`` when it is a path of this app, else ``/`` (``//host`` and ``/\\host`` are
    other sites to a browser: no open redirect after signing in)."""
    if target.startswith("/") and target[1:2] not in ("/", "\\"):
        return target
    return "/"


class AuthPages(Pages):
    """Sign-in, sign-out and the account page."""

    async def signin_form(self, request: Request) -> Response:
        if self.config.auth != "token":
            with self.store() as store:
                self.me(request, store)  # local: signed in; proxy: refused outside the proxy
            return RedirectResponse("/", status_code=303)
        return self.render(
            request,
            "signin.html.j2",
            None,
            token=request.query_params.get("token", ""),
            next=_local_path(request.query_params.get("next", "/")),
            message=None,
        )

    def _sign_in(self, request: Request, found: Account, target: str) -> Response:
        request.session.clear()  # a fresh session (and CSRF token) for the signed-in account
        request.session.update(who=found.name, epoch=found.session_epoch)
        request.session["csrf"] = secrets.token_urlsafe(32)
        return RedirectResponse(_local_path(target), status_code=303)

    async def signin(self, request: Request) -> Response:
        form = await self.posted(request)
        if self.config.auth != "token":
            raise Refused(403, f"this server signs people in by {self.config.auth}, not here")
        target = form.get("next", "/")
        with self.store() as store:
            if form.get("token"):
                found = redeem_token(store.backend, form["token"].strip())
                problem = (
                    "this sign-in link was used already, has expired or was replaced; ask a "
                    "lead for a new one (`rubric-eval reviewers link NAME`)"
                )
            else:
                found = check_password(
                    store.backend, form.get("name", "").strip(), form.get("password", "")
                )
                problem = "that name and password do not match an active account"
        if found is None:
            return self.render(
                request,
                "signin.html.j2",
                None,
                status=403,
                token="",
                next=target,
                message=problem,
            )
        return self._sign_in(request, found, target)

    async def signout(self, request: Request) -> Response:
        await self.posted(request)
        request.session.clear()
        return RedirectResponse("/signin", status_code=303)

    async def account_page(self, request: Request) -> Response:
        with self.store() as store:
            me = self.me(request, store)
        return self.render(request, "account.html.j2", me, message=None, saved=False)

    async def set_account_password(self, request: Request) -> Response:
        form = await self.posted(request)
        with self.store() as store:
            me = self.me(request, store)
            if form.get("password", "") != form.get("again", ""):
                message: str | None = "the two passwords differ; type the same one twice"
            else:
                try:
                    set_password(store.backend, me.name, form.get("password", ""))
                    message = None
                except InputError as exc:
                    message = str(exc)
        return self.render(
            request,
            "account.html.j2",
            me,
            status=400 if message else 200,
            message=message,
            saved=message is None,
        )
