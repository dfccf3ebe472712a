"""The batch ledger: every batch job and request of a task, in the task store (docs/batch.md).

A job's state is written **before and after** each step, and committed at once, so a run
killed at any point (``kill -9``) resumes without submitting anything twice:

==============  ==========================================================================
state           meaning, and what ``--resume`` does with a job found in it
==============  ==========================================================================
``PLANNED``     its requests are listed, nothing uploaded: dropped; its rows are planned again
``UPLOADED``    the input file is at the provider (``input_file_id``); no batch was asked for
``SUBMITTING``  a batch is being created from that file: the provider's batch list is
                searched for it (by input file) before a new one is created
``SUBMITTED``   the provider holds the batch (``batch_id``): it is polled, never re-created
``ENDED``       the provider finished it (``provider_status`` completed / expired / failed /
                cancelled): its output and error files are downloaded
``DOWNLOADED``  every request's result is stored in ``batch_requests``
``EXPORTED``    written to a file for the user's own engine (``batch export``); its results
                come back through ``batch import``
==============  ==========================================================================

The tables (``batch_jobs``, ``batch_requests``) are the store's migration
``m007_batch_ledger`` (:mod:`rubric_engine.store.migrations`), on SQLite and PostgreSQL
alike; the SQL here is the backends' common ``?`` dialect.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from rubric_engine.batch.lines import parse_custom_id
from rubric_engine.store.backend import Backend
from rubric_engine.store.task_store import TaskStore

JobState = Literal[
    "PLANNED", "UPLOADED", "SUBMITTING", "SUBMITTED", "ENDED", "DOWNLOADED", "EXPORTED"
]
#: provider batch statuses after which nothing more will be answered
FINAL_STATUSES = frozenset({"completed", "expired", "failed", "cancelled"})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Job:
    """One batch job as recorded."""

    task_id: str
    job_no: int
    round: int
    state: str
    provider_status: str | None
    input_file_id: str | None
    batch_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    request_count: int
    byte_count: int
    counts: dict[str, int]
    updated_at: str


@dataclass(frozen=True)
class PlannedRequest:
    custom_id: str
    row_id: str
    attempt: int


@dataclass(frozen=True)
class Asked:
    """One request of a row as the ledger holds it: its job, and its result (``None`` while
    it waits for one)."""

    custom_id: str
    attempt: int
    job_no: int
    result: dict[str, Any] | None


class Ledger:
    """Batch jobs and requests of the tasks in one store. Every write is committed at once."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self._db: Backend = store.backend

    def _commit(self) -> None:
        self.store.commit()

    # -- jobs --------------------------------------------------------------------------------

    def jobs(self, task_id: str) -> list[Job]:
        cursor = self._db.execute(
            "SELECT * FROM batch_jobs WHERE task_id=? ORDER BY job_no", (task_id,)
        )
        names = [d[0] for d in cursor.description]
        out = []
        for found in cursor.fetchall():
            data = dict(zip(names, found, strict=True))
            data["counts"] = json.loads(data["counts"])
            out.append(Job(**data))
        return out

    def plan(
        self, task_id: str, round_no: int, requests: Iterable[PlannedRequest], byte_count: int
    ) -> int:
        """Record a new job (``PLANNED``) with its requests; returns its number."""
        found = self._db.execute(
            "SELECT COALESCE(MAX(job_no), 0) FROM batch_jobs WHERE task_id=?", (task_id,)
        ).fetchone()
        job_no = int(found[0]) + 1
        rows = [(task_id, r.custom_id, job_no, r.row_id, r.attempt) for r in requests]
        self._db.execute(
            "INSERT INTO batch_jobs (task_id, job_no, round, state, request_count, byte_count,"
            " updated_at) VALUES (?,?,?,?,?,?,?)",
            (task_id, job_no, round_no, "PLANNED", len(rows), byte_count, _now()),
        )
        self._db.executemany(
            "INSERT INTO batch_requests (task_id, custom_id, job_no, row_id, attempt)"
            " VALUES (?,?,?,?,?)",
            rows,
        )
        self._commit()
        return job_no

    def update(self, task_id: str, job_no: int, state: str, **fields: Any) -> None:
        """Set a job's state and any of its other columns (``counts`` as a dict)."""
        if "counts" in fields:
            fields["counts"] = json.dumps(fields["counts"], sort_keys=True)
        names = ["state", "updated_at", *fields]
        values = [state, _now(), *fields.values()]
        sets = ", ".join(f"{n}=?" for n in names)
        self._db.execute(
            f"UPDATE batch_jobs SET {sets} WHERE task_id=? AND job_no=?",
            (*values, task_id, job_no),
        )
        self._commit()

    def drop(self, task_id: str, job_no: int) -> None:
        """Forget a job that never reached the provider (``PLANNED``), and its requests."""
        self._db.execute(
            "DELETE FROM batch_requests WHERE task_id=? AND job_no=?", (task_id, job_no)
        )
        self._db.execute("DELETE FROM batch_jobs WHERE task_id=? AND job_no=?", (task_id, job_no))
        self._commit()

    # -- requests ----------------------------------------------------------------------------

    def planned_count(self, task_id: str) -> int:
        """How many requests are in the task's jobs (answered or not)."""
        query = "SELECT COUNT(*) FROM batch_requests WHERE task_id=?"
        return int(self._db.execute(query, (task_id,)).fetchone()[0])

    def job_requests(self, task_id: str, job_no: int) -> dict[str, PlannedRequest]:
        query = "SELECT custom_id, row_id, attempt FROM batch_requests WHERE task_id=? AND job_no=?"
        return {
            cid: PlannedRequest(cid, row_id, attempt)
            for cid, row_id, attempt in self._db.execute(query, (task_id, job_no))
        }

    def set_results(self, task_id: str, results: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Store requests' results (``(custom_id, {"response": …} or {"error": …})``); not
        committed: :meth:`close_job` ends what they belong to, and the caller commits."""
        self._db.executemany(
            "UPDATE batch_requests SET result=? WHERE task_id=? AND custom_id=?",
            [(json.dumps(r, ensure_ascii=False), task_id, cid) for cid, r in results],
        )

    def close_job(self, task_id: str, job_no: int, missing: str, state: str) -> None:
        """Give each request of the job that has no result the error ``missing`` and move the
        job to ``state``; not committed (the caller commits with the results)."""
        self._db.execute(
            "UPDATE batch_requests SET result=? WHERE task_id=? AND job_no=? AND result IS NULL",
            (json.dumps({"error": missing}, ensure_ascii=False), task_id, job_no),
        )
        self._db.execute(
            "UPDATE batch_jobs SET state=?, updated_at=? WHERE task_id=? AND job_no=?",
            (state, _now(), task_id, job_no),
        )

    def jobs_of(self, task_id: str, custom_ids: Iterable[str]) -> dict[str, int]:
        """custom_id → job number, for the ids that are in a job of the task."""
        wanted, out = list(custom_ids), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = (
                f"SELECT custom_id, job_no FROM batch_requests WHERE task_id=? "
                f"AND custom_id IN ({marks})"
            )
            out.update(dict(self._db.execute(query, (task_id, *chunk))))
        return out

    def task_of(self, custom_id: str) -> str | None:
        """The task that planned ``custom_id`` (any task of the store), or ``None``."""
        query = "SELECT task_id FROM batch_requests WHERE custom_id=? LIMIT 1"
        found = self._db.execute(query, (custom_id,)).fetchone()
        return str(found[0]) if found else None

    def row_requests(self, task_id: str, row_id: str) -> list[tuple[int, dict[str, Any] | None]]:
        """A row's requests in attempt order: ``(attempt, result)``, ``None`` for a request
        still waiting for its result."""
        query = (
            "SELECT attempt, result FROM batch_requests WHERE task_id=? AND row_id=? "
            "ORDER BY attempt"
        )
        return [
            (int(attempt), json.loads(text) if text is not None else None)
            for attempt, text in self._db.execute(query, (task_id, row_id))
        ]

    def requests_of_row(self, task_id: str, row_id: str, sample: int = 1) -> list[Asked]:
        """The requests of one sample of a row (1: a single ask), in attempt order."""
        query = (
            "SELECT custom_id, attempt, job_no, result FROM batch_requests WHERE task_id=? "
            "AND row_id=? ORDER BY attempt"
        )
        out = []
        for cid, attempt, job_no, text in self._db.execute(query, (task_id, row_id)):
            parsed = parse_custom_id(cid)
            if (parsed.sample if parsed is not None else 1) == sample:
                result = json.loads(text) if text is not None else None
                out.append(Asked(cid, int(attempt), int(job_no), result))
        return out

    def row_of(self, task_id: str, custom_id: str) -> str | None:
        """The rowId a request of the task asks, or ``None``."""
        query = "SELECT row_id FROM batch_requests WHERE task_id=? AND custom_id=?"
        found = self._db.execute(query, (task_id, custom_id)).fetchone()
        return str(found[0]) if found else None

    def sample_requests(
        self, task_id: str, row_id: str
    ) -> dict[int, list[tuple[int, dict[str, Any] | None]]]:
        """A sampled row's requests (``score --samples K``): sample number → its requests as
        :meth:`row_requests` gives a row's. The sample is read from each request's
        ``custom_id`` (:func:`~rubric_engine.batch.lines.parse_custom_id`)."""
        query = (
            "SELECT custom_id, attempt, result FROM batch_requests WHERE task_id=? AND row_id=? "
            "ORDER BY attempt"
        )
        out: dict[int, list[tuple[int, dict[str, Any] | None]]] = {}
        for cid, attempt, text in self._db.execute(query, (task_id, row_id)):
            parsed = parse_custom_id(cid)
            sample = parsed.sample if parsed is not None else 1
            result = json.loads(text) if text is not None else None
            out.setdefault(sample, []).append((int(attempt), result))
        return out

    def answered_count(self, task_id: str, jobs: Collection[int]) -> int:
        """How many requests of ``jobs`` have a result."""
        count = 0
        for job_no in jobs:
            query = (
                "SELECT COUNT(*) FROM batch_requests WHERE task_id=? AND job_no=? "
                "AND result IS NOT NULL"
            )
            count += int(self._db.execute(query, (task_id, job_no)).fetchone()[0])
        return count

    def waiting_count(self, task_id: str) -> int:
        """How many rows have a request that has no result yet."""
        query = (
            "SELECT COUNT(DISTINCT row_id) FROM batch_requests WHERE task_id=? AND result IS NULL"
        )
        return int(self._db.execute(query, (task_id,)).fetchone()[0])

    def requests_of_jobs(
        self, task_id: str, jobs: Collection[int], page: int = 1000
    ) -> Iterator[tuple[str, str]]:
        """``(custom_id, rowId)`` of each request in one of ``jobs``, in custom_id order, read
        ``page`` at a time on the primary key (keyed on the last one read)."""
        after = ""
        while True:
            found = self._db.execute(
                "SELECT custom_id, row_id, job_no FROM batch_requests "
                "WHERE task_id=? AND custom_id>? ORDER BY custom_id LIMIT ?",
                (task_id, after, page),
            ).fetchall()
            for cid, row_id, job_no in found:
                if job_no in jobs:
                    yield cid, row_id
            if len(found) < page:
                return
            after = found[-1][0]


def answered(requests: list[tuple[int, dict[str, Any] | None]]) -> list[dict[str, Any] | None]:
    """A row's results in attempt order, for the judge (:mod:`rubric_engine.batch.backend`):
    up to the first attempt missing from the ledger (later ones cannot be used before it),
    ``None`` for a request still waiting."""
    out: list[dict[str, Any] | None] = []
    for attempt, result in requests:
        if attempt != len(out):
            break
        out.append(result)
    return out
