"""The small interface both store backends give :class:`~rubric_engine.store.task_store.TaskStore`.

SQL is written once with ``?`` placeholders and standard types; a backend translates what its
database spells differently (placeholders, ``REAL`` precision, upserts). Transactions: a
statement opens one implicitly; :meth:`Backend.commit` ends it; :meth:`Backend.exclusive`
runs a block as one serialized write (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a transaction
holding an advisory lock named after the block), which is what makes publishing race-free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgres"]


class Cursor(Protocol):
    @property
    def description(self) -> Any: ...

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Backend(Protocol):
    """One open connection to a store database."""

    dialect: Dialect
    #: how messages name the store (a path, or a URL without its password)
    label: str

    @property
    def connection(self) -> Any:
        """The driver's connection (``sqlite3.Connection`` / ``psycopg.Connection``)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Run the block as one write transaction that no other ``exclusive(name)`` overlaps;
        committed at the end, rolled back on an exception.

        Raises:
            StoreError: the lock could not be had (SQLite: busy past its timeout).
        """

    def tables(self) -> set[str]: ...

    def task_lock(self, task_id: str) -> AbstractContextManager[None]:
        """Held while one process runs a task (``score``/``--resume``), so it never runs twice.

        Raises:
            StoreError: another process holds it.
        """

    def task_held(self, task_id: str) -> bool:
        """Whether a process holds :meth:`task_lock` for ``task_id`` now, found without
        keeping the lock or changing the store: a RUNNING task nobody holds was killed (its
        state could not be set) and ``score --resume`` finishes it."""

    def close(self) -> None: ...


def task_busy_message(task_id: str) -> str:
    return (
        f"task {task_id} is being run by another rubric-eval process right now; let it "
        "finish (or stop it) before resuming"
    )


def driver_errors(db: Backend) -> tuple[type[Exception], ...]:
    """The exceptions ``db``'s driver raises for a refused statement (to catch narrowly)."""
    if db.dialect == "postgres":
        import psycopg

        return (psycopg.Error,)
    import sqlite3

    return (sqlite3.DatabaseError,)
