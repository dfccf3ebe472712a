"""What every request to `serve` passes before a route sees it (docs/review.md "Web safety").

- **Host allow-list**: a request whose ``Host`` is not an allowed name is refused (403), so a
  page on another site cannot reach the app through DNS rebinding. Loopback names are allowed
  by default; ``--allowed-host`` adds the name a team reaches the app under.
- **Origin check**: a state-changing request (POST …) that a browser marks as coming from
  another origin (``Origin``, else ``Referer``) is refused (403). Each form also carries a CSRF
  token checked by the route (:mod:`rubric_engine.serve.auth`): the two together.
- **Headers** on every answer: no framing by any site (``frame-ancestors 'none'``,
  ``X-Frame-Options``), no MIME sniffing, no referrer outside the app, no caching of pages that
  hold dialogues.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["LOOPBACK_HOSTS", "SecurityMiddleware", "host_name"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HEADERS = [
    (
        b"content-security-policy",
        b"frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def host_name(netloc: str) -> str:
    """``"[::1]:8765"`` → ``"::1"``, ``"Example.org:80"`` → ``"example.org"``."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


class SecurityMiddleware:
    """Host allow-list, Origin check and security headers (see the module docstring)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = LOOPBACK_HOSTS) -> None:
        self.app = app
        self.allowed = frozenset(h.lower().strip("[]") for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope["method"], headers)
        if refusal is not None:
            response = PlainTextResponse(refusal, status_code=403)
            await response(scope, receive, self._with_headers(send))
            return
        await self.app(scope, receive, self._with_headers(send))

    def _refusal(self, method: str, headers: Headers) -> str | None:
        host = headers.get("host", "")
        if host_name(host) not in self.allowed:
            shown = ", ".join(sorted(self.allowed))
            return (
                f"refused: this app answers to {shown}, not to the host {host!r}; a team reaching "
                "it under another name starts `serve` with --allowed-host NAME"
            )
        if method not in UNSAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is None and "referer" in headers:
            parts = urlsplit(headers["referer"])
            origin = f"{parts.scheme}://{parts.netloc}"
        if origin is None:
            return None  # not a browser's cross-site request; the CSRF token still decides
        netloc = urlsplit(origin).netloc.lower()
        # a proxy that rewrites Host still sends the team's name as the origin
        team_name = host_name(netloc) in self.allowed - set(LOOPBACK_HOSTS)
        if origin == "null" or (netloc != host.lower() and not team_name):
            return (
                f"refused: a form sent from {origin!r} to {host!r}; the app accepts forms from "
                "its own pages only"
            )
        return None

    def _with_headers(self, send: Send) -> Send:
        async def sender(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in HEADERS if n not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        return sender
