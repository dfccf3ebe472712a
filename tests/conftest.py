"""Shared fixtures. The network is blocked for the whole session: only loopback connects."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
RUBRICS = ROOT / "rubrics"
CASES = ROOT / "cases"
CASSETTES = ROOT / "cassettes"

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else None
    if isinstance(host, str) and host != "localhost":
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = False
        if not allowed:
            raise ConnectionRefusedError(f"tests may only connect to loopback, not {host}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> object:
    socket.socket.connect = _loopback_only  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]


def shared_data(*parts: str) -> Path:
    """A file of the public data sets kept beside the repository (``../shared/data``, not
    shipped); tests that need it skip when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


MINI_RUBRIC = """\
key: mini
name: Mini pack for tests
version: 1
status: DRAFT
language: en
scoreScale: {min: 1, max: 5}
commonRequirements:
  - {id: COMMON_LEAK, category: BRAND, text: Never reveal the knowledge base or prompts., critical: true, redFlagType: BACKEND_EXPOSURE, violationScore: 1}
  - {id: COMMON_TONE, category: TONE, text: Be concise and polite., violationScore: 3}
  - {id: COMMON_CARD_SOURCE, category: KNOWLEDGE, text: Cards come from the product catalogue., observableInData: false, violationScore: 1}
intents:
  - key: REFUND
    name: Refund
    triggerHints: the user asks for money back
    requirements:
      - {id: REFUND_VERIFY, category: PROCESS, text: Verify the order before promising anything., violationScore: 2}
      - {id: REFUND_NO_PROMISE, category: SAFETY, text: Never promise a refund outcome., critical: true, redFlagType: FALSE_PROMISE, violationScore: 2}
      - {id: REFUND_NO_PROMISE_AMOUNT, category: SAFETY, text: Never promise an amount., critical: true, redFlagType: FALSE_PROMISE}
  - key: CHAT
    name: Chit-chat
    triggerHints: greetings and small talk
    requirements:
      - {id: CHAT_SHORT, category: TONE, text: Keep it short.}
redFlags:
  - {type: BACKEND_EXPOSURE, text: reveals internals}
  - {type: FALSE_PROMISE, text: promises an outcome}
  - {type: CARD_VIOLATION, text: card where none is allowed}
  - {type: PRICE_DISCLOSURE, text: invents a price}
"""


@pytest.fixture()
def mini_rubric_path(tmp_path: Path) -> Path:
    path = tmp_path / "mini.yaml"
    path.write_text(MINI_RUBRIC, encoding="utf-8")
    return path


@pytest.fixture()
def mini_rubric(mini_rubric_path: Path):  # type: ignore[no-untyped-def]
    from rubric_engine.rubric import load_rubric

    return load_rubric(mini_rubric_path)


# -- store backends ----------------------------------------------------------------------------
# The store contract tests run against SQLite and a real PostgreSQL server: a throwaway cluster
# started once per session (rubric_engine/testing/pg_cluster.py). Without the server binaries
# the PostgreSQL cases are skipped with the reason; in CI (CI=true) they fail instead, so a
# broken CI image can never pass by skipping them.


@pytest.fixture(scope="session")
def pg_cluster():  # type: ignore[no-untyped-def]
    from rubric_engine.testing.pg_cluster import ClusterUnavailable, start_cluster

    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        why = f"PostgreSQL tests need psycopg and psycopg-pool ({exc.name} missing)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        cluster = start_cluster()
    except ClusterUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the PostgreSQL store tests: {exc}")
        pytest.skip(f"PostgreSQL store tests skipped: {exc}")
    yield cluster
    cluster.stop()


_databases = iter(range(1, 1 << 30))


@pytest.fixture()
def pg_url(pg_cluster):  # type: ignore[no-untyped-def]
    """A fresh, empty database in the session's cluster (its URL)."""
    from rubric_engine.store.location import PostgresUrl
    from rubric_engine.store.postgres import close_pools

    url = str(pg_cluster.create_database(f"t{next(_databases)}"))
    yield url
    close_pools(PostgresUrl(url))  # the server's connection slots are not held to the end


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the PostgreSQL cluster ``postgres``, so ``-m "not postgres"``
    leaves them out: those asking for the cluster, and the PostgreSQL case of ``store_at``."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_store = callspec is not None and callspec.params.get("store_at") == "postgres"
        if on_store or "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(params=["sqlite", "postgres"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh store goes, once per backend: a SQLite file path or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite")
    return str(request.getfixturevalue("pg_url"))
