"""The task store: one SQLite file, or a PostgreSQL database (docs/stores.md).

A **task** keeps everything needed to rebuild its report without reading current files: the
rubric key, version, status, full snapshot and content hash; the prompt version, hash and the
rendered system prompt; the engine version; the judge mode, model and parameters; the inputs.
Each **row** keeps its dialogue, the raw judge responses of every attempt, the normalized
result (referenceBasis, scores, warnings), tokens, cost and latency.

Rows are committed in small batches as they finish, so an interrupted run keeps its work.
Both backends (:mod:`rubric_engine.store`) hold the same tables, made by one migration list
(:mod:`rubric_engine.store.migrations`), and behave the same through this class.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from rubric_engine.errors import StoreError, TaskNotFoundError
from rubric_engine.formats.canonical import canonical_json, dialogue_json
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.store.backend import Backend
from rubric_engine.store.digest import EXTRA_KEY as DIGESTS_MARK
from rubric_engine.store.digest import DigestCheck, RowDigests
from rubric_engine.store.location import StoreLocation, parse_location
from rubric_engine.store.migrations import (
    SCHEMA_VERSION,
    m011_samples_and_digests,
    migrate,
    raw_attempts_text,
)
from rubric_engine.store.samples import (
    DELETE_ATTEMPTS,
    HELD_SAMPLES,
    SAMPLE_SELECT,
    UPSERT_ATTEMPT,
    UPSERT_SAMPLE,
    HeldUsage,
    StoredSample,
    attempt_values,
    kept_answers,
    sample_rows,
    sample_values,
    stored_sample,
)

__all__ = [
    "SCHEMA_VERSION",
    "RowSink",
    "StoredRow",
    "StoredSample",
    "TaskRecord",
    "TaskStore",
    "new_task_id",
    "result_json",
    "row_values",
]

#: a finished row is committed at most this many seconds after it was stored
COMMIT_INTERVAL_S = 0.5
#: ... or once this many rows wait, whichever comes first. The clock bounds what a kill can
#: lose; the count only saves commits: on PostgreSQL (durable) a commit every 25 rows cost
#: ~200 µs of wall time per row, every 250 about nothing; SQLite (WAL, NORMAL) does not notice
#: (measured with 5,000 rows on each)
COMMIT_EVERY_ROWS = 250
#: SQLite rows waiting for their commit are sent (not committed) in runs of this many: one
#: ``executemany`` per run instead of a statement per row, without holding a whole commit
#: window's rows in memory (PostgreSQL sends a commit's rows at the commit: a round trip each)
SEND_EVERY_ROWS = 32
#: the row write: a resumed row replaces the one stored before (its columns are updated in
#: place). One statement on both backends: SQLite's ``INSERT OR REPLACE`` did the same, and
#: with foreign keys on it cost ~2.5 µs a row more in SQLite than this upsert (a
#: REPLACE must be ready to delete the old row, and checks the keys for it)
_UPSERT = (
    "INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (task_id, row_id) DO UPDATE SET "
    + ", ".join(
        f"{c}=EXCLUDED.{c}"
        for c in (
            "seq",
            "status",
            "final_score",
            "result",
            "dialogue",
            "raw_attempts",
            "calls",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "latency_ms",
            "cassette_key",
            "cache_read_tokens",
            "cache_creation_tokens",
            "digest",
        )
    )
)
UPSERT_ROW = {"sqlite": _UPSERT, "postgres": _UPSERT}


def _dumps(value: Any) -> str:
    return canonical_json(value)


def decode_column(text: str, what: str) -> Any:
    """JSON from a store column; a column edited into non-JSON is a damaged store."""
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise StoreError(
            f"{what} in the store is not valid JSON ({exc}); the store was changed by hand. "
            "Restore it from a backup or score again."
        ) from exc


def parse_result(text: str, task_id: str, row_id: str | None = None) -> RowResult:
    """A stored result column as a :class:`RowResult`.

    Args:
        row_id: the row's ``row_id`` column, when read: the result must be that row's.

    Raises:
        StoreError: it is not a valid result, or another row's (the store was edited by hand).
    """
    row = f"row {row_id}" if row_id is not None else "a row"
    try:
        result = RowResult.model_validate_json(text)
    except ValidationError as exc:
        raise StoreError(
            f"task {task_id}: the stored result of {row} is not a valid result "
            f"({exc.errors()[0]['msg']}); the store was changed by hand. Restore it from a backup."
        ) from exc
    if row_id is not None and result.row_id != row_id:
        raise StoreError(
            f"task {task_id}: {row} holds the stored result of row {result.row_id}; the store "
            "was changed by hand. Restore it from a backup."
        )
    return result


#: the migration that gave rows their digest: a task created after it was written with digests
DIGESTS_MIGRATION = m011_samples_and_digests.__name__


def _before(created_at: str, applied_at: str) -> bool:
    """Whether a task's creation time is before a migration's (both UTC; a creation time
    that does not parse is not before: it was edited)."""
    try:
        return datetime.fromisoformat(created_at) < datetime.fromisoformat(applied_at)
    except (ValueError, TypeError):  # TypeError: one has a time zone, the other not
        return False


def new_task_id() -> str:
    """``YYYYMMDD-HHMMSS-xxxxxx`` (UTC time, 6 random hex digits)."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass(frozen=True)
class TaskRecord:
    """A task as stored. JSON columns are decoded."""

    id: str
    created_at: str
    finished_at: str | None
    state: str
    rubric_key: str
    rubric_version: int
    rubric_status: str
    rubric_hash: str
    rubric_snapshot: dict[str, Any]
    prompt_version: str
    prompt_hash: str
    prompt_system: str
    engine_version: str
    analysis_version: str
    judge_mode: str
    model: str
    judge_params: dict[str, Any]
    inputs: list[dict[str, Any]]
    row_count: int
    extra: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One finished row as the store keeps it (slots: one is made per row)."""

    seq: int
    result: RowResult
    dialogue: dict[str, Any]
    raw_attempts: list[dict[str, Any]]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float
    cassette_key: str | None
    #: of ``prompt_tokens``, read from / written to the provider's prompt cache
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    #: a sampled row's samples (docs/stability.md), judge by judge; empty for a single ask
    samples: tuple[StoredSample, ...] = ()


def result_json(result: RowResult) -> str:
    """A row result as the store keeps it and ``rows.jsonl`` shows it: ``json.dumps`` of its
    camelCase dump (field order, ``", "`` and ``": "``, UTF-8 kept). Its enums are ``StrEnum``
    values, which ``json`` writes as their text. Stores written by engines before this form
    hold the canonical form (:func:`~rubric_engine.formats.canonical.canonical_json`); both
    read back as the same result."""
    return json.dumps(result.model_dump(by_alias=True), ensure_ascii=False)


#: how every result made by :func:`result_json` starts (``rowId`` is the first field); a result
#: in the older canonical form starts with its alphabetically first key, ``cappedBy``
RESULT_JSON_START = '{"rowId": '


def row_values(task_id: str, row: StoredRow) -> tuple[Any, ...]:
    """The ``rows`` columns of one finished row, in table order (the result as
    :func:`result_json`, the dialogue as :func:`~rubric_engine.formats.canonical.dialogue_json`
    (in the row's key order), the raw attempts as canonical text)."""
    r = row.result
    return (
        task_id,
        row.seq,
        r.row_id,
        str(r.status),
        r.final_score,
        result_json(r),
        dialogue_json(row.dialogue),
        raw_attempts_text(row.raw_attempts),
        row.calls,
        row.prompt_tokens,
        row.completion_tokens,
        row.cost_usd,
        row.latency_ms,
        row.cassette_key,
        row.cache_read_tokens,
        row.cache_creation_tokens,
    )


def row_write(
    task_id: str, row: StoredRow, digests: RowDigests | None
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """What storing a row writes: its ``rows`` columns with the digest last (``None`` for a
    task stored before digests), and the ``row_samples`` columns of its samples."""
    values = row_values(task_id, row)
    samples = [sample_values(task_id, s, result_json(s.result)) for s in row.samples]
    digest = digests.of(values, samples) if digests is not None else None
    return (*values, digest), samples


#: every ``rows`` column but the digest, in table order, then the digest
_ALL_COLUMNS = (
    "task_id, seq, row_id, status, final_score, result, dialogue, raw_attempts, calls, "
    "prompt_tokens, completion_tokens, cost_usd, latency_ms, cassette_key, cache_read_tokens, "
    "cache_creation_tokens, digest"
)


class RowSink(Protocol):
    """Where the scoring pipeline puts finished rows: a :class:`TaskStore`, or a worker's
    fenced writer (:mod:`rubric_engine.engine.workers`)."""

    def add_row(self, task_id: str, row: StoredRow) -> None: ...

    def add_sample(self, task_id: str, sample: StoredSample) -> None:
        """A finished sample of a row still being judged (kept for ``--resume``)."""

    def keep_answer(
        self, task_id: str, row_id: str, where: tuple[int, int, int], tries: list[Any]
    ) -> None:
        """An answered call of a row in flight, ``where`` = (judge, sample, answer number)."""

    def commit(self) -> None: ...


class TaskStore:
    """The task store. Use as a context manager or call :meth:`close`.

    Args:
        path: a SQLite file path, or a ``postgresql://`` URL (str or
            :class:`~rubric_engine.store.PostgresUrl`).

    Raises:
        StoreError: the store cannot be opened, is damaged (a core table missing) or was
            written by a newer engine.
    """

    def __init__(self, path: str | StoreLocation) -> None:
        self.path: StoreLocation = parse_location(path)
        self._backend = _open_backend(self.path)
        self._unsent: list[tuple[Any, ...]] = []  #: rows not sent yet (until the commit)
        self._unsent_samples: list[tuple[Any, ...]] = []
        #: answered calls of rows in flight not sent yet, by (task, row): (judge, sample,
        #: answer) and the tries, made into ``row_attempts`` lines only when sent
        self._unsent_answers: dict[tuple[str, str], list[tuple[tuple[int, int, int], Any]]] = {}
        #: rows whose answered calls were sent to ``row_attempts``: deleted when it is stored
        self._kept: set[tuple[str, str]] = set()
        self._dropped: list[tuple[str, str]] = []
        self._digests: dict[str, RowDigests | None] = {}
        #: each task's planned rows, where its rows' positions are checked (DigestCheck)
        self._planned: dict[str, int | None] = {}
        self._pending = 0
        self._committed = time.monotonic()

    @property
    def backend(self) -> Backend:
        """The open backend, for modules that keep their own tables in the store."""
        return self._backend

    @property
    def connection(self) -> Any:
        """The driver's open connection (``sqlite3`` or ``psycopg``)."""
        return self._backend.connection

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._send()
        finally:
            self._backend.close()

    def task_lock(self, task_id: str) -> AbstractContextManager[None]:
        """Held while a process runs the task; see :meth:`Backend.task_lock`."""
        return self._backend.task_lock(task_id)

    def task_held(self, task_id: str) -> bool:
        """Whether a process holds :meth:`task_lock` now; see :meth:`Backend.task_held`."""
        return self._backend.task_held(task_id)

    # -- writing -----------------------------------------------------------------------------

    def create_task(self, task: TaskRecord) -> None:
        self._backend.execute(
            "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                task.id,
                task.created_at,
                task.finished_at,
                task.state,
                task.rubric_key,
                task.rubric_version,
                task.rubric_status,
                task.rubric_hash,
                _dumps(task.rubric_snapshot),
                task.prompt_version,
                task.prompt_hash,
                task.prompt_system,
                task.engine_version,
                task.analysis_version,
                task.judge_mode,
                task.model,
                _dumps(task.judge_params),
                _dumps(task.inputs),
                task.row_count,
                _dumps(task.extra),
            ),
        )
        self._backend.commit()

    def add_row(self, task_id: str, row: StoredRow, commit_every: int = COMMIT_EVERY_ROWS) -> None:
        """Insert (or, on resume, replace) one finished row.

        Commits every ``commit_every`` rows or every ``COMMIT_INTERVAL_S`` seconds, whichever
        comes first, so a killed run loses at most that much work and never half a row
        (transactions). Rows are sent in ``executemany`` runs, not a statement each: on
        PostgreSQL a commit's rows at the commit (a round trip per row cost more than the
        rest of a replayed row), on SQLite every :data:`SEND_EVERY_ROWS` rows and at the
        commit (~10 µs a row less CPU in a replay). A row not yet committed is lost
        by a kill whether it was sent or not. This store's own reads send the rows first, so
        it reads what it wrote.
        """
        values, samples = row_write(task_id, row, self.digests(task_id))
        self._unsent_samples.extend(samples)
        self._unsent.append(values)
        key = (task_id, row.result.row_id)
        # its answers not sent yet would be committed with the row: they are never written;
        # those sent, and any an earlier run kept of the row, are deleted
        unsent = self._unsent_answers.pop(key, None)
        if unsent is not None or key in self._kept:
            self._kept.discard(key)
            self._dropped.append(key)
        if len(self._unsent) >= SEND_EVERY_ROWS and self._backend.dialect == "sqlite":
            self._send()  # a statement per row costs more; a commit's rows held cost memory
        self._pending += 1
        if self._pending >= commit_every or time.monotonic() - self._committed > COMMIT_INTERVAL_S:
            self.commit()

    def add_sample(self, task_id: str, sample: StoredSample) -> None:
        """Store a finished sample of a row still being judged, so ``--resume`` never asks it
        again (committed with the rows, on the same clock)."""
        self._unsent_samples.append(sample_values(task_id, sample, result_json(sample.result)))

    def keep_answer(
        self, task_id: str, row_id: str, where: tuple[int, int, int], tries: list[Any]
    ) -> None:
        """Keep an answered call of a row in flight (``where``: judge, sample, answer number)
        until the row is stored (docs/stability.md "Resume"). It is written with the next
        rows sent, unless its row is stored before that: one commit then holds the row."""
        self._unsent_answers.setdefault((task_id, row_id), []).append((where, tries))

    def digests(self, task_id: str) -> RowDigests | None:
        """The digests of a task's rows (``None``: stored before digests), worked out once.

        A task whose record names no digest scheme reads as stored before digests only when
        it could have been: it was created before this store took row digests (migration
        ``m011_samples_and_digests``); otherwise the mark was removed from the task record,
        which would turn off the check of every row. A row of such a task that carries a
        digest is refused as it is read (:class:`~rubric_engine.store.digest.DigestCheck`):
        checked there, it costs no read of its own.

        Raises:
            StoreError: the rows are signed and the signing key is not the one set; the task
                record lost its digest mark.
            ConfigurationError: the signing key set is too short.
        """
        if task_id not in self._digests:
            try:
                task = self.task(task_id)
            except TaskNotFoundError:
                return None  # the rows → tasks foreign key refuses its rows at the commit
            digests = RowDigests.for_task(task)
            if digests is None:
                self._check_stored_before_digests(task)
            self._digests[task_id] = digests
            renormalized = task.judge_mode == "renormalize"  # positions of its source task
            self._planned[task_id] = None if renormalized else task.row_count
        return self._digests[task_id]

    def planned(self, task_id: str) -> int | None:
        """The task's planned rows, where its rows' input positions are checked against them
        (:class:`~rubric_engine.store.digest.DigestCheck`), else ``None``."""
        self.digests(task_id)
        return self._planned.get(task_id)

    def _check_stored_before_digests(self, task: TaskRecord) -> None:
        """Raises: StoreError: the task cannot have been stored before digests."""
        since = self._backend.execute(
            "SELECT applied_at FROM migrations WHERE name=?", (DIGESTS_MIGRATION,)
        ).fetchone()
        if since is not None and not _before(task.created_at, str(since[0])):
            raise StoreError(
                f"task {task.id}: its task record names no row digest scheme "
                f"(extra.{DIGESTS_MARK}), yet it was created ({task.created_at}) after the store "
                f"took digests ({since[0]}): the task record was edited, which would turn off "
                "the digest check of every row. Restore the store from a backup (docs/verify.md)"
            )

    def _send(self) -> None:
        if self._unsent_answers:
            answers, self._unsent_answers = self._unsent_answers, {}
            lines = [
                attempt_values(task_id, row_id, *where, tries)
                for (task_id, row_id), kept in answers.items()
                for where, tries in kept
            ]
            self._backend.executemany(UPSERT_ATTEMPT, lines)
            self._kept.update(answers)
        if self._unsent_samples:
            samples, self._unsent_samples = self._unsent_samples, []
            self._backend.executemany(UPSERT_SAMPLE, samples)
        if self._unsent:
            unsent, self._unsent = self._unsent, []
            self._backend.executemany(UPSERT_ROW[self._backend.dialect], unsent)
        if self._dropped:
            dropped, self._dropped = self._dropped, []
            self._backend.executemany(DELETE_ATTEMPTS, dropped)

    def commit(self) -> None:
        self._send()
        self._backend.commit()
        self._pending = 0
        self._committed = time.monotonic()

    def finish_task(self, task_id: str, state: str, extra: dict[str, Any]) -> None:
        """Set the task's end state; ``extra`` is merged into what the task already holds."""
        merged = {**self.task(task_id).extra, **extra}
        self._backend.execute(
            "UPDATE tasks SET state=?, finished_at=?, extra=? WHERE id=?",
            (state, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), _dumps(merged), task_id),
        )
        self.commit()

    def set_state(self, task_id: str, state: str) -> None:
        """Mark a task RUNNING again (``--resume``)."""
        self._backend.execute("UPDATE tasks SET state=? WHERE id=?", (state, task_id))
        self.commit()

    def row_outcomes(self, task_id: str) -> dict[str, str | None]:
        """rowId → the JUDGE_ERROR kind of each stored row (``None`` for a scored row)."""
        self._send()  # rows this store holds back until the commit first
        out: dict[str, str | None] = {}
        query = "SELECT row_id, result FROM rows WHERE task_id=?"
        for row_id, result in self._backend.execute(query, (task_id,)):
            error = decode_column(result, f"task {task_id} row {row_id} result").get("error")
            out[row_id] = error["kind"] if error else None
        return out

    def kept_answers(self, task_id: str) -> dict[tuple[str, int, int], list[list[Any]]]:
        """The answered calls kept of a task's rows in flight (:meth:`keep_answer`):
        (rowId, judge, sample) → each answer's tries, in order, up to the first gap."""
        self._send()
        out: dict[tuple[str, int, int], list[list[Any]]] = {}
        for row_id, judge, sample, answer, tries in kept_answers(self._backend, task_id):
            answers = out.setdefault((row_id, judge, sample), [])
            if answer == len(answers):  # a gap: the answers after it cannot be served in order
                answers.append(tries)
        return out

    def held_usage(self, task_id: str) -> HeldUsage:
        """What the task holds for rows not stored yet and a resumed run will put into them
        without asking again: their scored samples, and the answers kept for calls no scored
        sample covers (:class:`~rubric_engine.store.samples.HeldUsage`)."""
        self._send()
        held, covered = HeldUsage(), set()
        for found in self._backend.execute(HELD_SAMPLES, (task_id,)):
            if parse_result(found[5], task_id, found[1]).status is RowStatus.SCORED:
                covered.add((found[1], int(found[2]), int(found[3])))
                held = held.plus(int(found[7]), int(found[8]), int(found[9]), found[10])
        for where, answers in self.kept_answers(task_id).items():
            if where not in covered:
                for tries in answers:
                    held = held.plus(
                        len(tries),
                        sum(int(t.get("promptTokens") or 0) for t in tries),
                        sum(int(t.get("completionTokens") or 0) for t in tries),
                        sum(float(t.get("costUsd") or 0.0) for t in tries),
                    )
        return held

    def unfinished_samples(
        self, task_id: str, done: Collection[str]
    ) -> dict[str, list[StoredSample]]:
        """The stored samples of a task's rows not in ``done`` (rows ``--resume`` judges):
        rowId → its samples in (judge, sample) order (docs/stability.md "Resume")."""
        self._send()  # samples this store holds back until the commit first
        out: dict[str, list[StoredSample]] = {}
        for found in self._backend.execute(
            f"{SAMPLE_SELECT} WHERE task_id=? ORDER BY row_id, judge, sample", (task_id,)
        ):
            if found[1] not in done:
                result = parse_result(found[5], task_id, found[1])
                out.setdefault(found[1], []).append(stored_sample(found, result))
        return out

    def samples_of(self, task_id: str, row_ids: Collection[str]) -> dict[str, list[StoredSample]]:
        """The stored samples of some rows of a task: rowId → its samples in (judge, sample)
        order (batch mode reads a pass's rows a group at a time, docs/stability.md)."""
        self._send()  # samples this store holds back until the commit first
        return {
            row_id: [stored_sample(found, parse_result(found[5], task_id, row_id)) for found in got]
            for row_id, got in sample_rows(self._backend, task_id, row_ids).items()
        }

    # -- reading -----------------------------------------------------------------------------

    def task(self, task_id: str) -> TaskRecord:
        """Raises: TaskNotFoundError: no such task; names the store and how to list tasks."""
        cursor = self._backend.execute("SELECT * FROM tasks WHERE id=?", (task_id,))
        found = cursor.fetchone()
        if found is None:
            raise TaskNotFoundError(
                f"task {task_id!r} not found in {self.path}; "
                "`rubric-eval tasks --store PATH` lists the tasks"
            )
        names = [d[0] for d in cursor.description]
        data = dict(zip(names, found, strict=True))
        for name in ("rubric_snapshot", "judge_params", "inputs", "extra"):
            data[name] = decode_column(data[name], f"task {task_id} {name}")
        return TaskRecord(**data)

    def tasks(self) -> list[TaskRecord]:
        ids = [r[0] for r in self._backend.execute("SELECT id FROM tasks ORDER BY created_at, id")]
        return [self.task(i) for i in ids]

    def finished_rows(self) -> dict[str, int]:
        """How many rows each task has stored, by task id."""
        self._send()  # rows this store holds back until the commit first
        query = "SELECT task_id, COUNT(*) FROM rows GROUP BY task_id"
        return {task_id: int(n) for task_id, n in self._backend.execute(query)}

    def stored_row_count(self, task_id: str) -> int:
        """How many rows one task has stored."""
        self._send()  # rows this store holds back until the commit first
        query = "SELECT COUNT(*) FROM rows WHERE task_id=?"
        return int(self._backend.execute(query, (task_id,)).fetchone()[0])

    def rows(self, task_id: str, check: DigestCheck | None = None) -> Iterator[StoredRow]:
        """Rows of a task in input order, with their samples, digests checked
        (:meth:`checked_rows`)."""
        for found, samples in self.checked_rows(task_id, with_samples=True, check=check):
            row = f"task {task_id} row {found[2]!r}"
            yield StoredRow(
                seq=found[1],
                result=parse_result(found[5], task_id, found[2]),
                dialogue=decode_column(found[6], f"{row} dialogue"),
                raw_attempts=decode_column(found[7], f"{row} raw_attempts"),
                calls=found[8],
                prompt_tokens=found[9],
                completion_tokens=found[10],
                cost_usd=found[11],
                latency_ms=found[12],
                cassette_key=found[13],
                cache_read_tokens=found[14],
                cache_creation_tokens=found[15],
                samples=tuple(
                    stored_sample(s, parse_result(s[5], task_id, found[2])) for s in samples
                ),
            )

    def checked_rows(
        self,
        task_id: str,
        page: int = 500,
        with_samples: bool = False,
        check: DigestCheck | None = None,
        by: str = "seq",
    ) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
        """Every column of each stored row of a task (table order, the digest last) and, when
        asked or needed for the digest, its ``row_samples`` tuples, in input order
        (``by="seq"``) or in rowId order (``by="row_id"``: code point order on both backends,
        the order a diff merges two tasks' rows in, docs/scale.md).

        Each row's digest is checked as it is read (docs/verify.md); when the last row has
        been read and any did not match, :class:`~rubric_engine.errors.StoreError` names
        them (so a reader that writes a file as it reads writes it through a temporary file).
        Read ``page`` rows per query (keyed on the ``rows_by_seq`` index or the primary key),
        so memory holds one page whatever the task's size: a PostgreSQL cursor keeps its whole
        result client-side, and a streamed report must not hold every row.

        Args:
            check: the caller's own check (``rubric-eval verify``, which names each row's
                problems): each row is checked before it is yielded
                (:attr:`DigestCheck.last`), and nothing is raised at the end.

        Raises:
            StoreError: rows whose digests do not match, or rows without one in a task whose
                rows carry them; the rows are signed and the signing key is not set.
        """
        if by not in ("seq", "row_id"):
            raise ValueError(f"by={by!r}: rows are read by seq or by row_id")
        self._send()  # rows this store holds back until the commit first
        digests = self.digests(task_id)
        own = check is None
        check = DigestCheck(task_id, digests, self.planned(task_id)) if check is None else check
        sampled = digests is not None or with_samples
        after: tuple[Any, ...] = ()  # (seq, row_id) of the last row read
        while True:
            params: tuple[Any, ...]
            if by == "row_id":
                where = "task_id=? AND row_id>?" if after else "task_id=?"
                params = (task_id, after[1], page) if after else (task_id, page)
            else:
                # seq>=? bounds the index range: with the OR alone the database scans the
                # task's rows from the first on every page, and reading a task grows with its
                # square
                where = "task_id=? AND seq>=? AND (seq>? OR row_id>?)" if after else "task_id=?"
                params = (task_id, after[0], after[0], after[1], page) if after else (task_id, page)
            order = "row_id" if by == "row_id" else "seq, row_id"
            found = self._backend.execute(
                f"SELECT {_ALL_COLUMNS} FROM rows WHERE {where} ORDER BY {order} LIMIT ?", params
            ).fetchall()
            samples = sample_rows(self._backend, task_id, [r[2] for r in found]) if sampled else {}
            for row in found:
                mine = samples.get(row[2], [])
                check.row(row[:16], mine, row[16])
                yield tuple(row), mine
            if len(found) < page:
                break
            after = (found[-1][1], found[-1][2])
        if own:
            check.finish()

    def rows_of(
        self, task_id: str, row_ids: Collection[str]
    ) -> dict[str, tuple[tuple[Any, ...], str | None]]:
        """Some stored rows of a task by rowId, each with its digest and position checked as
        :meth:`checked_rows` checks them: rowId → (every column, the digest last; why the row
        is not to be trusted, ``None`` when its checks hold). For pages that show a few rows
        (the review app), which say so rather than show an edited verdict.

        Raises:
            StoreError: the rows are signed and the signing key is not the one set; the task
                record lost its digest mark.
        """
        self._send()  # rows this store holds back until the commit first
        digests, planned = self.digests(task_id), self.planned(task_id)
        wanted, out = list(row_ids), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found = self._backend.execute(
                f"SELECT {_ALL_COLUMNS} FROM rows WHERE task_id=? AND row_id IN ({marks})",
                (task_id, *chunk),
            ).fetchall()
            samples = sample_rows(self._backend, task_id, [r[2] for r in found]) if digests else {}
            for row in found:
                check = DigestCheck(task_id, digests, planned)
                check.row(row[:16], samples.get(row[2], []), row[16])
                try:
                    check.finish()
                    why = None
                except StoreError as exc:
                    why = str(exc)
                out[row[2]] = (tuple(row), why)
        return out

    def result_texts(self, task_id: str) -> Iterator[tuple[str, str]]:
        """``(result, dialogue)`` of each stored row as stored (JSON text, not decoded), in
        input order, digests checked: for writers that copy them (``rows.jsonl``)."""
        for row, _ in self.checked_rows(task_id):
            yield row[5], row[6]

    def select_rows(
        self, task_id: str, columns: str, *, page: int = 500
    ) -> Iterator[tuple[Any, ...]]:
        """``(seq, row_id, *columns)`` of each stored row of a task in input order, digests not
        checked: for readers of what no result depends on (the seqs stored, a first pass over
        metadata field names); readers of results use :meth:`checked_rows`. ``columns``: SQL
        column names, comma-separated, or ``""`` for none.

        Read ``page`` rows per query, keyed on the last row read (``rows_by_seq``), so memory
        holds one page whatever the task's size."""
        self._send()  # rows this store holds back until the commit first
        after: tuple[Any, ...] = ()  # (seq, row_id) of the last row read
        while True:
            # seq>=? bounds the index range (see checked_rows)
            where = "task_id=? AND seq>=? AND (seq>? OR row_id>?)" if after else "task_id=?"
            params = (task_id, after[0], after[0], after[1], page) if after else (task_id, page)
            found = self._backend.execute(
                f"SELECT seq, row_id{', ' if columns else ''}{columns} FROM rows WHERE {where} "
                "ORDER BY seq, row_id LIMIT ?",
                params,
            ).fetchall()
            yield from found
            if len(found) < page:
                return
            after = (found[-1][0], found[-1][1])

    def cassette_keys(self, task_id: str) -> Iterator[str | None]:
        """The cassette key of each stored row of a task, in input order."""
        self._send()  # rows this store holds back until the commit first
        for (key,) in self._backend.execute(
            "SELECT cassette_key FROM rows WHERE task_id=? ORDER BY seq", (task_id,)
        ):
            yield key

    def answer_cassette_keys(self, task_id: str) -> Iterator[str | None] | None:
        """The cassette key of each answer a task's stored rows were given, in input order: a
        sampled row's (or a panel's) one per judge and sample, any other row's its one;
        ``None`` for a task without samples (its :meth:`cassette_keys` are its answers')."""
        self._send()  # rows this store holds back until the commit first
        sampled = "SELECT 1 FROM row_samples WHERE task_id=? LIMIT 1"
        if not list(self._backend.execute(sampled, (task_id,))):
            return None
        query = (
            "SELECT CASE WHEN s.row_id IS NULL THEN r.cassette_key ELSE s.cassette_key END "
            "FROM rows r LEFT JOIN row_samples s ON s.task_id = r.task_id AND s.row_id = r.row_id "
            "WHERE r.task_id=? ORDER BY r.seq, s.judge, s.sample"
        )
        return (key for (key,) in self._backend.execute(query, (task_id,)))

    def report_rows(
        self, task_id: str, page: int = 500
    ) -> Iterator[tuple[RowResult, int, int, int, float | None, float, dict[str, Any], int, int]]:
        """What reports read, in input order: (result, calls, prompt tokens, completion tokens,
        cost, latency ms, dialogue, cache-read tokens, cache-creation tokens), digests checked
        (:meth:`checked_rows`: the raw judge attempts are read for the digest, not kept)."""
        for row, _ in self.checked_rows(task_id, page):
            dialogue = decode_column(row[6], f"task {task_id} row {row[2]!r} dialogue")
            result = parse_result(row[5], task_id, row[2])
            yield (result, *row[8:13], dialogue, *row[14:16])

    def results(self, task_id: str, page: int = 500) -> Iterator[RowResult]:
        """The results of a task's rows in input order, digests checked (:meth:`checked_rows`),
        for readers that count every row's verdict (calibration's observed violation rates).
        Rows are stored in input order, so a large task is read from its first page to its
        last, not a page per row."""
        for row, _ in self.checked_rows(task_id, page):
            yield parse_result(row[5], task_id, row[2])

    def results_and_dialogues(
        self, task_id: str, row_ids: Collection[str]
    ) -> dict[str, tuple[RowResult, dict[str, Any]]]:
        """The result and dialogue of some rows by rowId (a rowId the task does not have is
        left out), digests checked (:meth:`rows_of`): calibration reads its labelled rows this
        way.

        Raises:
            StoreError: a row does not match its digest (see also :meth:`rows_of`).
        """
        out = {}
        for row_id, (row, why) in self.rows_of(task_id, row_ids).items():
            if why is not None:
                raise StoreError(why)
            out[row_id] = (
                parse_result(row[5], task_id, row_id),
                decode_column(row[6], f"task {task_id} row {row_id} dialogue"),
            )
        return out

    def dialogues(self, task_id: str, row_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        """The stored dialogues of some rows, by rowId."""
        self._send()  # rows this store holds back until the commit first
        wanted, out = list(row_ids), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row_id, text in self._backend.execute(
                f"SELECT row_id, dialogue FROM rows WHERE task_id=? AND row_id IN ({marks})",
                (task_id, *chunk),
            ):
                out[row_id] = decode_column(text, f"task {task_id} row {row_id} dialogue")
        return out


def _open_backend(location: StoreLocation) -> Backend:
    """Connect, check the core tables, apply pending migrations.

    Raises:
        StoreError: see :class:`TaskStore`.
    """
    import sqlite3

    errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError, OSError)
    if not isinstance(location, Path):
        try:
            import psycopg

            errors += (psycopg.Error,)
        except ImportError:
            pass  # the backend says how to install it
    backend: Backend
    try:
        if isinstance(location, Path):
            from rubric_engine.store.sqlite import SqliteBackend

            backend = SqliteBackend(location)
        else:
            from rubric_engine.store.postgres import PostgresBackend

            backend = PostgresBackend(location)
    except errors as exc:
        raise _cannot_open(location, exc) from exc
    try:
        tables = backend.tables()
        missing = sorted({"tasks", "rows"} - tables)
        if "meta" in tables and missing:
            raise StoreError(
                f"{location}: the store is damaged (table(s) {', '.join(missing)} missing); "
                "nothing is recreated over it. Restore it from a backup or pass another --store"
            )
        migrate(backend)
    except BaseException as exc:
        with contextlib.suppress(Exception):  # closing must not hide why opening failed
            backend.close()
        if isinstance(exc, errors):
            raise _cannot_open(location, exc) from exc
        raise
    return backend


def _cannot_open(location: StoreLocation, exc: Exception) -> StoreError:
    if isinstance(exc, StoreError):  # already says what is wrong (a full disk)
        return exc
    if isinstance(location, Path):
        from rubric_engine.store.sqlite import unwritable

        full = unwritable(location, exc)  # the file is not broken
        if full is not None:
            return full
        if not location.exists():  # nothing broken: the file cannot be made there
            return StoreError(
                f"{location}: cannot open task store ({exc}): no store file can be made there; "
                "pass a store path in a folder you can write"
            )
    return StoreError(
        f"{location}: cannot open task store ({exc}); pass another store path "
        "(--store; --from/--to for store migrate) or move the broken file away"
    )
