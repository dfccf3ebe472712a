"""Each refusal of `serve`'s web safety, proved (docs/review.md "Web safety"), on SQLite and
PostgreSQL: no session or a forged one, a missing or wrong CSRF token on every state-changing
route, a foreign Origin, a foreign Host — each 403 with nothing stored; framing forbidden;
sign-in links that work once; revocation that ends sessions at once; a proxy's header believed
from the trusted address only; one local account on loopback."""

from __future__ import annotations

import base64
import json
from itertools import count
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
from itsdangerous import TimestampSigner
from starlette.routing import Route
from starlette.testclient import TestClient

from rubric_engine.labels.store import read_labels
from rubric_engine.review.accounts import issue_token, revoke, session_secret
from rubric_engine.serve.app import SESSION_COOKIE, ServeConfig, create_app
from rubric_engine.store.task_store import TaskStore
from tests.serve_helpers import (
    BASE,
    Person,
    answer_form,
    clone_store,
    csrf_of,
    demo_store,
    make_queue,
    red_line_row,
)

_dbs = count(1)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A demo store with a queue on the airline task, once per backend (module)."""
    folder = tmp_path_factory.mktemp(f"security-{request.param}")
    if request.param == "sqlite":
        where = str(folder / "store.sqlite")
    else:
        where = request.getfixturevalue("pg_cluster").create_database(f"security_{next(_dbs)}")
    ids = demo_store(where, folder)
    make_queue(where, ids["airline"])
    with TaskStore(where) as opened:
        opened.backend.execute(
            "INSERT INTO meta (name, value) VALUES ('test_airline', ?)", (ids["airline"],)
        )
        opened.backend.commit()
    return where


def airline(store: str) -> str:
    with TaskStore(store) as opened:
        return str(
            opened.backend.execute("SELECT value FROM meta WHERE name='test_airline'").fetchone()[0]
        )


def label_count(store: str) -> int:
    with TaskStore(store) as opened:
        return len(read_labels(opened.backend, include_superseded=True))


def test_no_session_or_a_forged_one_is_refused(store: str) -> None:
    app = create_app(ServeConfig(store))
    task = airline(store)
    anonymous = TestClient(app, base_url=BASE)
    for url in ("/", f"/tasks/{task}/queues/main", f"/tasks/{task}/report", "/compare"):
        refused = anonymous.get(url)
        assert refused.status_code == 403 and 'id="token-form"' in refused.text, url
    # a session naming alice, signed with another secret, is no session
    payload = base64.b64encode(json.dumps({"who": "alice", "epoch": 0}).encode())
    forged = TimestampSigner("not the store's secret").sign(payload).decode()
    intruder = TestClient(app, base_url=BASE, cookies={SESSION_COOKIE: forged})
    assert intruder.get("/").status_code == 403
    # the right secret but a made-up account: refused too
    with TaskStore(store) as opened:
        secret = session_secret(opened.backend)
    ghost = base64.b64encode(json.dumps({"who": "mallory", "epoch": 0}).encode())
    cookie = TimestampSigner(secret).sign(ghost).decode()
    assert (
        TestClient(app, base_url=BASE, cookies={SESSION_COOKIE: cookie}).get("/").status_code == 403
    )
    before = label_count(store)
    result, rubric, _ = red_line_row(store, task)
    posted = anonymous.post(
        f"/tasks/{task}/review/{result.row_id}", data=answer_form(result, rubric)
    )
    assert posted.status_code == 403 and label_count(store) == before


def _post_routes(app: Any) -> list[str]:
    return sorted(
        {r.path for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())}
    )


def test_every_state_changing_route_wants_this_sessions_csrf_token(store: str) -> None:
    app = create_app(ServeConfig(store))
    task = airline(store)
    result, rubric, _ = red_line_row(store, task)
    dana = Person(app, store, "dana")  # an admin: every route is hers to call
    fill = {"task": task, "row_id": result.row_id, "queue": "main"}
    routes = _post_routes(app)
    assert len(routes) >= 11  # signin, signout, account, team, queues, settings, review, …
    before = label_count(store)
    form = {**answer_form(result, rubric), "name": "eve", "action": "add", "reason": "x"}
    for path in routes:
        url = path.replace("{row_id:path}", "{row_id}").format(**fill)
        for token in (None, "wrong", csrf_of(Person(app, store, "alice").get("/").text)):
            data = dict(form) if token is None else {**form, "csrf": token}
            refused = dana.client.post(url, data=data)
            assert refused.status_code == 403, (url, token, refused.status_code)
            assert "security token" in refused.text
    assert label_count(store) == before
    with TaskStore(store) as opened:
        assert opened.backend.execute("SELECT 1 FROM reviewers WHERE name='eve'").fetchone() is None
    # the same form with the session's own token goes through
    assert (
        dana.post(f"/tasks/{task}/review/{result.row_id}", answer_form(result, rubric)).status_code
        == 200
    )


def test_a_foreign_origin_and_a_foreign_host_are_refused(store: str) -> None:
    app = create_app(ServeConfig(store))
    task = airline(store)
    result, rubric, _ = red_line_row(store, task)
    alice = Person(app, store, "alice")
    url = f"/tasks/{task}/review/{result.row_id}"
    before = label_count(store)
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999"):
        refused = alice.post(url, answer_form(result, rubric), headers={"Origin": origin})
        assert refused.status_code == 403 and "own pages only" in refused.text
    referred = alice.post(
        url, answer_form(result, rubric), headers={"Referer": "http://evil.example/x"}
    )
    assert referred.status_code == 403 and label_count(store) == before
    # DNS rebinding: the app's port reached under another name
    for host in ("evil.example", "evil.example:8765", "192.168.1.5:8765"):
        page = alice.client.get("/", headers={"Host": host})
        assert page.status_code == 403 and "--allowed-host" in page.text
    team = TestClient(
        create_app(ServeConfig(store, allowed_hosts=("127.0.0.1", "review.example.org"))),
        base_url="http://review.example.org",
    )
    assert team.get("/signin").status_code == 200
    same = alice.post(url, answer_form(result, rubric), headers={"Origin": BASE})
    assert same.status_code == 200 and label_count(store) > before


def test_pages_cannot_be_framed_or_sniffed(store: str) -> None:
    page = TestClient(create_app(ServeConfig(store)), base_url=BASE).get("/signin")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    cookie = page.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie


def test_an_error_page_does_not_show_where_the_store_is(store: str) -> None:
    """A task that is not there answers 404 saying so, without the store's path or URL, which
    is the server's business and not every signed-in reviewer's."""
    alice = Person(create_app(ServeConfig(store)), store, "alice")
    for url in ("/tasks/nosuch/report", f"/compare?baseline=nosuch&current={airline(store)}"):
        page = alice.get(url)
        assert page.status_code == 404 and "nosuch&#39; not found in the store" in page.text
        assert store not in page.text and str(ServeConfig(store).store) not in page.text


def test_a_sign_in_link_works_once_and_revoking_ends_every_session(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cluster = request.getfixturevalue("pg_cluster") if store.startswith("postgresql") else None
    mine = clone_store(store, tmp_path, cluster, f"security_clone_{next(_dbs)}")
    app = create_app(ServeConfig(mine))
    with TaskStore(mine) as opened:
        token = issue_token(opened.backend, "bob")
    first = TestClient(app, base_url=BASE)
    csrf = csrf_of(first.get(f"/signin?token={token}").text)
    assert first.post("/signin", data={"csrf": csrf, "token": token}).status_code == 200
    second = TestClient(app, base_url=BASE)
    csrf = csrf_of(second.get(f"/signin?token={token}").text)
    used = second.post("/signin", data={"csrf": csrf, "token": token})
    assert used.status_code == 403 and "used already" in used.text
    # bob sets a password, signs in with it elsewhere; then an admin revokes him
    csrf = csrf_of(first.get("/account").text)
    weak = first.post("/account", data={"csrf": csrf, "password": "short", "again": "short"})
    assert weak.status_code == 400
    good = "correct horse battery"
    assert (
        first.post("/account", data={"csrf": csrf, "password": good, "again": good}).status_code
        == 200
    )
    third = TestClient(app, base_url=BASE)
    csrf = csrf_of(third.get("/signin").text)
    wrong = third.post("/signin", data={"csrf": csrf, "name": "bob", "password": "nope nope nope"})
    assert wrong.status_code == 403
    assert (
        third.post("/signin", data={"csrf": csrf, "name": "bob", "password": good}).status_code
        == 200
    )
    assert first.get("/").status_code == third.get("/").status_code == 200
    with TaskStore(mine) as opened:
        revoke(opened.backend, "bob")
    assert first.get("/").status_code == third.get("/").status_code == 403
    csrf = csrf_of(third.get("/signin").text)
    assert (
        third.post("/signin", data={"csrf": csrf, "name": "bob", "password": good}).status_code
        == 403
    )


def test_a_proxys_user_header_counts_from_the_trusted_address_only(store: str) -> None:
    config = ServeConfig(store, auth="proxy", trusted_proxies=("10.0.0.5",), user_header="X-User")
    app = create_app(config)
    proxied = TestClient(
        app, base_url=BASE, client=("10.0.0.5", 40000), headers={"X-User": "alice"}
    )
    page = proxied.get("/")
    assert page.status_code == 200 and 'id="reviewer-name">alice<' in page.text
    direct = TestClient(app, base_url=BASE, client=("10.0.0.9", 40000), headers={"X-User": "alice"})
    assert direct.get("/").status_code == 403
    stranger = TestClient(
        app, base_url=BASE, client=("10.0.0.5", 40000), headers={"X-User": "mallory"}
    )
    assert stranger.get("/").status_code == 403  # no such account
    # the proxy signs people in, and still every form carries the session's token
    task = airline(store)
    result, rubric, _ = red_line_row(store, task)
    assert (
        proxied.post(
            f"/tasks/{task}/review/{result.row_id}", data=answer_form(result, rubric)
        ).status_code
        == 403
    )


def test_one_local_account_on_loopback(store: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app as cli
    from rubric_engine.cli.serve_cmd import _config

    local = TestClient(
        create_app(_config(store, "127.0.0.1", "token", "carol", [], "X", [], False)), base_url=BASE
    )
    page = local.get("/")
    assert page.status_code == 200 and 'id="reviewer-name">carol<' in page.text
    for args, message in (
        (["--reviewer", "carol", "--host", "0.0.0.0"], "loopback --host only"),
        (["--auth", "proxy"], "--trusted-proxy"),
        (["--auth", "proxy", "--trusted-proxy", "not-an-address"], "address or a network"),
        (["--blind", "--second-review", "0.3"], "queue create TASK --blind --second-review"),
    ):
        done = CliRunner().invoke(cli, ["serve", "--store", store, *args])
        assert done.exit_code == 2 and message in done.output, (args, done.output)
