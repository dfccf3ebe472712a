"""`rubric-eval serve`: the review web app over a task store (docs/review.md)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Annotated, Any

import typer

from rubric_engine import DEFAULT_STORE
from rubric_engine.cli._app import StoreOpt, _guard, _require_store, app

LOOPBACK = "127.0.0.1"
#: options of earlier versions that are queue settings now
_MOVED = {
    "--blind": "--blind",
    "--reviewers-per-row": "--reviewers-per-row N",
    "--second-review": "--second-review SHARE",
    "--claim-ttl": "--claim-ttl S",
    "--seed": "--seed N",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_notice(host: str, port: int, store: object, auth: str = "token") -> tuple[str, bool]:
    """What ``serve`` prints before it listens, and whether it is a warning (stderr)."""
    how = {
        "local": "the local account is signed in",
        "proxy": "people are named by the trusted proxy",
        "token": "people sign in with their accounts",
    }[auth]
    if is_loopback(host):
        return (
            f"serving {store} on http://{host}:{port}/ (loopback only: not reachable from "
            f"other machines; {how})",
            False,
        )
    return (
        f"warning: serving {store} on {host}:{port}, reachable from other machines; {how}. "
        "Put it behind HTTPS (a proxy) and name the host people use with --allowed-host.",
        True,
    )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` before anything is announced: a port in use is said
    as such (with the fix), and ``--port 0`` announces the port the system chose.

    Raises:
        ConfigurationError: the address cannot be bound (the port is taken, the host is not
            this machine's).
    """
    from rubric_engine.errors import ConfigurationError

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): another program (another "
            "`rubric-eval serve`?) holds the port, or the address is not this machine's; pass "
            "--port N (0: any free port) or another --host"
        ) from None
    sock.set_inheritable(True)
    return sock


def allowed_hosts(host: str, extra: list[str]) -> tuple[str, ...]:
    """Loopback names, the bound address when it is a specific one, and ``--allowed-host``."""
    from rubric_engine.serve.security import LOOPBACK_HOSTS

    named = [host] if host not in ("0.0.0.0", "::") else []
    return tuple(dict.fromkeys([*LOOPBACK_HOSTS, *named, *extra]))


def _config(
    store: Any,
    host: str,
    auth: str,
    reviewer: str | None,
    trusted_proxy: list[str],
    user_header: str,
    allowed_host: list[str],
    secure_cookies: bool,
) -> Any:
    """The app's configuration; the local account is made (admin) when it does not exist.

    Raises:
        ConfigurationError: an option that does not fit the others (each says why).
    """
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.serve.app import ServeConfig

    mode = "local" if reviewer else auth
    if mode not in ("token", "proxy", "local"):
        raise ConfigurationError(f"--auth {auth!r} is not valid; use token or proxy")
    if mode == "local" and not is_loopback(host):
        raise ConfigurationError(
            "--reviewer signs one account in for whoever reaches the port: it works on a "
            "loopback --host only; a team signs in with accounts (`rubric-eval reviewers add`)"
        )
    if mode == "local" and auth == "proxy":
        raise ConfigurationError("--reviewer and --auth proxy exclude each other; choose one")
    if mode == "proxy":
        if not trusted_proxy:
            raise ConfigurationError(
                "--auth proxy needs --trusted-proxy ADDR (the proxy's address or network): the "
                "user header is believed from there only"
            )
        for net in trusted_proxy:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as exc:
                raise ConfigurationError(
                    f"--trusted-proxy {net!r}: give an address or a network, e.g. 10.0.0.5 "
                    "or 10.0.0.0/24"
                ) from exc
    if mode == "local":
        _local_account(store, str(reviewer))
    return ServeConfig(
        store,
        auth=mode,  # type: ignore[arg-type]
        reviewer=reviewer,
        trusted_proxies=tuple(trusted_proxy),
        user_header=user_header,
        allowed_hosts=allowed_hosts(host, allowed_host),
        secure_cookies=secure_cookies,
    )


def _local_account(store: Any, name: str) -> None:
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.review.accounts import account, add_reviewer
    from rubric_engine.store.task_store import TaskStore

    with TaskStore(store) as opened:
        found = account(opened.backend, name)
        if found is None:
            add_reviewer(opened.backend, name, "admin")
            typer.echo(f"made account {name} (admin) in this store; `rubric-eval reviewers list`")
        elif not found.active:
            raise ConfigurationError(
                f"reviewer {name} was revoked at {found.revoked_at}; an admin restores it with "
                f"`rubric-eval reviewers add {name} --role {found.role}`"
            )


@app.command()
def serve(
    store: StoreOpt = DEFAULT_STORE,
    host: Annotated[
        str,
        typer.Option(help="Address to bind. The default is reachable from this machine only."),
    ] = LOOPBACK,
    port: Annotated[
        int, typer.Option(help="Port to listen on (0: any free port).", min=0, max=65535)
    ] = 8765,
    reviewer: Annotated[
        str | None,
        typer.Option(
            help="One person on this machine: sign this account in (made as admin if new). "
            "Loopback --host only."
        ),
    ] = None,
    auth: Annotated[
        str,
        typer.Option(
            help="token: accounts sign in with a one-time link or their password; proxy: a "
            "trusted proxy names the user in --user-header."
        ),
    ] = "token",
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(help="Address or network of the proxy (--auth proxy). Repeatable."),
    ] = None,
    user_header: Annotated[
        str, typer.Option(help="Header the proxy names the signed-in user in.")
    ] = "X-Forwarded-User",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(help="A host name the team reaches the app under (Host header). Repeatable."),
    ] = None,
    secure_cookies: Annotated[
        bool, typer.Option(help="Send the session cookie over HTTPS only (behind TLS).")
    ] = False,
    blind: Annotated[bool | None, typer.Option(hidden=True)] = None,
    reviewers_per_row: Annotated[int | None, typer.Option(hidden=True)] = None,
    second_review: Annotated[float | None, typer.Option(hidden=True)] = None,
    claim_ttl: Annotated[int | None, typer.Option(hidden=True)] = None,
    seed: Annotated[int | None, typer.Option(hidden=True)] = None,
) -> None:
    """Browse tasks, compare runs and review judge verdicts in the browser (labels are stored).

    Needs the `serve` extra: pip install 'rubric-engine[serve]'.
    """

    def run() -> None:
        from rubric_engine.errors import ConfigurationError

        moved = [
            flag
            for flag, given in zip(
                _MOVED, (blind, reviewers_per_row, second_review, claim_ttl, seed), strict=True
            )
            if given is not None
        ]
        if moved:
            raise ConfigurationError(
                f"{', '.join(moved)}: queue settings live with the task now, read by every "
                "server: `rubric-eval queue create TASK "
                + " ".join(_MOVED[f] for f in moved)
                + "` (or the task's queues page)"
            )
        try:
            import uvicorn
        except ImportError as exc:
            raise ConfigurationError(
                "serve needs the optional web packages: pip install 'rubric-engine[serve]'"
            ) from exc
        from rubric_engine.serve.app import create_app

        _require_store(store)
        config = _config(
            store,
            host,
            auth,
            reviewer,
            trusted_proxy or [],
            user_header,
            allowed_host or [],
            secure_cookies,
        )
        sock = listening_socket(host, port)
        notice, warning = bind_notice(host, sock.getsockname()[1], store, config.auth)
        typer.echo(notice, err=warning)
        server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning"))
        server.run(sockets=[sock])

    _guard(run)
