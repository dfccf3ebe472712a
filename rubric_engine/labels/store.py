"""Append-only label storage in the task store (docs/calibration.md, docs/stores.md).

The ``labels`` table is created by the store's migration ``m004_labels``
(:mod:`rubric_engine.store.migrations`), with triggers that make the database itself refuse
``UPDATE`` and ``DELETE`` on SQLite and PostgreSQL alike. These functions take the store's
:class:`~rubric_engine.store.backend.Backend` (``TaskStore.backend``), so they work on either.

An edit is a new label whose ``supersedes`` names the label it replaces; the *current* labels
are those no other label supersedes. Importing a label whose judgment equals the current one
for the same (rubric, row, requirement, reviewer) adds nothing, so re-importing a file is a
no-op.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rubric_engine.errors import StoreError
from rubric_engine.labels.model import Label
from rubric_engine.store.backend import Backend, driver_errors

__all__ = ["AppendOutcome", "append_labels", "read_labels"]


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


def append_labels(db: Backend, labels: Sequence[Label]) -> AppendOutcome:
    """Store labels in one transaction: all of them or none.

    A label without ``time`` gets the current UTC time. A label whose (rubric, row, requirement,
    reviewer) already has a current label supersedes it (``supersedes`` is filled when the file
    did not say); one with the same judgment as the current one is skipped and counted.

    Raises:
        StoreError: the database refused the write (nothing is stored).
    """
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        with db.exclusive("labels"):
            added, unchanged = _append(db, labels, now)
    except driver_errors(db) as exc:
        raise StoreError(
            f"labels were not stored ({exc}); nothing of this import was kept"
        ) from exc
    return AppendOutcome(tuple(added), unchanged)


def _append(db: Backend, labels: Sequence[Label], now: str) -> tuple[list[Label], int]:
    """The writes of :func:`append_labels`, inside its exclusive section."""
    added: list[Label] = []
    unchanged = 0
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
    return added, unchanged


def _all(db: Backend) -> list[Label]:
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
    db: Backend,
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
    every = _all(db)
    picked = every if include_superseded else _current(every)
    return [
        lab
        for lab in picked
        if (rubric_key is None or lab.rubric_key == rubric_key)
        and (task_id is None or lab.task_id == task_id)
        and (not reviewers or lab.reviewer in reviewers)
    ]
