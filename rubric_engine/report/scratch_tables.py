"""A streaming report's per-row data (:mod:`rubric_engine.report.per_row`) in a private
temporary database (:func:`~rubric_engine.store.scratch.scratch_database`): memory holds
SQLite's page cache, whatever the number of rows. A report streamed from a store uses it
(:func:`rubric_engine.report.stored.stream_report`, a fresh run's report, ``verify``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from typing import Literal

from rubric_engine.report.per_row import NOT_LOW, Floats, Listed
from rubric_engine.store.scratch import scratch_database


class _Floats:
    def __init__(self, db: sqlite3.Connection, name: str) -> None:
        self._db, self._name, self._count = db, name, 0
        db.execute(f"CREATE TABLE {name} (seq INTEGER PRIMARY KEY, value REAL NOT NULL)")

    def __len__(self) -> int:
        return self._count

    def add(self, seq: int, value: float) -> None:
        self._db.execute(f"INSERT INTO {self._name} VALUES (?, ?)", (seq, value))
        self._count += 1

    def in_order(self) -> Iterator[float]:
        found = self._db.execute(f"SELECT value FROM {self._name} ORDER BY seq")
        return (value for (value,) in found)

    def at_rank(self, index: int) -> float:
        query = f"SELECT value FROM {self._name} ORDER BY value LIMIT 1 OFFSET ?"
        value: float = self._db.execute(query, (index,)).fetchone()[0]
        return value


class _Listed:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        db.execute(
            "CREATE TABLE listed (seq INTEGER PRIMARY KEY, row_id BLOB NOT NULL,"
            " grp INTEGER NOT NULL, flag_set INTEGER NOT NULL)"
        )

    def add(self, seq: int, row_id: str, group: int, flag_set: int) -> None:
        # a rowId's bytes as the input gave them (a JSON "\ud800" escape is kept, as
        # rubric_engine.dialogue.seen_ids keeps it)
        as_bytes = row_id.encode("utf-8", "surrogatepass")
        self._db.execute("INSERT INTO listed VALUES (?, ?, ?, ?)", (seq, as_bytes, group, flag_set))

    def read(
        self, column: Literal["group", "flag_set"], values: Collection[int]
    ) -> Iterator[tuple[str, int]]:
        name = "grp" if column == "group" else "flag_set"
        marks = ",".join("?" * len(values))
        for low in ("<>", "="):
            found = self._db.execute(
                f"SELECT row_id, flag_set FROM listed WHERE {name} IN ({marks}) "
                f"AND grp {low} {NOT_LOW} ORDER BY seq",
                tuple(values),
            )
            for row_id, flag_set in found:
                yield row_id.decode("utf-8", "surrogatepass"), flag_set


class ScratchTables:
    """:class:`~rubric_engine.report.per_row.Storage` in one temporary database, deleted
    when the last of the report's lists that read it is gone."""

    def __init__(self) -> None:
        self.db = scratch_database("")

    def floats(self, name: str) -> Floats:
        return _Floats(self.db, name)

    def listed(self) -> Listed:
        return _Listed(self.db)


__all__ = ["ScratchTables"]
