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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rubric_engine.errors import StoreError
from rubric_engine.labels.model import Label, label_content_id
from rubric_engine.labels.pins import RubricPins, dialogue_pin, pin_label, rubric_pins
from rubric_engine.store.backend import Backend, driver_errors
from rubric_engine.store.task_store import decode_column

__all__ = [
    "AppendOutcome",
    "PinsByHash",
    "append_labels",
    "current_labels_by_row",
    "dialogue_pins",
    "labels_on_task_rows",
    "labels_transaction",
    "on_dialogue",
    "read_labels",
    "read_row_labels",
    "reviewer_order",
    "store_labels",
]


@dataclass(frozen=True)
class AppendOutcome:
    """What :func:`append_labels` did: the labels stored (with ids and ``supersedes`` filled)
    and how many lines changed nothing."""

    added: tuple[Label, ...]
    unchanged: int


_Key = tuple[str | None, str, str | None, str, str | None, str | None]


def _key(label: Label, dialogue: str | None = None) -> _Key:
    """What one label is a judgment of: labels under different pins (a requirement whose text
    changed between versions, or another dialogue under the same rowId) are two judgments,
    both current; same pins, an edit. ``dialogue``: the key with that dialogue pin instead."""
    pin = label.requirement_hash if label.requirement_id is not None else label.row_hash
    seen = label.dialogue_hash if dialogue is None else dialogue
    return (label.rubric_key, label.row_id, label.requirement_id, label.reviewer, pin, seen)


def _unpinned_key(label: Label) -> _Key:
    """The key of a label that names no dialogue (stored before dialogues were pinned), which
    a label of the same judgment on a pinned dialogue edits."""
    return (*_key(label)[:5], None)


def _judgment(label: Label) -> tuple[object, ...]:
    flags = None if label.red_flag_types is None else tuple(sorted(set(label.red_flag_types)))
    return (label.status, label.intent_key, flags, label.score, label.reason)


def append_labels(db: Backend, labels: Sequence[Label]) -> AppendOutcome:
    """Store labels in one transaction: all of them or none.

    A label without ``time`` gets the current UTC time, and pins to what it judged
    (:mod:`rubric_engine.labels.pins`) from the rubric version its ``rubricHash`` names; a label
    with a ``taskId`` and no ``dialogueHash`` is pinned to that task's row's dialogue. A label
    whose (rubric, row, requirement, reviewer, pins) already has a current label supersedes it
    (``supersedes`` is filled when the file did not say), as does one whose current label
    names no dialogue (stored before dialogues were pinned); one with the same judgment as the
    current one is skipped and counted.

    Raises:
        StoreError: the database refused the write (nothing is stored).
    """
    with labels_transaction(db):
        return store_labels(db, labels)


@contextmanager
def labels_transaction(db: Backend) -> Iterator[None]:
    """One transaction holding the store's labels lock (``db.exclusive("labels")``), for
    :func:`store_labels` calls that are kept all or none.

    Raises:
        StoreError: the database refused a write (nothing is stored).
    """
    try:
        with db.exclusive("labels"):
            yield
    except driver_errors(db) as exc:
        raise StoreError(
            f"labels were not stored ({exc}); nothing of this import was kept"
        ) from exc


def store_labels(db: Backend, labels: Sequence[Label]) -> AppendOutcome:
    """The writes of :func:`append_labels`, inside the caller's ``db.exclusive("labels")``
    block (a review answer stores its labels and the row's queue state in one transaction).
    Only the current labels of the rows written are read, by rubric key and row."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pins = PinsByHash(db)
    rows: dict[str | None, set[str]] = {}
    on_task: dict[str, set[str]] = {}
    for lab in labels:
        rows.setdefault(lab.rubric_key, set()).add(lab.row_id)
        if lab.task_id is not None and lab.dialogue_hash is None:
            on_task.setdefault(lab.task_id, set()).add(lab.row_id)
    seen = {task: dialogue_pins(db, task, sorted(ids)) for task, ids in on_task.items()}
    current = {
        _key(pins.pinned(c)): c
        for key, ids in rows.items()
        for c in _current_of_rows(db, key, sorted(ids))
    }
    added: list[Label] = []
    unchanged = 0
    seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM labels").fetchone()[0]
    for raw in labels:
        label = pins.pinned(raw if raw.time else raw.model_copy(update={"time": now}))
        if label.task_id is not None and label.dialogue_hash is None:
            label = label.model_copy(
                update={"dialogue_hash": seen[label.task_id].get(label.row_id)}
            )
        before = current.get(_key(label))
        if before is None and label.dialogue_hash is not None:
            before = current.get(_unpinned_key(label))
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
    return AppendOutcome(tuple(added), unchanged)


#: rows per ``IN (...)`` list: well under SQLite's and PostgreSQL's parameter limits
_CHUNK = 500


def dialogue_pins(db: Backend, task_id: str, row_ids: Sequence[str]) -> dict[str, str]:
    """rowId → :func:`~rubric_engine.labels.pins.dialogue_pin` of the dialogue task ``task_id``
    stored for that row (rows the task does not have are absent)."""
    out: dict[str, str] = {}
    if "rows" not in db.tables():
        return out
    for start in range(0, len(row_ids), _CHUNK):
        chunk = row_ids[start : start + _CHUNK]
        for row_id, text in db.execute(
            f"SELECT row_id, dialogue FROM rows WHERE task_id=? "
            f"AND row_id IN ({','.join('?' * len(chunk))})",
            (task_id, *chunk),
        ):
            out[row_id] = dialogue_pin(decode_column(text, f"task {task_id} row {row_id} dialogue"))
    return out


def on_dialogue(label: Label, pins: Mapping[str, str]) -> bool:
    """Whether a label applies to a task's row whose dialogue pins are ``pins`` (rowId →
    pin): it names no dialogue (stored before dialogues were pinned, or imported without a
    task), or the one the task's row holds."""
    return label.dialogue_hash is None or pins.get(label.row_id) == label.dialogue_hash


def _current_of_rows(db: Backend, rubric_key: str | None, row_ids: Sequence[str]) -> list[Label]:
    """Current labels (no label supersedes them) of some rows under one rubric key, in
    insertion order, read through the ``labels_by_row`` and ``labels_by_supersedes`` indexes."""
    found: list[tuple[Any, ...]] = []
    key_test = "rubric_key IS NULL" if rubric_key is None else "rubric_key=?"
    key_args: tuple[str, ...] = () if rubric_key is None else (rubric_key,)
    for start in range(0, len(row_ids), _CHUNK):
        chunk = row_ids[start : start + _CHUNK]
        found += db.execute(
            f"SELECT seq, {_COLUMNS} FROM labels l WHERE {key_test} "
            f"AND row_id IN ({','.join('?' * len(chunk))}) "
            "AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)",
            (*key_args, *chunk),
        ).fetchall()
    return [_parse(db, found_row[1:]) for found_row in sorted(found, key=lambda r: r[0])]


def read_row_labels(
    db: Backend, rubric_key: str, row_ids: Sequence[str], *, task_id: str | None = None
) -> list[Label]:
    """The current labels of some rows under one rubric key, in insertion order: what
    :func:`read_labels` returns for them, without reading any other row's labels.

    Args:
        task_id: only labels made on this task's rows.
    """
    return [
        lab
        for lab in _current_of_rows(db, rubric_key, list(dict.fromkeys(row_ids)))
        if task_id is None or lab.task_id == task_id
    ]


#: the ``labels`` columns every reader reads, checked against the label's JSON by
#: :func:`_parse`: the columns queries filter on must say what the label says
_COLUMNS = (
    "label_id, rubric_key, row_id, requirement_id, status, reviewer, source, labelled_at, "
    "task_id, supersedes, label"
)

#: damaged labels a refusal names before "and N more"
_NAMED = 20


def _mismatch(found: Sequence[Any]) -> str | None:
    """What of a stored label (its :data:`_COLUMNS`) disagrees with itself: its content no
    longer hashes to its ``labelId``, or a column says another thing than its JSON; ``None``
    when it holds."""
    try:
        data = json.loads(found[-1])
    except (TypeError, ValueError):
        return "its JSON does not read"
    if not isinstance(data, dict):
        return "its JSON is not a label"
    if data.get("labelId") != label_content_id(data):
        return "its content does not hash to its labelId"
    names = ("labelId", "rubricKey", "rowId", "requirementId", "status", "reviewer", "source",
             "time", "taskId", "supersedes")  # fmt: skip
    differ = [n for n, value in zip(names, found[:-1], strict=True) if data.get(n) != value]
    return f"column(s) {', '.join(differ)} differ from its JSON" if differ else None


def _parse(db: Backend, found: Sequence[Any]) -> Label:
    """A stored label from its :data:`_COLUMNS`, checked: its content still hashes to its
    ``labelId`` and the columns agree with its JSON (labels are append-only; a label edited in
    place is a damaged store, docs/calibration.md).

    Raises:
        StoreError: the label was changed after it was stored, naming every such label.
    """
    if _mismatch(found) is None:
        try:
            return Label.model_validate_json(found[-1])
        except ValueError as exc:
            raise StoreError(
                f"stored label {found[0]} is not a valid label ({exc}); the store was changed "
                "by hand. Restore it from a backup."
            ) from exc
    damaged = [
        f"{row[0]} (row {row[2]}, {row[5]}: {why})"
        for row in db.execute(f"SELECT {_COLUMNS} FROM labels ORDER BY seq")
        if (why := _mismatch(row)) is not None
    ]
    more = f" and {len(damaged) - _NAMED} more" if len(damaged) > _NAMED else ""
    raise StoreError(
        f"{len(damaged)} stored label(s) were changed after they were stored: "
        f"{'; '.join(damaged[:_NAMED])}{more}. Labels are append-only (an edit is a new label "
        "that supersedes the old one), so the store was changed by hand; restore it from a "
        "backup, then import the edits as new labels"
    )


def _all(db: Backend) -> list[Label]:
    rows = db.execute(f"SELECT {_COLUMNS} FROM labels ORDER BY seq").fetchall()
    return [_parse(db, found) for found in rows]


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


class PinsByHash:
    """The pins of the rubric versions labels name by ``rubricHash``, looked up once each in
    the store (published versions, then the snapshots tasks keep, which include drafts)."""

    def __init__(self, db: Backend) -> None:
        self._db = db
        self._found: dict[tuple[str | None, str | None], RubricPins | None] = {}

    def of(self, rubric_key: str | None, rubric_hash: str | None) -> RubricPins | None:
        """The pins of that version; ``None`` when the store holds no such version."""
        key = (rubric_key, rubric_hash)
        if key not in self._found:
            self._found[key] = self._look_up(rubric_key, rubric_hash)
        return self._found[key]

    def add(self, rubric_key: str, rubric_hash: str, pins: RubricPins) -> None:
        """Pins already known (the calibrated task's own rubric)."""
        self._found[(rubric_key, rubric_hash)] = pins

    def _look_up(self, rubric_key: str | None, rubric_hash: str | None) -> RubricPins | None:
        from rubric_engine.rubric.versions import verified_snapshot

        if rubric_key is None or rubric_hash is None:
            return None
        tables = self._db.tables()
        found = None
        if "rubric_versions" in tables:
            found = self._db.execute(
                "SELECT snapshot FROM rubric_versions WHERE rubric_key=? AND content_hash=?",
                (rubric_key, rubric_hash),
            ).fetchone()
        if found is None and "tasks" in tables:
            found = self._db.execute(
                "SELECT rubric_snapshot FROM tasks WHERE rubric_key=? AND rubric_hash=? LIMIT 1",
                (rubric_key, rubric_hash),
            ).fetchone()
        if found is None:
            return None
        snapshot = json.loads(found[0])
        where = f"rubric {rubric_key} ({rubric_hash})"
        return rubric_pins(verified_snapshot(snapshot, rubric_hash, where))

    def pinned(self, label: Label) -> Label:
        """The label with its pins filled from the version it names (unchanged when it names
        none the store holds, or has its pins)."""
        pins = self.of(label.rubric_key, label.rubric_hash)
        return label if pins is None else pin_label(label, pins)


def reviewer_order(db: Backend, rubric_key: str) -> list[str]:
    """The reviewers of a rubric key in the order their first label was stored (the merged
    view's precedence after ``--reviewer``)."""
    if "labels" not in db.tables():
        return []
    rows = db.execute(
        "SELECT reviewer, MIN(seq) FROM labels WHERE rubric_key=? GROUP BY reviewer ORDER BY 2",
        (rubric_key,),
    ).fetchall()
    return [name for name, _ in rows]


def current_labels_by_row(
    db: Backend,
    rubric_key: str,
    *,
    reviewers: Sequence[str] = (),
    task_id: str | None = None,
    page: int = 2000,
) -> Iterator[tuple[str, list[Label]]]:
    """The current labels of a rubric key, one row at a time, in rowId order (code-point
    order, as ``ORDER BY`` gives on both stores), each row's labels in stored order; with
    ``task_id``, only those on that task's rows.

    Read ``page`` labels per query (keyset on the ``labels_by_row`` index), so memory holds
    one page and one row whatever the number of labels; a superseded label is found by
    ``labels_by_supersedes``, as :func:`labels_on_task_rows` finds it, and a label's row among
    the task's rows by their primary key.
    """
    if "labels" not in db.tables():
        return
    who = f" AND reviewer IN ({','.join('?' * len(reviewers))})" if reviewers else ""
    current = "NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = labels.label_id)"
    on_task = (
        " AND EXISTS (SELECT 1 FROM rows r WHERE r.task_id=? AND r.row_id=labels.row_id)"
        if task_id is not None
        else ""
    )
    after: tuple[str, int] | None = None
    row_id: str | None = None
    group: list[Label] = []
    while True:
        where = "rubric_key=? AND " + current + who + on_task
        params: tuple[object, ...] = (rubric_key, *reviewers)
        if task_id is not None:
            params += (task_id,)
        if after is not None:
            where += " AND (row_id>? OR (row_id=? AND seq>?))"
            params += (after[0], after[0], after[1])
        found = db.execute(
            f"SELECT row_id, seq, {_COLUMNS} FROM labels WHERE {where} "
            "ORDER BY row_id, seq LIMIT ?",
            (*params, page),
        ).fetchall()
        for found_row, _, *columns in found:
            if found_row != row_id and group and row_id is not None:
                yield row_id, group
                group = []
            row_id = found_row
            group.append(_parse(db, columns))
        if len(found) < page:
            break
        after = (found[-1][0], found[-1][1])
    if group and row_id is not None:
        yield row_id, group


def labels_on_task_rows(
    db: Backend,
    rubric_key: str,
    task_id: str,
    *,
    include_superseded: bool = False,
    page: int = 2000,
) -> Iterator[Label]:
    """The labels of ``rubric_key`` that apply to the rows of task ``task_id`` (made on the
    dialogue the task's row holds, or naming none: :func:`on_dialogue`), in the order they
    were stored, current ones only unless ``include_superseded`` (as :func:`read_labels`).

    Read ``page`` labels per query, keyed on the last one's ``seq`` (the
    ``labels_by_rubric_seq`` index); a label's row is looked up in the task's rows by the
    primary key, a label superseding it by ``labels_by_supersedes``, the dialogues of a page's
    rows in one query. Memory holds one page whatever the number of labels (``labels export``,
    docs/scale.md)."""
    if "labels" not in db.tables():
        return
    current = (
        ""
        if include_superseded
        else " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = labels.label_id)"
    )
    after = 0
    while True:
        found = db.execute(
            f"SELECT seq, {_COLUMNS} FROM labels WHERE rubric_key=? AND seq>?"
            " AND EXISTS (SELECT 1 FROM rows WHERE rows.task_id=? AND rows.row_id=labels.row_id)"
            f"{current} ORDER BY seq LIMIT ?",
            (rubric_key, after, task_id, page),
        ).fetchall()
        labels = [_parse(db, columns[1:]) for columns in found]
        pinned = sorted({lab.row_id for lab in labels if lab.dialogue_hash is not None})
        pins = dialogue_pins(db, task_id, pinned)
        yield from (lab for lab in labels if on_dialogue(lab, pins))
        if len(found) < page:
            return
        after = found[-1][0]
