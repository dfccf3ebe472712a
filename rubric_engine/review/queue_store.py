"""Review queues kept with their task in the store (docs/review.md "Queues"). An edge: it reads
and writes the store.

``review_queues`` holds each queue's settings (:class:`~rubric_engine.review.queue.QueueSettings`)
and ``review_items`` one line per queued row: its place in the queue, whether it is in the
second-review sample, and its review state, which :func:`refresh_rows` derives from the row's
labels and events in the same transaction as each answer. A queue page therefore reads the
rows it shows through an index, whatever the task's size; every server over the store sees
the same queue.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from rubric_engine.errors import ConfigurationError
from rubric_engine.labels.model import LabelSource
from rubric_engine.labels.store import read_row_labels
from rubric_engine.review.answers import answer_of_result, answers_of_labels
from rubric_engine.review.queue import (
    WAITING,
    QueueSettings,
    RowSummary,
    ordered,
    row_state,
    second_review_sample,
    summary_of_result,
)
from rubric_engine.store.backend import Backend
from rubric_engine.store.task_store import TaskStore, parse_result

__all__ = [
    "Progress",
    "Queue",
    "create_queue",
    "disputed_rows",
    "get_queue",
    "next_rows",
    "progress",
    "queue_of_row",
    "queued_rows",
    "queues",
    "refresh_rows",
    "update_queue",
]

_BATCH = 500


@dataclass(frozen=True)
class Queue:
    """A stored queue: its task, settings, who made it and how many rows it holds."""

    task_id: str
    settings: QueueSettings
    created_at: str
    created_by: str
    row_count: int
    sample_size: int

    @property
    def name(self) -> str:
        return self.settings.name


def _queue(found: Sequence[object]) -> Queue:
    task_id, settings, created_at, created_by, row_count = found
    data = json.loads(str(settings))
    return Queue(
        str(task_id),
        QueueSettings.from_json(data),
        str(created_at),
        str(created_by),
        int(str(row_count)),
        int(data.get("sampleSize", 0)),
    )


_QUEUE_COLUMNS = "task_id, settings, created_at, created_by, row_count"


def queues(db: Backend, task_id: str) -> list[Queue]:
    """The task's queues, oldest first."""
    found = db.execute(
        f"SELECT {_QUEUE_COLUMNS} FROM review_queues WHERE task_id=? ORDER BY created_at, name",
        (task_id,),
    ).fetchall()
    return [_queue(f) for f in found]


def get_queue(db: Backend, task_id: str, name: str) -> Queue:
    """Raises: ConfigurationError: the task has no queue ``name`` (its queues are listed)."""
    found = db.execute(
        f"SELECT {_QUEUE_COLUMNS} FROM review_queues WHERE task_id=? AND name=?", (task_id, name)
    ).fetchone()
    if found is None:
        names = ", ".join(q.name for q in queues(db, task_id)) or "none yet"
        raise ConfigurationError(
            f"task {task_id} has no review queue {name!r} (queues: {names}); a lead makes one: "
            f"`rubric-eval queue create {task_id} --name {name}`"
        )
    return _queue(found)


def _summaries(store: TaskStore, task_id: str, wanted: set[str] | None = None) -> list[RowSummary]:
    """One summary per stored row of a task, in input order, streamed (no dialogue decoded)."""
    out = []
    for result_text, _ in store.result_texts(task_id):
        result = parse_result(result_text, task_id)
        if wanted is None or result.row_id in wanted:
            out.append(summary_of_result(result))
    return out


def _other_judges(store: TaskStore, task_id: str, rows: set[str]) -> dict[str, list[RowSummary]]:
    """Other tasks of the same rubric key, by the rows they share with this task."""
    key = store.task(task_id).rubric_key
    out: dict[str, list[RowSummary]] = {}
    for record in store.tasks():
        if record.id != task_id and record.rubric_key == key:
            for summary in _summaries(store, record.id, rows):
                out.setdefault(summary.row_id, []).append(summary)
    return out


def create_queue(store: TaskStore, task_id: str, settings: QueueSettings, created_by: str) -> Queue:
    """Draw a queue over the task's rows (one pass over them) and store it with its sample.

    Raises:
        ConfigurationError: the task already has a queue of that name, or the strategy leaves
            no row (e.g. ``red-flag`` on a task without red flags).
    """
    db = store.backend
    summaries = _summaries(store, task_id)
    others = (
        _other_judges(store, task_id, {s.row_id for s in summaries})
        if settings.strategy == "disagreement"
        else {}
    )
    if settings.strategy == "unstable-first" and not any(s.sampled for s in summaries):
        raise ConfigurationError(
            f"strategy unstable-first needs a task scored with --samples K (K of 2 or more; "
            f"docs/stability.md); task {task_id} asked the judge once per row: score it again "
            "with --samples 3, or choose another strategy (random takes every row)"
        )
    order = ordered(summaries, settings.strategy, settings.seed, others)
    if not order:
        raise ConfigurationError(
            f"strategy {settings.strategy} leaves no row of task {task_id} to review; choose "
            "another (random takes every row)"
        )
    sample = second_review_sample(order, settings.second_review, settings.seed)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    stored = {**settings.to_json(), "sampleSize": len(sample)}
    with db.exclusive("review_queues"):
        if db.execute(
            "SELECT 1 FROM review_queues WHERE task_id=? AND name=?", (task_id, settings.name)
        ).fetchone():
            raise ConfigurationError(
                f"task {task_id} already has a queue {settings.name!r}; give the new one "
                "another --name"
            )
        db.execute(
            f"INSERT INTO review_queues (name, {_QUEUE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                settings.name,
                task_id,
                json.dumps(stored, sort_keys=True),
                now,
                created_by,
                len(order),
            ),
        )
        needed = {True: settings.needed(True, False), False: settings.needed(False, False)}
        items = [
            (task_id, settings.name, row_id, n, int(row_id in sample), needed[row_id in sample])
            for n, row_id in enumerate(order)
        ]
        for start in range(0, len(items), _BATCH):
            db.executemany(
                "INSERT INTO review_items (task_id, queue, row_id, position, second, needed, "
                "state) VALUES (?,?,?,?,?,?,'open')",
                items[start : start + _BATCH],
            )
    labelled = [
        r for (r,) in db.execute("SELECT DISTINCT row_id FROM labels WHERE task_id=?", (task_id,))
    ]
    with db.exclusive("labels"):  # rows reviewed before the queue existed keep their reviews
        refresh_rows(store, task_id, labelled)
    return get_queue(db, task_id, settings.name)


def update_queue(db: Backend, queue: Queue, settings: QueueSettings) -> Queue:
    """Change who works a queue and how (members, blind, claim TTL, reviewers per row); its
    rows, order and sample stay as drawn (a new draw is a new queue).

    Raises:
        ConfigurationError: the strategy, share or seed would change.
    """
    old = queue.settings
    if (settings.name, settings.strategy, settings.second_review, settings.seed) != (
        old.name,
        old.strategy,
        old.second_review,
        old.seed,
    ):
        raise ConfigurationError(
            "a queue's rows, order and second-review sample are fixed when it is made; make a "
            "new queue for another strategy, share or seed"
        )
    rpr = settings.reviewers_per_row
    with db.exclusive("labels"):
        db.execute(
            "UPDATE review_queues SET settings=? WHERE task_id=? AND name=?",
            (
                json.dumps({**settings.to_json(), "sampleSize": queue.sample_size}, sort_keys=True),
                queue.task_id,
                queue.name,
            ),
        )
        db.execute(
            "UPDATE review_items SET needed = CASE WHEN second=1 OR overridden=1 THEN ? ELSE ? "
            "END WHERE task_id=? AND queue=?",
            (max(rpr, 2), rpr, queue.task_id, queue.name),
        )
        db.execute(
            "UPDATE review_items SET state = CASE WHEN settled=1 THEN 'settled' "
            "WHEN reviews=0 THEN 'open' WHEN reviews<needed THEN 'partial' "
            "WHEN disputed=1 THEN 'disputed' ELSE 'done' END WHERE task_id=? AND queue=?",
            (queue.task_id, queue.name),
        )
    return replace(queue, settings=settings)


def _settled(db: Backend, task_id: str, row_id: str, adjudicated_last: bool) -> bool:
    """The row's last settle/reopen event is a settle (stores from before events existed: an
    adjudication came after the last review)."""
    found = db.execute(
        "SELECT kind FROM review_events WHERE task_id=? AND row_id=? AND kind IN "
        "('settle', 'reopen') ORDER BY seq DESC LIMIT 1",
        (task_id, row_id),
    ).fetchone()
    return adjudicated_last if found is None else found[0] == "settle"


def refresh_rows(store: TaskStore, task_id: str, row_ids: Iterable[str]) -> None:
    """Derive each row's review state in every queue of the task that holds it, from its
    current labels and events. Call inside ``db.exclusive("labels")`` after a write."""
    db = store.backend
    record = store.task(task_id)
    by_queue = {q.name: q.settings for q in queues(db, task_id)}
    for row_id in row_ids:
        held = db.execute(
            "SELECT queue, second FROM review_items WHERE task_id=? AND row_id=?",
            (task_id, row_id),
        ).fetchall()
        if not held:
            continue
        labels = read_row_labels(db, record.rubric_key, [row_id], task_id=task_id)
        reviews = {
            who: answer
            for (_, who), answer in answers_of_labels(
                lab for lab in labels if lab.source is not LabelSource.ADJUDICATION
            ).items()
        }
        sources = [lab.source is LabelSource.ADJUDICATION for lab in labels]
        adjudicated_last = bool(sources) and sources[-1]
        settled = _settled(db, task_id, row_id, adjudicated_last)
        found = db.execute(
            "SELECT result FROM rows WHERE task_id=? AND row_id=?", (task_id, row_id)
        ).fetchone()
        judge = None if found is None else answer_of_result(parse_result(found[0], task_id))
        for queue, second in held:
            state = row_state(by_queue[queue], bool(second), judge, reviews, settled)
            db.execute(
                "UPDATE review_items SET reviews=?, needed=?, overridden=?, disputed=?, "
                "settled=?, state=? WHERE task_id=? AND queue=? AND row_id=?",
                (
                    state.reviews,
                    state.needed,
                    int(state.overridden),
                    int(state.disputed),
                    int(state.settled),
                    state.state,
                    task_id,
                    queue,
                    row_id,
                ),
            )


_NOT_MINE = (
    "NOT EXISTS (SELECT 1 FROM labels l WHERE l.task_id=i.task_id AND l.reviewer=? "
    "AND l.row_id=i.row_id AND l.source<>'adjudication')"
)
_NOT_SKIPPED = (
    "NOT EXISTS (SELECT 1 FROM review_events e WHERE e.task_id=i.task_id AND e.reviewer=? "
    "AND e.kind='skip' AND e.row_id=i.row_id)"
)


def next_rows(
    db: Backend,
    queue: Queue,
    reviewer: str,
    limit: int,
    claimed_by_others: frozenset[str] = frozenset(),
) -> list[str]:
    """The rows ``reviewer`` is offered next, first one first: rows still needing reviewers
    that they have not answered and nobody else holds; rows someone already answered first,
    then the queue's order; rows they skipped come last."""
    out: list[str] = []
    for skipped in (False, True):
        test = _NOT_SKIPPED if not skipped else _NOT_SKIPPED.replace("NOT EXISTS", "EXISTS")
        for state in WAITING:
            if len(out) >= limit:
                return out
            want = limit - len(out) + len(claimed_by_others)
            found = db.execute(
                f"SELECT row_id FROM review_items i WHERE task_id=? AND queue=? AND state=? "
                f"AND {_NOT_MINE} AND {test} ORDER BY position LIMIT ?",
                (queue.task_id, queue.name, state, reviewer, reviewer, want),
            ).fetchall()
            out += [r for (r,) in found if r not in claimed_by_others][: limit - len(out)]
    return out


@dataclass(frozen=True)
class QueuedRow:
    """A queued row as a lead lists it: its place, review state and what the judge said."""

    position: int
    row_id: str
    state: str
    reviews: int
    needed: int
    second: bool
    summary: RowSummary | None


def queued_rows(store: TaskStore, queue: Queue, limit: int, offset: int = 0) -> list[QueuedRow]:
    """The queue's rows in its order, ``limit`` from ``offset`` (read through the index)."""
    db = store.backend
    found = db.execute(
        "SELECT position, row_id, state, reviews, needed, second FROM review_items "
        "WHERE task_id=? AND queue=? ORDER BY position LIMIT ? OFFSET ?",
        (queue.task_id, queue.name, limit, offset),
    ).fetchall()
    summaries: dict[str, RowSummary] = {}
    for start in range(0, len(found), _BATCH):
        ids = [str(f[1]) for f in found[start : start + _BATCH]]
        marks = ",".join("?" * len(ids))
        for (text,) in db.execute(
            f"SELECT result FROM rows WHERE task_id=? AND row_id IN ({marks})",
            (queue.task_id, *ids),
        ):
            summary = summary_of_result(parse_result(text, queue.task_id))
            summaries[summary.row_id] = summary
    return [
        QueuedRow(
            int(pos),
            str(row),
            str(state),
            int(reviews),
            int(needed),
            bool(second),
            summaries.get(str(row)),
        )
        for pos, row, state, reviews, needed, second in found
    ]


@dataclass(frozen=True)
class Progress:
    """A queue's figures for one reviewer."""

    total: int
    #: rows that need no more reviews (done, disputed or settled)
    complete: int
    #: rows still needing reviewers
    open: int
    #: rows waiting for this reviewer (open, not answered by them, not held by someone else)
    waiting: int
    #: rows of the task this reviewer answered
    mine: int
    disputed: int
    settled: int


def progress(
    db: Backend, queue: Queue, reviewer: str, claimed_by_others: frozenset[str] = frozenset()
) -> Progress:
    """Counts over the queue's rows, each read through an index."""
    counts = dict(
        db.execute(
            "SELECT state, COUNT(*) FROM review_items WHERE task_id=? AND queue=? GROUP BY state",
            (queue.task_id, queue.name),
        ).fetchall()
    )
    mine_waiting = db.execute(
        "SELECT COUNT(*) FROM review_items i WHERE task_id=? AND queue=? AND state='partial' "
        f"AND NOT {_NOT_MINE}",
        (queue.task_id, queue.name, reviewer),
    ).fetchone()[0]
    held = 0
    if claimed_by_others:
        marks = ",".join("?" * len(claimed_by_others))
        held = db.execute(
            f"SELECT COUNT(*) FROM review_items i WHERE task_id=? AND queue=? AND state IN "
            f"('open', 'partial') AND row_id IN ({marks}) AND {_NOT_MINE}",
            (queue.task_id, queue.name, *sorted(claimed_by_others), reviewer),
        ).fetchone()[0]
    mine = db.execute(
        "SELECT COUNT(DISTINCT row_id) FROM labels WHERE task_id=? AND reviewer=? "
        "AND source<>'adjudication'",
        (queue.task_id, reviewer),
    ).fetchone()[0]
    waiting_all = int(counts.get("open", 0)) + int(counts.get("partial", 0))
    return Progress(
        total=sum(int(n) for n in counts.values()),
        complete=sum(int(counts.get(s, 0)) for s in ("done", "disputed", "settled")),
        open=waiting_all,
        waiting=waiting_all - int(mine_waiting) - int(held),
        mine=int(mine),
        disputed=int(counts.get("disputed", 0)),
        settled=int(counts.get("settled", 0)),
    )


def queue_of_row(db: Backend, task_id: str, row_id: str, reviewer: str) -> Queue | None:
    """The first queue of the task that holds the row and has ``reviewer`` as a member."""
    names = {
        q
        for (q,) in db.execute(
            "SELECT queue FROM review_items WHERE task_id=? AND row_id=?", (task_id, row_id)
        )
    }
    for queue in queues(db, task_id):
        if queue.name in names and queue.settings.is_member(reviewer):
            return queue
    return None


def disputed_rows(db: Backend, task_id: str, limit: int, offset: int = 0) -> tuple[list[str], int]:
    """Rows of the task that wait for a lead (disputed in any queue), in queue order, and how
    many there are."""
    base = "FROM review_items WHERE task_id=? AND state='disputed'"
    total = db.execute(f"SELECT COUNT(DISTINCT row_id) {base}", (task_id,)).fetchone()[0]
    found = db.execute(
        f"SELECT row_id, MIN(position) AS first {base} GROUP BY row_id ORDER BY first, row_id "
        "LIMIT ? OFFSET ?",
        (task_id, limit, offset),
    ).fetchall()
    return [r for r, _ in found], int(total)
