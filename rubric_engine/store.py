"""The task store: one SQLite file (SPEC §3, issue "task store").

A **task** keeps everything needed to rebuild its report without reading current files: the
rubric key, version, status, full snapshot and content hash; the prompt version, hash and the
rendered system prompt; the engine version; the judge mode, model and parameters; the inputs.
Each **row** keeps its dialogue, the raw judge responses of every attempt, the normalized
result (referenceBasis, scores, warnings), tokens, cost and latency.

Rows are committed in small batches as they finish, so an interrupted run keeps its work.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubric_engine.canonical import canonical_json
from rubric_engine.errors import StoreError, TaskNotFoundError
from rubric_engine.results import RowResult

#: 2 added ``rubric_versions`` (the rubric registry, :mod:`rubric_engine.registry`).
SCHEMA_VERSION = 2
#: a finished row is committed at most this many seconds after it was stored
COMMIT_INTERVAL_S = 0.5
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    state TEXT NOT NULL,
    rubric_key TEXT NOT NULL,
    rubric_version INTEGER NOT NULL,
    rubric_status TEXT NOT NULL,
    rubric_hash TEXT NOT NULL,
    rubric_snapshot TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    prompt_system TEXT NOT NULL,
    engine_version TEXT NOT NULL,
    analysis_version TEXT NOT NULL,
    judge_mode TEXT NOT NULL,
    model TEXT NOT NULL,
    judge_params TEXT NOT NULL,
    inputs TEXT NOT NULL,
    row_count INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS rows (
    task_id TEXT NOT NULL REFERENCES tasks(id),
    seq INTEGER NOT NULL,
    row_id TEXT NOT NULL,
    status TEXT NOT NULL,
    final_score INTEGER,
    result TEXT NOT NULL,
    dialogue TEXT NOT NULL,
    raw_attempts TEXT NOT NULL,
    calls INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL,
    latency_ms REAL NOT NULL,
    cassette_key TEXT,
    PRIMARY KEY (task_id, row_id)
);
CREATE INDEX IF NOT EXISTS rows_by_seq ON rows (task_id, seq);
CREATE TABLE IF NOT EXISTS rubric_versions (
    rubric_key TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    source TEXT,
    published_at TEXT NOT NULL,
    retired_at TEXT,
    PRIMARY KEY (rubric_key, version)
);
"""


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


def _row_result(text: str, task_id: str) -> RowResult:
    try:
        return RowResult.model_validate_json(text)
    except ValidationError as exc:
        raise StoreError(
            f"task {task_id}: a stored row result is not a valid result "
            f"({exc.errors()[0]['msg']}); the store was changed by hand. Restore it from a backup."
        ) from exc


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


@dataclass(frozen=True)
class StoredRow:
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


class TaskStore:
    """SQLite task store. Use as a context manager or call :meth:`close`.

    Raises:
        StoreError: the file cannot be opened or was written by a newer schema.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(
                f"{self.path} is a folder; --store takes the path of a store file, e.g. "
                f"{self.path / 'store.sqlite'}"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a committed row survives a crash of rubric-eval; only an OS crash
            # or power loss can drop the last commits (the file stays consistent). FULL's fsync
            # per commit cost more than the rest of a replayed row.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master")}
            missing = sorted({"tasks", "rows"} - tables)
            if "meta" in tables and missing:
                raise StoreError(
                    f"{self.path}: the store is damaged (table(s) {', '.join(missing)} missing); "
                    "nothing is recreated over it. Restore it from a backup or pass another --store"
                )
            self._db.executescript(_SCHEMA)
            found = self._db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if found is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                self._db.commit()
            elif int(found[0]) < SCHEMA_VERSION:  # the script above added the new tables
                self._db.execute(
                    "UPDATE meta SET value=? WHERE name='schema'", (str(SCHEMA_VERSION),)
                )
                self._db.commit()
            elif int(found[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: store schema {found[0]} is newer than this "
                    f"rubric-eval understands ({SCHEMA_VERSION}); upgrade rubric-eval"
                )
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(
                f"{self.path}: cannot open task store ({exc}); pass another "
                "--store path or move the broken file away"
            ) from exc
        self._pending = 0
        self._committed = time.monotonic()

    @property
    def connection(self) -> sqlite3.Connection:
        """The open SQLite connection, for modules that keep their own tables here."""
        return self._db

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.commit()
        self._db.close()

    # -- writing -----------------------------------------------------------------------------

    def create_task(self, task: TaskRecord) -> None:
        self._db.execute(
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
        self._db.commit()

    def add_row(self, task_id: str, row: StoredRow, commit_every: int = 25) -> None:
        """Insert (or, on resume, replace) one finished row.

        Commits every ``commit_every`` rows or every ``COMMIT_INTERVAL_S`` seconds, whichever
        comes first, so a killed run loses at most that much work and never half a row
        (SQLite transactions).
        """
        r = row.result
        self._db.execute(
            "INSERT OR REPLACE INTO rows VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                task_id,
                row.seq,
                r.row_id,
                str(r.status),
                r.final_score,
                _dumps(r.to_json_dict()),
                _dumps(row.dialogue),
                _dumps(row.raw_attempts),
                row.calls,
                row.prompt_tokens,
                row.completion_tokens,
                row.cost_usd,
                row.latency_ms,
                row.cassette_key,
            ),
        )
        self._pending += 1
        if self._pending >= commit_every or time.monotonic() - self._committed > COMMIT_INTERVAL_S:
            self.commit()

    def commit(self) -> None:
        self._db.commit()
        self._pending = 0
        self._committed = time.monotonic()

    def finish_task(self, task_id: str, state: str, extra: dict[str, Any]) -> None:
        """Set the task's end state; ``extra`` is merged into what the task already holds."""
        merged = {**self.task(task_id).extra, **extra}
        self._db.execute(
            "UPDATE tasks SET state=?, finished_at=?, extra=? WHERE id=?",
            (state, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), _dumps(merged), task_id),
        )
        self.commit()

    def set_state(self, task_id: str, state: str) -> None:
        """Mark a task RUNNING again (``--resume``)."""
        self._db.execute("UPDATE tasks SET state=? WHERE id=?", (state, task_id))
        self.commit()

    def row_outcomes(self, task_id: str) -> dict[str, str | None]:
        """rowId → the JUDGE_ERROR kind of each stored row (``None`` for a scored row)."""
        out: dict[str, str | None] = {}
        query = "SELECT row_id, result FROM rows WHERE task_id=?"
        for row_id, result in self._db.execute(query, (task_id,)):
            error = decode_column(result, f"task {task_id} row {row_id} result").get("error")
            out[row_id] = error["kind"] if error else None
        return out

    # -- reading -----------------------------------------------------------------------------

    def task(self, task_id: str) -> TaskRecord:
        """Raises: TaskNotFoundError: no such task; names the store and how to list tasks."""
        cursor = self._db.execute("SELECT * FROM tasks WHERE id=?", (task_id,))
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
        ids = [r[0] for r in self._db.execute("SELECT id FROM tasks ORDER BY created_at, id")]
        return [self.task(i) for i in ids]

    def finished_rows(self) -> dict[str, int]:
        """How many rows each task has stored, by task id."""
        return dict(self._db.execute("SELECT task_id, COUNT(*) FROM rows GROUP BY task_id"))

    def rows(self, task_id: str) -> Iterator[StoredRow]:
        """Rows of a task in input order."""
        for found in self._db.execute(
            "SELECT seq, result, dialogue, raw_attempts, calls, prompt_tokens, completion_tokens,"
            " cost_usd, latency_ms, cassette_key FROM rows WHERE task_id=? ORDER BY seq",
            (task_id,),
        ):
            yield StoredRow(
                seq=found[0],
                result=_row_result(found[1], task_id),
                dialogue=decode_column(found[2], f"task {task_id} row dialogue"),
                raw_attempts=decode_column(found[3], f"task {task_id} row raw_attempts"),
                calls=found[4],
                prompt_tokens=found[5],
                completion_tokens=found[6],
                cost_usd=found[7],
                latency_ms=found[8],
                cassette_key=found[9],
            )

    def cassette_keys(self, task_id: str) -> Iterator[str | None]:
        """The cassette key of each stored row of a task, in input order."""
        for (key,) in self._db.execute(
            "SELECT cassette_key FROM rows WHERE task_id=? ORDER BY seq", (task_id,)
        ):
            yield key

    def report_rows(
        self, task_id: str
    ) -> Iterator[tuple[RowResult, int, int, int, float | None, float, dict[str, Any]]]:
        """What reports read, in input order: (result, calls, prompt tokens, completion tokens,
        cost, latency ms, dialogue); never the raw judge attempts."""
        for found in self._db.execute(
            "SELECT result, calls, prompt_tokens, completion_tokens, cost_usd, latency_ms, "
            "dialogue FROM rows WHERE task_id=? ORDER BY seq",
            (task_id,),
        ):
            dialogue = decode_column(found[6], f"task {task_id} row dialogue")
            yield (_row_result(found[0], task_id), *found[1:6], dialogue)

    def dialogues(self, task_id: str, row_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        """The stored dialogues of some rows, by rowId."""
        wanted, out = list(row_ids), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row_id, text in self._db.execute(
                f"SELECT row_id, dialogue FROM rows WHERE task_id=? AND row_id IN ({marks})",
                (task_id, *chunk),
            ):
                out[row_id] = decode_column(text, f"task {task_id} row {row_id} dialogue")
        return out
