"""Append-only label storage in the task store (issue 12 item 1; SPEC §12, §13).

The ``labels`` table lives in the TaskStore's database and uses its connection; nothing here
changes :mod:`rubric_engine.store`. :data:`LABELS_DDL` is written in SQL that SQLite and
PostgreSQL both accept (TEXT/INTEGER/REAL columns, no AUTOINCREMENT, no ``INSERT OR``), so it
can become one named migration of the store's migration list as it stands.
:data:`LABELS_APPEND_ONLY_SQLITE` makes the database itself refuse ``UPDATE`` and ``DELETE``;
:data:`LABELS_APPEND_ONLY_POSTGRES` is the same guard in PostgreSQL's dialect (trigger syntax
differs between the two; it is not exercised by this module's tests).

An edit is a new label whose ``supersedes`` names the label it replaces; the *current* labels
are those no other label supersedes. Importing a label whose judgment equals the current one
for the same (rubric, row, requirement, reviewer) adds nothing, so re-importing a file is a
no-op.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rubric_engine.errors import StoreError
from rubric_engine.labels.model import Label

__all__ = [
    "LABELS_APPEND_ONLY_POSTGRES",
    "LABELS_APPEND_ONLY_SQLITE",
    "LABELS_DDL",
    "AppendOutcome",
    "append_labels",
    "ensure_labels_table",
    "read_labels",
]

#: The label table. ``seq`` is the insertion order (assigned as MAX+1 inside the write
#: transaction); ``label`` holds the full label as JSON, the other columns are for queries.
LABELS_DDL = """
CREATE TABLE IF NOT EXISTS labels (
    label_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    rubric_key TEXT,
    row_id TEXT NOT NULL,
    requirement_id TEXT,
    status TEXT,
    reviewer TEXT NOT NULL,
    source TEXT NOT NULL,
    labelled_at TEXT NOT NULL,
    stored_at TEXT NOT NULL,
    task_id TEXT,
    supersedes TEXT REFERENCES labels(label_id),
    label TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS labels_by_row ON labels (rubric_key, row_id);
CREATE INDEX IF NOT EXISTS labels_by_task ON labels (task_id);
"""

_REFUSAL = "labels are append-only: add a label that supersedes it instead"
#: SQLite triggers that refuse every UPDATE and DELETE on ``labels``.
LABELS_APPEND_ONLY_SQLITE = f"""
CREATE TRIGGER IF NOT EXISTS labels_no_update BEFORE UPDATE ON labels
BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END;
CREATE TRIGGER IF NOT EXISTS labels_no_delete BEFORE DELETE ON labels
BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END;
"""
#: The same guard for PostgreSQL (for the PostgreSQL store's migration; untested here).
LABELS_APPEND_ONLY_POSTGRES = f"""
CREATE OR REPLACE FUNCTION labels_append_only() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION '{_REFUSAL}'; END; $$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER labels_no_update BEFORE UPDATE OR DELETE ON labels
FOR EACH ROW EXECUTE FUNCTION labels_append_only();
"""


def ensure_labels_table(db: sqlite3.Connection) -> None:
    """Create the table and its append-only triggers if absent (idempotent)."""
    db.executescript(LABELS_DDL + LABELS_APPEND_ONLY_SQLITE)


@dataclass(frozen=True)
class AppendOutcome:
    """What :func:`append_labels` did: the labels stored (with ids and ``supersedes`` filled)
    and how many lines changed nothing."""

    added: tuple[Label, ...]
    unchanged: int


def _key(label: Label) -> tuple[str | None, str, str | None, str]:
    return (label.rubric_key, label.row_id, label.requirement_id, label.reviewer)


def _judgment(label: Label) -> tuple[object, ...]:
    flags = None if label.red_flag_types is None else tuple(sorted(set(label.red_flag_types)))
    return (label.status, label.intent_key, flags, label.score, label.reason)


def append_labels(db: sqlite3.Connection, labels: Sequence[Label]) -> AppendOutcome:
    """Store labels in one transaction: all of them or none.

    A label without ``time`` gets the current UTC time. A label whose (rubric, row, requirement,
    reviewer) already has a current label supersedes it (``supersedes`` is filled when the file
    did not say); one with the same judgment as the current one is skipped and counted.

    Raises:
        StoreError: the database refused the write (nothing is stored).
    """
    ensure_labels_table(db)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    added: list[Label] = []
    unchanged = 0
    db.commit()
    try:
        db.execute("BEGIN IMMEDIATE")
        current = {_key(c): c for c in _current(_all(db))}
        seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM labels").fetchone()[0]
        for raw in labels:
            label = raw if raw.time else raw.model_copy(update={"time": now})
            before = current.get(_key(label))
            if before is not None and _judgment(before) == _judgment(label):
                unchanged += 1
                continue
            if before is not None and label.supersedes is None:
                label = label.model_copy(update={"supersedes": before.label_id})
            label = label.with_id()
            seq += 1
            db.execute(
                "INSERT INTO labels (label_id, seq, rubric_key, row_id, requirement_id, status, "
                "reviewer, source, labelled_at, stored_at, task_id, supersedes, label) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    label.label_id,
                    seq,
                    label.rubric_key,
                    label.row_id,
                    label.requirement_id,
                    None if label.status is None else str(label.status),
                    label.reviewer,
                    str(label.source),
                    label.time,
                    now,
                    label.task_id,
                    label.supersedes,
                    json.dumps(label.to_json_dict(), ensure_ascii=False, sort_keys=True),
                ),
            )
            current[_key(label)] = label
            added.append(label)
        db.commit()
    except sqlite3.DatabaseError as exc:
        db.rollback()
        raise StoreError(
            f"labels were not stored ({exc}); nothing of this import was kept"
        ) from exc
    return AppendOutcome(tuple(added), unchanged)


def _all(db: sqlite3.Connection) -> list[Label]:
    rows = db.execute("SELECT label FROM labels ORDER BY seq").fetchall()
    out = []
    for (text,) in rows:
        try:
            out.append(Label.model_validate_json(text))
        except ValueError as exc:
            raise StoreError(
                f"a stored label is not a valid label ({exc}); the store was changed by hand. "
                "Restore it from a backup."
            ) from exc
    return out


def _current(labels: Iterable[Label]) -> list[Label]:
    every = list(labels)
    replaced = {lab.supersedes for lab in every if lab.supersedes}
    return [lab for lab in every if lab.label_id not in replaced]


def read_labels(
    db: sqlite3.Connection,
    *,
    rubric_key: str | None = None,
    task_id: str | None = None,
    reviewers: Sequence[str] = (),
    include_superseded: bool = False,
) -> list[Label]:
    """Labels in insertion order, current ones only unless ``include_superseded``.

    Args:
        rubric_key: only labels made under this rubric key.
        task_id: only labels imported against this task.
        reviewers: only these reviewers (all when empty).
    """
    ensure_labels_table(db)
    every = _all(db)
    picked = every if include_superseded else _current(every)
    return [
        lab
        for lab in picked
        if (rubric_key is None or lab.rubric_key == rubric_key)
        and (task_id is None or lab.task_id == task_id)
        and (not reviewers or lab.reviewer in reviewers)
    ]
