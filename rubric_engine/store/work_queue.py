"""Rows of one task shared by many workers: claim, lease, heartbeat, fenced write (docs/stores.md).

The ``work_items`` table (migration ``m003_work_items``) holds one item per input row of a
``score --workers-only`` task: the row's dialogue, its state (PENDING → CLAIMED → DONE), the
worker holding it, its lease deadline and its fencing token. The protocol, on PostgreSQL:

- :meth:`WorkQueue.claim` takes up to ``n`` PENDING items, or CLAIMED items whose lease ran out
  (their worker died), with ``SELECT … FOR UPDATE SKIP LOCKED``, so concurrent workers never
  wait for or take the same item; each claim adds 1 to the item's ``token`` and returns it.
- :meth:`WorkQueue.renew` (a heartbeat thread, :meth:`WorkQueue.heartbeat`) pushes the lease of
  every item the worker still holds; an item someone else re-claimed is no longer the
  worker's and is not renewed.
- :meth:`WorkQueue.complete` stores a result only if the item is still CLAIMED with the token
  the worker was given (a conditional write in the same transaction as the row insert): a worker
  that comes back after its lease was taken over cannot overwrite, or duplicate, the result of
  the worker that re-claimed the item. Each row therefore has exactly one result.

Times are the database server's clock (seconds since the epoch), never the workers' own, so
machines with skewed clocks agree on when a lease ends.

Source: the ``FOR UPDATE SKIP LOCKED`` + lease pattern of procrastinate and pgqueuer; fencing
tokens as in Kleppmann, "How to do distributed locking" (2016).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rubric_engine.errors import StoreError
from rubric_engine.formats.canonical import dialogue_json
from rubric_engine.store.backend import Backend
from rubric_engine.store.location import PostgresUrl
from rubric_engine.store.samples import UPSERT_SAMPLE
from rubric_engine.store.task_store import UPSERT_ROW, TaskStore
from rubric_engine.store.work_budget import TaskBudget, allowance, spend

_NOW = "extract(epoch from clock_timestamp())"
_CLAIM = f"""
WITH picked AS (
    SELECT task_id, seq FROM work_items
    WHERE task_id = %s AND state <> 'DONE'
      AND (state = 'PENDING' OR lease_until < {_NOW})
    ORDER BY seq LIMIT %s
    FOR UPDATE SKIP LOCKED
)
UPDATE work_items w
SET state = 'CLAIMED', worker = %s, token = w.token + 1, claims = w.claims + 1,
    lease_until = {_NOW} + %s
FROM picked WHERE w.task_id = picked.task_id AND w.seq = picked.seq
RETURNING w.seq, w.token, w.dialogue
"""


@dataclass(frozen=True)
class Claim:
    """One claimed row: its input position, fencing token and dialogue (as stored)."""

    seq: int
    token: int
    dialogue: dict[str, Any]


def need_postgres(store: TaskStore, what: str) -> PostgresUrl:
    """Raises: StoreError: the store is SQLite (workers share a PostgreSQL store)."""
    if not isinstance(store.path, PostgresUrl):
        raise StoreError(
            f"{what} needs a PostgreSQL store (--store postgresql://…), where many workers can "
            f"claim rows at once; {store.path} is a SQLite file: score the task there with "
            "`rubric-eval score` (and `--resume`) instead"
        )
    return store.path


def enqueue(store: TaskStore, task_id: str, rows: Iterable[tuple[int, str, dict[str, Any]]]) -> int:
    """Add a task's rows as PENDING items (``(seq, rowId, dialogue)`` in input order); returns
    how many. Committed once, so workers never see half a task."""
    count, batch = 0, []
    sql = "INSERT INTO work_items (task_id, seq, row_id, dialogue, state) VALUES (?,?,?,?,?)"
    for seq, row_id, dialogue in rows:
        batch.append((task_id, seq, row_id, _dumps(dialogue), "PENDING"))
        if len(batch) >= 500:
            store.backend.executemany(sql, batch)
            count, batch = count + len(batch), []
    if batch:
        store.backend.executemany(sql, batch)
        count += len(batch)
    store.commit()
    return count


def _dumps(value: Any) -> str:
    return dialogue_json(value)  # in the row's key order: a worker renders the same prompt


class WorkQueue:
    """One worker's view of one task's items, on its own store connection.

    Args:
        lease_s: how long a claim holds without a heartbeat; a dead worker's rows are claimed
            again this long after its last heartbeat.
    """

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        worker: str,
        lease_s: float,
        budget: TaskBudget | None = None,
    ) -> None:
        self.url = need_postgres(store, "rubric-eval work")
        self.budget = budget
        #: the task-wide budget limit that stopped claims (``"calls"``/``"cost"``), else None
        self.exhausted: str | None = None
        self._db: Backend = store.backend
        self.task_id = task_id
        self.worker = worker
        self.lease_s = lease_s
        self._lock = threading.Lock()  # the connection is shared with the judge loop's writes
        #: wall time of each claim round trip, in ms (benchmarks/workers.py reports p50/p99)
        self.claim_ms: list[float] = []

    def claim(self, n: int) -> list[Claim]:
        """Up to ``n`` rows, lowest ``seq`` first; empty when nothing is claimable right now
        (then :attr:`exhausted` says whether the task's budget is used up for good)."""
        with self._lock:
            started = time.perf_counter()
            conn = self._db.connection
            if self.budget is not None:  # one claimer of this task at a time: shared budget
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"claim:{self.task_id}",)
                )
                n, self.exhausted = allowance(self.budget, spend(conn, self.task_id), n)
            found = []
            if n > 0:
                found = conn.execute(
                    _CLAIM, (self.task_id, n, self.worker, self.lease_s)
                ).fetchall()
            conn.commit()
            self.claim_ms.append((time.perf_counter() - started) * 1000)
        return sorted(
            (Claim(seq, token, json.loads(text)) for seq, token, text in found),
            key=lambda c: c.seq,
        )

    def complete(
        self, claim: Claim, values: tuple[Any, ...], samples: Sequence[tuple[Any, ...]] = ()
    ) -> bool:
        """Store one row's result if this worker still holds the claim (fenced by its token).

        Args:
            values: the ``rows`` columns with the digest last
                (:func:`rubric_engine.store.task_store.row_write`).
            samples: the ``row_samples`` columns of a sampled row's samples, written in the
                same fenced transaction (a worker that lost the row writes none).

        Returns:
            False: the lease was lost and another worker holds (or finished) the row; nothing
            was written.
        """
        with self._lock:
            db = self._db
            cursor = db.execute(
                "UPDATE work_items SET state='DONE', dialogue='', lease_until=NULL "
                "WHERE task_id=? AND seq=? AND token=? AND state='CLAIMED'",
                (self.task_id, claim.seq, claim.token),
            )
            if cursor.rowcount != 1:
                db.rollback()
                return False
            if samples:
                db.executemany(UPSERT_SAMPLE, samples)
            db.execute(UPSERT_ROW["postgres"], values)
            db.commit()
        return True

    def release(self, claims: Iterable[Claim]) -> None:
        """Hand back rows this worker claimed but will not judge (it is stopping)."""
        with self._lock:
            for c in claims:
                self._db.execute(
                    "UPDATE work_items SET state='PENDING', worker=NULL, lease_until=NULL "
                    "WHERE task_id=? AND seq=? AND token=? AND state='CLAIMED'",
                    (self.task_id, c.seq, c.token),
                )
            self._db.commit()

    def remaining(self) -> int:
        """Rows without a stored result (pending, or claimed by any worker)."""
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM work_items WHERE task_id=? AND state <> 'DONE'",
                (self.task_id,),
            ).fetchone()
            self._db.commit()
        return int(n)

    def renew(self, conn: Any) -> int:
        """Push this worker's leases; returns how many rows it holds."""
        cursor = conn.execute(
            f"UPDATE work_items SET lease_until = {_NOW} + %s "
            "WHERE task_id = %s AND worker = %s AND state = 'CLAIMED'",
            (self.lease_s, self.task_id, self.worker),
        )
        return int(cursor.rowcount)

    @contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew the leases every third of a lease, from a thread with its own connection, so a
        busy judge loop never lets them lapse."""
        from rubric_engine.store.postgres import connection

        stop = threading.Event()

        def beat() -> None:
            with connection(self.url) as conn:
                conn.autocommit = True
                while not stop.wait(self.lease_s / 3):
                    self.renew(conn)
                conn.autocommit = False

        thread = threading.Thread(target=beat, name="rubric-eval heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=self.lease_s)


def work_stats(store: TaskStore, task_id: str) -> dict[str, int]:
    """How the task's rows were handed out: ``rows``, ``done``, ``claims`` (all claims) and
    ``claimedTwice`` (rows claimed more than once, i.e. possibly judged twice). Reads inside
    the caller's transaction (commits nothing)."""
    (rows, done, claims, twice) = store.backend.execute(
        "SELECT COUNT(*), SUM(CASE WHEN state='DONE' THEN 1 ELSE 0 END), SUM(claims), "
        "SUM(CASE WHEN claims > 1 THEN 1 ELSE 0 END) FROM work_items WHERE task_id=?",
        (task_id,),
    ).fetchone()
    return {
        "rows": int(rows or 0),
        "done": int(done or 0),
        "claims": int(claims or 0),
        "claimedTwice": int(twice or 0),
    }
