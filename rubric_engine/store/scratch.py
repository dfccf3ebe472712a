"""A private temporary SQLite database: a set of keys too large to hold in a ``dict``.

A run's rowIds (:mod:`rubric_engine.dialogue.seen_ids`), a cassette's request keys
(:mod:`rubric_engine.judge.cassettes.index`) and a labels file's keys
(:mod:`rubric_engine.labels.file_keys`) grow with the input; kept here, memory stays at
SQLite's page cache whatever the input's size.
"""

from __future__ import annotations

import sqlite3


def scratch_database(schema: str) -> sqlite3.Connection:
    """A new private temporary database holding the tables of ``schema`` (SQL statements).

    ``""`` opens one on disk that SQLite deletes when it is closed; it has no journal and one
    transaction, never committed, so pages are written only when its cache spills.
    """
    db = sqlite3.connect("", isolation_level=None)
    db.execute("PRAGMA journal_mode = OFF")
    db.executescript(schema)
    db.execute("BEGIN")
    return db
