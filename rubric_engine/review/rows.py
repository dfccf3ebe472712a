"""One row under review, read and written by key (docs/review.md). An edge: it reads the clock
and the store.

A page reads only the row it shows: its stored result and dialogue, its current labels and
its events. An answer is written in one transaction with everything it changes — the labels,
the row's draft and claim, the row's state in every queue — so a crash leaves either all of
it or none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rubric_engine.errors import InputError, StoreError
from rubric_engine.labels.model import Label, LabelSource
from rubric_engine.labels.store import AppendOutcome, read_row_labels, store_labels
from rubric_engine.results.model import RowResult
from rubric_engine.review.answers import Answer, answers_of_labels
from rubric_engine.review.queue_store import refresh_rows
from rubric_engine.store.backend import driver_errors
from rubric_engine.store.task_store import TaskRecord, TaskStore, decode_column, parse_result

__all__ = [
    "RowData",
    "events",
    "load_draft",
    "read_row",
    "record_event",
    "save_draft",
    "write_labels",
]

EventKind = str  # "settle" | "reopen" | "skip"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RowData:
    """A stored row with its current labels, split into reviews and adjudications."""

    result: RowResult
    dialogue: dict[str, Any]
    labels: list[Label]

    @property
    def reviews(self) -> dict[str, Answer]:
        """Reviewer → their current answer (adjudications left out), in first-seen order."""
        picked = [lab for lab in self.labels if lab.source is not LabelSource.ADJUDICATION]
        return {who: a for (_, who), a in answers_of_labels(picked).items()}

    @property
    def adjudications(self) -> dict[str, Answer]:
        picked = [lab for lab in self.labels if lab.source is LabelSource.ADJUDICATION]
        return {who: a for (_, who), a in answers_of_labels(picked).items()}


def read_row(store: TaskStore, record: TaskRecord, row_id: str) -> RowData:
    """The row with its labels, its digest checked (docs/verify.md): a reviewer is never shown
    a verdict edited in the store.

    Raises:
        InputError: the task has no such row.
        StoreError: the row does not match its digest (or its task cannot be read: signed
            with a key the server does not hold).
    """
    found = store.rows_of(record.id, [row_id]).get(row_id)
    if found is None:
        raise InputError(
            f"row {row_id!r} is not in task {record.id}; open rows from the task's queue"
        )
    columns, why = found
    if why is not None:
        raise StoreError(f"{why}. Its verdict is not shown: it may not be the judge's")
    labels = read_row_labels(store.backend, record.rubric_key, [row_id], task_id=record.id)
    return RowData(
        parse_result(columns[5], record.id, row_id),
        decode_column(columns[6], f"task {record.id} row {row_id!r} dialogue"),
        labels,
    )


def _insert_event(
    store: TaskStore, task_id: str, row_id: str, kind: EventKind, reviewer: str, note: str | None
) -> None:
    db = store.backend
    seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM review_events").fetchone()[0]
    db.execute(
        "INSERT INTO review_events (seq, task_id, row_id, kind, reviewer, at, note) "
        "VALUES (?,?,?,?,?,?,?)",
        (int(seq) + 1, task_id, row_id, kind, reviewer, _now(), note),
    )


def write_labels(
    store: TaskStore,
    task_id: str,
    row_id: str,
    reviewer: str,
    labels: Sequence[Label],
    event: tuple[EventKind, str | None] | None = None,
) -> AppendOutcome:
    """Store an answer's labels and what follows from them in one transaction: an event
    (``settle`` after an adjudication), the reviewer's draft and claim on the row dropped, the
    row's state refreshed in every queue.

    Raises:
        StoreError: the database refused the write (nothing is stored).
    """
    db = store.backend
    try:
        with db.exclusive("labels"):
            outcome = store_labels(db, labels)
            if event is not None:
                _insert_event(store, task_id, row_id, event[0], reviewer, event[1])
            _drop(store, task_id, row_id, reviewer)
            refresh_rows(store, task_id, [row_id])
    except driver_errors(db) as exc:
        raise StoreError(f"the answer was not stored ({exc}); nothing of it was kept") from exc
    return outcome


def record_event(
    store: TaskStore, task_id: str, row_id: str, kind: EventKind, reviewer: str, note: str | None
) -> None:
    """Append a ``reopen`` or ``skip`` event and refresh the row's state in its queues; a skip
    releases the reviewer's claim (their draft stays for when they come back)."""
    with store.backend.exclusive("labels"):
        _insert_event(store, task_id, row_id, kind, reviewer, note)
        if kind == "skip":
            store.backend.execute(
                "DELETE FROM review_claims WHERE task_id=? AND row_id=? AND reviewer=?",
                (task_id, row_id, reviewer),
            )
        refresh_rows(store, task_id, [row_id])


def events(store: TaskStore, task_id: str, row_id: str) -> list[dict[str, Any]]:
    """The row's events, oldest first."""
    found = store.backend.execute(
        "SELECT kind, reviewer, at, note FROM review_events WHERE task_id=? AND row_id=? "
        "ORDER BY seq",
        (task_id, row_id),
    ).fetchall()
    return [{"kind": k, "reviewer": r, "at": a, "note": n} for k, r, a, n in found]


def _drop(store: TaskStore, task_id: str, row_id: str, reviewer: str) -> None:
    """The reviewer's draft and claim on the row go (answered or skipped)."""
    for table in ("review_drafts", "review_claims"):
        store.backend.execute(
            f"DELETE FROM {table} WHERE task_id=? AND row_id=? AND reviewer=?",
            (task_id, row_id, reviewer),
        )


def save_draft(
    store: TaskStore, task_id: str, row_id: str, reviewer: str, form: dict[str, Any]
) -> None:
    """Keep the reviewer's unfinished form for the row (one draft per reviewer and row)."""
    db = store.backend
    db.execute(
        "INSERT INTO review_drafts (task_id, row_id, reviewer, form, saved_at) "
        "VALUES (?,?,?,?,?) ON CONFLICT (task_id, row_id, reviewer) DO UPDATE SET "
        "form=excluded.form, saved_at=excluded.saved_at",
        (task_id, row_id, reviewer, json.dumps(form, ensure_ascii=False), _now()),
    )
    db.commit()


def load_draft(store: TaskStore, task_id: str, row_id: str, reviewer: str) -> dict[str, Any]:
    """The reviewer's draft of the row (``{}`` when none)."""
    found = store.backend.execute(
        "SELECT form FROM review_drafts WHERE task_id=? AND row_id=? AND reviewer=?",
        (task_id, row_id, reviewer),
    ).fetchone()
    return {} if found is None else dict(json.loads(found[0]))
