"""``rubric-eval store migrate``: copy a whole store into another (SQLite → PostgreSQL;
docs/stores.md).

Everything a report is rebuilt from is copied as stored — tasks, rows (with raw judge replies),
rubric versions, work items, and any other table both stores know (e.g. review ``labels``) —
column by column, JSON text unchanged, so every report rebuilds byte for byte from either
store. The target is written in one transaction: a failure leaves it as it was.

A SQLite target builds a table's secondary indexes after the table's rows are in (docs/scale.md):
rows come in primary-key order, so an index sorted otherwise (``rows_by_seq``) would take each
row on a random page through SQLite's small page cache; building it at the end sorts once.

Conflicts are refused, never overwritten: a task id or a rubric version already in the target
(a rubric version with the same content hash is the same publication and is skipped). Labels and
review events, numbered in the order they were stored, are numbered after the target's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.errors import StoreError
from rubric_engine.store.backend import Backend
from rubric_engine.store.location import StoreLocation
from rubric_engine.store.task_store import TaskStore

#: tables copied first, in this order (rows and work items reference tasks); others follow
_ORDER = ("rubric_versions", "tasks", "rows", "work_items")
#: the store's own bookkeeping: each store keeps its own
_NOT_COPIED = frozenset({"meta", "migrations"})
_BATCH = 500
#: tables copied in the order their rows were stored rather than by primary key: a label that
#: supersedes another names it (a foreign key), so the older one must be there first
_STORED_ORDER = {"labels": ["seq"]}
#: a column that only numbers a table's rows in the order they were stored (each store counts
#: from 1): the copies are numbered after the target's own, in their order, so a store that
#: already holds labels or review events of its own takes another store's
_RENUMBERED = {"labels": "seq", "review_events": "seq"}


@dataclass
class CopySummary:
    """Rows copied per table (``copied``) and rubric versions already there (``skipped``)."""

    copied: dict[str, int] = field(default_factory=dict)
    skipped_versions: list[str] = field(default_factory=list)


def _columns(db: Backend, table: str) -> list[str]:
    cursor = db.execute(f"SELECT * FROM {table} WHERE 1=0")
    names = [d[0] for d in cursor.description]
    cursor.fetchall()
    return names


def _select(db: Backend, table: str, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table``, :data:`_BATCH` at a time in primary-key order (or the order of
    :data:`_STORED_ORDER`), each query keyed
    on the last row read: memory holds one batch whatever the table's size (a PostgreSQL
    cursor keeps its whole result client-side; docs/scale.md). A table without a primary key
    is read with one query."""
    key = _STORED_ORDER.get(table) or _primary_key(db, table)
    listed = ", ".join(columns)
    if not key:
        cursor = db.execute(f"SELECT {listed} FROM {table}")
        while batch := cursor.fetchmany(_BATCH):
            yield from (tuple(r) for r in batch)
        return
    at = [columns.index(k) for k in key]  # every column is copied: the key's are among them
    names = ", ".join(key)
    after: tuple[Any, ...] | None = None
    while True:
        where = f" WHERE ({names}) > ({', '.join('?' * len(key))})" if after else ""
        found = db.execute(
            f"SELECT {listed} FROM {table}{where} ORDER BY {names} LIMIT ?",
            (*(after or ()), _BATCH),
        ).fetchall()
        yield from (tuple(r) for r in found)
        if len(found) < _BATCH:
            return
        after = tuple(found[-1][i] for i in at)


def _primary_key(db: Backend, table: str) -> list[str]:
    """The primary key's columns of ``table``, in key order (empty: none)."""
    if db.dialect == "sqlite":
        info = db.execute(f"PRAGMA table_info({table})").fetchall()
        return [name for _, name, *_, pk in sorted(info, key=lambda c: c[5]) if pk]
    found = db.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = ?::regclass AND i.indisprimary "
        "ORDER BY array_position(i.indkey::int2[], a.attnum)",
        (table,),
    ).fetchall()
    return [name for (name,) in found]


def _secondary_indexes(db: Backend, table: str) -> list[tuple[str, str]]:
    """The indexes of ``table`` that no key constraint made, as (name, CREATE statement), on a
    SQLite store; none on PostgreSQL, where dropping an index would hold every reader of the
    table until the copy commits."""
    if db.dialect != "sqlite":
        return []
    query = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
    query += "AND sql IS NOT NULL ORDER BY name"  # a key's own index has no statement
    return [(name, sql) for name, sql in db.execute(query, (table,)).fetchall()]


def _conflicts(source: Backend, target: Backend) -> tuple[list[str], set[tuple[str, int]]]:
    theirs = {task_id for (task_id,) in target.execute("SELECT id FROM tasks")}
    clash = sorted(t for (t,) in source.execute("SELECT id FROM tasks") if t in theirs)
    more = f", … ({len(clash)} in all)" if len(clash) > 10 else ""
    problems = [f"task(s) already in the target: {', '.join(clash[:10])}{more}"] if clash else []
    accounts = {name for (name,) in target.execute("SELECT name FROM reviewers")}
    taken = sorted(n for (n,) in source.execute("SELECT name FROM reviewers") if n in accounts)
    if taken:  # an account is a person's sign-in: two stores' accounts are not merged
        problems.append(f"reviewer account(s) already in the target: {', '.join(taken)}")
    query = "SELECT rubric_key, version, content_hash FROM rubric_versions"
    there = {(k, int(v)): h for k, v, h in target.execute(query)}
    same: set[tuple[str, int]] = set()
    for key, version, content_hash in source.execute(query):
        found = there.get((key, int(version)))
        if found == content_hash:
            same.add((key, int(version)))
        elif found is not None:
            problems.append(f"{key}@{version} is in the target with other content ({found[:19]}…)")
    return problems, same


def copy_store(source: StoreLocation, target: StoreLocation) -> CopySummary:
    """Copy every task, row, rubric version and shared table from ``source`` into ``target``.

    Both stores are opened (and migrated to this engine's schema) first.

    Raises:
        StoreError: either store cannot be opened; source and target are the same; a task id or
            rubric version conflicts (all listed; nothing copied); the source has a table with
            rows that the target does not know (upgrade the engine that opens the target).
    """
    if str(source) == str(target):
        raise StoreError(f"--from and --to are the same store ({source}); nothing to copy")
    summary = CopySummary()
    with TaskStore(source) as src, TaskStore(target) as dst:
        a, b = src.backend, dst.backend
        problems, same = _conflicts(a, b)
        theirs = b.tables()
        extra = sorted(a.tables() - set(_ORDER) - _NOT_COPIED)
        for table in extra:
            if table not in theirs and a.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]:
                problems.append(f"table {table!r} has rows but the target has no such table")
        if problems:
            raise StoreError(
                f"cannot copy {source} into {target}; nothing was copied:\n  - "
                + "\n  - ".join(problems)
                + "\nCopy into an empty store: a new SQLite file, or a new PostgreSQL database "
                "(`createdb NAME`); rubric-eval deletes nothing from a store"
            )
        summary.skipped_versions = sorted(f"{k}@{v}" for k, v in same)
        with b.exclusive("rubric-eval store migrate"):
            for table in (*_ORDER, *(t for t in extra if t in theirs)):
                summary.copied[table] = _copy_table(a, b, table, same)
    return summary


def _copy_table(a: Backend, b: Backend, table: str, same: set[tuple[str, int]]) -> int:
    columns = _columns(a, table)
    wanted = set(_columns(b, table))
    missing = [c for c in columns if c not in wanted]
    if missing:
        raise StoreError(f"table {table}: the target has no column(s) {', '.join(missing)}")
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    indexes = _secondary_indexes(b, table)
    for name, _ in indexes:  # rebuilt below, in the same transaction
        b.execute(f"DROP INDEX {name}")
    count, batch = 0, []
    versioned = table == "rubric_versions"
    key, version = (columns.index("rubric_key"), columns.index("version")) if versioned else (0, 0)
    numbered, at, shift = _RENUMBERED.get(table), 0, 0
    if numbered:  # numbered after the rows the target holds already
        at = columns.index(numbered)
        found = b.execute(f"SELECT COALESCE(MAX({numbered}), 0) FROM {table}").fetchone()
        shift = int(found[0])
    for row in _select(a, table, columns):
        if versioned and (row[key], int(row[version])) in same:
            continue
        if shift:
            row = (*row[:at], int(row[at]) + shift, *row[at + 1 :])
        batch.append(row)
        if len(batch) >= _BATCH:
            count, batch = count + _insert(b, table, sql, columns, batch), []
    if batch:
        count += _insert(b, table, sql, columns, batch)
    for _, create in indexes:
        b.execute(create)
    return count


def _integrity_errors(db: Backend) -> tuple[type[Exception], ...]:
    """What ``db``'s driver raises for a row its constraints refuse (a key already there)."""
    if db.dialect == "postgres":
        import psycopg

        return (psycopg.IntegrityError,)
    import sqlite3

    return (sqlite3.IntegrityError,)


def _insert(b: Backend, table: str, sql: str, columns: list[str], batch: list[Any]) -> int:
    """Insert ``batch`` into ``table`` of the target; the number inserted.

    A label whose id the target holds is left out: its id is the hash of its content, so it
    is the same label (as a rubric version with the same content hash is the same publication).

    Raises:
        StoreError: the target's constraints refuse a row (the transaction is rolled back).
    """
    if table == "labels":
        at = columns.index("label_id")
        marks = ", ".join("?" * len(batch))
        query = f"SELECT label_id FROM labels WHERE label_id IN ({marks})"
        there = {found for (found,) in b.execute(query, [row[at] for row in batch])}
        batch = [row for row in batch if row[at] not in there]
    if not batch:
        return 0
    try:
        b.executemany(sql, batch)
    except _integrity_errors(b) as exc:
        raise StoreError(
            f"nothing was copied: table {table}: the target refuses a row ({exc}); "
            "copy into an empty store"
        ) from exc
    return len(batch)
