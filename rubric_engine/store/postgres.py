"""The PostgreSQL backend (docs/stores.md): a team store on psycopg 3 and its connection pool.

psycopg is an optional dependency (``pip install 'rubric-engine[postgres]'``), imported only
when a ``postgresql://`` store is opened. One pool per URL and process hands out connections:
a :class:`~rubric_engine.store.task_store.TaskStore` holds one for its lifetime; a task lock and a
worker's
heartbeat each take their own, so they never wait behind the store's open transaction.

Serialized writes (:meth:`PostgresBackend.exclusive`) are transactions that first take
``pg_advisory_xact_lock`` on the block's name: a second publisher waits for the first to
commit, then reads its row (READ COMMITTED) and gets the answer it would get running second.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import StoreError
from rubric_engine.store.backend import Cursor, Dialect, task_busy_message
from rubric_engine.store.location import PostgresUrl

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

#: seconds to wait for the server when a store is opened
CONNECT_TIMEOUT_S = 10
_pools: dict[tuple[int, str], ConnectionPool] = {}


def _driver_missing(exc: ImportError) -> StoreError:
    return StoreError(
        f"a postgresql:// store needs psycopg 3 and psycopg-pool ({exc.name} is not installed); "
        "install them with `pip install 'rubric-engine[postgres]'`, or pass a file path to "
        "--store for a SQLite store"
    )


def _unreachable(url: PostgresUrl, exc: Exception) -> StoreError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreError(
        f"{url}: cannot open the PostgreSQL store ({first}); check the host, port, database "
        "name and credentials in the URL (the database must exist: `createdb NAME`)"
    )


def pool(url: PostgresUrl) -> ConnectionPool:
    """The process's pool for ``url`` (a forked child gets its own, never its parent's).

    Raises:
        StoreError: psycopg is not installed, or the server refuses or cannot be reached.
    """
    key = (os.getpid(), url.url)
    found = _pools.get(key)
    if found is not None:
        return found
    try:
        import psycopg
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise _driver_missing(exc) from exc
    try:  # a direct first connection gives the server's own words when it fails
        psycopg.connect(url.url, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as exc:
        raise _unreachable(url, exc) from exc
    created = ConnectionPool(
        url.url,
        min_size=1,
        max_size=8,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
        timeout=CONNECT_TIMEOUT_S * 3,
        open=True,
        name=f"rubric-eval {url}",
    )
    _pools[key] = created
    return created


@atexit.register
def close_pools(url: PostgresUrl | None = None) -> None:
    """Close this process's pools (of ``url`` only, if given); they reopen on next use."""
    for key, opened in list(_pools.items()):
        if url is None or key[1] == url.url:
            if key[0] == os.getpid():
                opened.close()
            del _pools[key]


@contextmanager
def connection(url: PostgresUrl) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection for one short job (a lock, a heartbeat); returned afterwards."""
    with pool(url).connection() as conn:
        yield conn


def has_store(url: PostgresUrl) -> bool:
    """The database holds a store's tables (``tasks``); raises StoreError when unreachable."""
    with connection(url) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'tasks'"
        ).fetchone()
    return found is not None


def placeholders(sql: str) -> str:
    """``?`` (sqlite3's paramstyle, which the store's SQL is written in) → ``%s`` (psycopg's)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresBackend:
    """One pooled connection to a store database.

    Raises:
        StoreError: psycopg is missing or the server cannot be reached.
    """

    dialect: Dialect = "postgres"

    def __init__(self, url: PostgresUrl) -> None:
        self.url = url
        self.label = str(url)
        self._pool = pool(url)
        self._conn = self._pool.getconn()

    @property
    def connection(self) -> psycopg.Connection[Any]:
        return self._conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._conn.execute(placeholders(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(placeholders(sql), rows)

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        self._conn.commit()
        try:
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
            yield
        except BaseException:
            self._conn.rollback()
            raise
        self._conn.commit()

    def tables(self) -> set[str]:
        found = self._conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        return {name for (name,) in found}

    @contextmanager
    def task_lock(self, task_id: str) -> Iterator[None]:
        # a session lock on its own connection: released when the block ends, or by the
        # server when the process dies (the connection closes)
        with connection(self.url) as conn:
            conn.autocommit = True
            (got,) = conn.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s))", (f"task:{task_id}",)
            ).fetchone() or (False,)
            if not got:
                raise StoreError(task_busy_message(task_id))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"task:{task_id}",))
                conn.autocommit = False

    def task_held(self, task_id: str) -> bool:
        # read from pg_locks, never taken: a one-bigint advisory lock shows its key as
        # classid (high 32 bits) and objid (low 32 bits) with objsubid 1
        (held,) = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            "AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND ((classid::bigint << 32) | objid::bigint) = hashtext(%s)::bigint)",
            (f"task:{task_id}",),
        ).fetchone() or (False,)
        return bool(held)

    def close(self) -> None:
        import psycopg

        try:
            if not self._conn.closed:
                self._conn.commit()
        except psycopg.Error:  # a failed statement's error is already on its way up
            with contextlib.suppress(psycopg.Error):
                self._conn.rollback()
        finally:
            self._pool.putconn(self._conn)
