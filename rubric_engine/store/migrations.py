"""One ordered list of small, named migrations, applied in order and recorded in the store.

The same list serves both backends (the simonw/llm ``migrations.py`` pattern): each
migration is a function of the backend that runs a few statements; :func:`migrate` applies the
ones a store has not recorded, in list order, in one serialized write, and records each by name
in ``migrations``. ``meta.schema`` keeps the number of migrations applied, which is what
engines from before this list read: they refuse a store with a higher number, and this engine
refuses a store that records a migration it does not know or a higher number (a newer engine
wrote it; upgrade rubric-eval).

Stores written before the list existed (schema 1: tasks and rows; schema 2: + rubric versions)
open as they are: their tables match the first migrations, which only create what is missing.

Adding a table or column: append a migration; never edit or reorder one that has shipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rubric_engine.errors import StoreError
from rubric_engine.formats.canonical import canonical_json
from rubric_engine.formats.jsonl import lone_surrogate_at
from rubric_engine.store.backend import Backend

Migration = Callable[[Backend], None]


def _ddl(db: Backend, script: str) -> None:
    """Run ``;``-separated DDL written in SQLite's words.

    On PostgreSQL ``REAL`` is 4 bytes, so doubles are spelled out (a float must round-trip
    exactly for reports to rebuild byte for byte), and text compares by code point (``COLLATE
    "C"``) as SQLite's does, so ``ORDER BY`` lists tasks and versions in the same order whatever
    the database's locale.
    """
    for statement in script.split(";"):
        if statement.strip():
            if db.dialect == "postgres":
                statement = statement.replace(" REAL", " DOUBLE PRECISION")
                statement = statement.replace(" TEXT", ' TEXT COLLATE "C"')
            db.execute(statement)


def m001_tasks_and_rows(db: Backend) -> None:
    _ddl(
        db,
        """
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
        CREATE INDEX IF NOT EXISTS rows_by_seq ON rows (task_id, seq)
        """,
    )


def m002_rubric_versions(db: Backend) -> None:
    """The rubric registry (:mod:`rubric_engine.rubric.versions`)."""
    _ddl(
        db,
        """
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
        )
        """,
    )


def m003_work_items(db: Backend) -> None:
    """Rows of a ``--workers-only`` task waiting for ``rubric-eval work`` (docs/stores.md).

    ``token`` is the fencing token (+1 at every claim); ``lease_until`` is in seconds since the
    epoch by the database's clock; ``claims`` counts how often the row was handed out.
    """
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS work_items (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            seq INTEGER NOT NULL,
            row_id TEXT NOT NULL,
            dialogue TEXT NOT NULL,
            state TEXT NOT NULL,
            worker TEXT,
            token INTEGER NOT NULL DEFAULT 0,
            lease_until REAL,
            claims INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (task_id, seq)
        );
        CREATE INDEX IF NOT EXISTS work_open ON work_items (task_id, seq) WHERE state <> 'DONE'
        """,
    )


def _append_only(db: Backend, table: str, refusal: str) -> None:
    """Make the database itself refuse every UPDATE and DELETE on ``table`` (triggers)."""
    if db.dialect == "postgres":
        db.execute(
            f"CREATE OR REPLACE FUNCTION {table}_append_only() RETURNS trigger AS $$ "
            f"BEGIN RAISE EXCEPTION '{refusal}'; END; $$ LANGUAGE plpgsql"
        )
        db.execute(
            f"CREATE OR REPLACE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_append_only()"
        )
        return
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_{event.lower()} BEFORE {event} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{refusal}'); END"
        )


def m004_labels(db: Backend) -> None:
    """Human (or other judges') labels per row and requirement, append-only (docs/calibration.md).

    ``seq`` is the insertion order; ``label`` holds the whole label as JSON, the other columns
    are for queries. An edit is a new label whose ``supersedes`` names the old one.
    """
    _ddl(
        db,
        """
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
        CREATE INDEX IF NOT EXISTS labels_by_task ON labels (task_id)
        """,
    )
    _append_only(db, "labels", "labels are append-only: add a label that supersedes it instead")


def m005_calibrations(db: Backend) -> None:
    """Calibration records, pinned to rubric hash, prompt hash, model and parameters."""
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS calibrations (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            task_id TEXT NOT NULL,
            rubric_key TEXT NOT NULL,
            rubric_version INTEGER NOT NULL,
            rubric_hash TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            prompt_hash TEXT NOT NULL,
            model TEXT NOT NULL,
            judge_params TEXT NOT NULL,
            labels TEXT NOT NULL,
            metrics TEXT NOT NULL,
            result TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS calibrations_by_rubric ON calibrations (rubric_key, created_at)
        """,
    )
    _append_only(
        db,
        "calibrations",
        "calibration records are append-only: calibrate again to add a new one",
    )


def m006_review_claims(db: Backend) -> None:
    """Claims on rows under review in ``rubric-eval serve`` (docs/review.md): one live each."""
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS review_claims (
            task_id TEXT NOT NULL,
            row_id TEXT NOT NULL,
            reviewer TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            PRIMARY KEY (task_id, row_id)
        )
        """,
    )


def m007_batch_ledger(db: Backend) -> None:
    """Batch mode's ledger (docs/batch.md): every provider batch of a task and every request in it,
    written before and after each step so a resumed run never submits twice
    (:mod:`rubric_engine.batch.ledger`)."""
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS batch_jobs (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            job_no INTEGER NOT NULL,
            round INTEGER NOT NULL,
            state TEXT NOT NULL,
            provider_status TEXT,
            input_file_id TEXT,
            batch_id TEXT,
            output_file_id TEXT,
            error_file_id TEXT,
            request_count INTEGER NOT NULL,
            byte_count INTEGER NOT NULL,
            counts TEXT NOT NULL DEFAULT '{}',
            updated_at TEXT NOT NULL,
            PRIMARY KEY (task_id, job_no)
        );
        CREATE TABLE IF NOT EXISTS batch_requests (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            custom_id TEXT NOT NULL,
            job_no INTEGER NOT NULL,
            row_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            result TEXT,
            PRIMARY KEY (task_id, custom_id)
        );
        CREATE INDEX IF NOT EXISTS batch_requests_by_row
            ON batch_requests (task_id, row_id, attempt);
        """,
    )


def m008_cached_tokens(db: Backend) -> None:
    """Each row's prompt tokens read from and written to the provider's prompt cache
    (:mod:`rubric_engine.judge.usage`); rows stored before count 0 of each. Like every
    migration it adds only what is missing (a store without a ``migrations`` record runs them
    all again)."""
    have = {column[0] for column in db.execute("SELECT * FROM rows WHERE 1=0").description}
    for column in ("cache_read_tokens", "cache_creation_tokens"):
        if column not in have:
            _ddl(db, f"ALTER TABLE rows ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")


def raw_attempts_text(attempts: Any) -> str:
    """A row's ``raw_attempts`` column: the canonical JSON of its attempts, as UTF-8 can
    hold it. A lone surrogate (U+D800 to U+DFFF alone, which a reply may send as ``\\ud800``
    and JSON decodes to half a character) is written as that escape again; it reads back as
    the same value. A judge's raw reply is stored whatever it holds (its verdict is refused),
    where the store's UTF-8 encoding would raise for the whole batch of rows."""
    text = canonical_json(attempts)
    if lone_surrogate_at(text) is None:
        return text
    # inside a JSON string: the only place a character can be
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


#: rows rewritten per statement batch by :func:`m009_canonical_raw_attempts`
_REWRITE_BATCH = 500


def m009_canonical_raw_attempts(db: Backend) -> None:
    """Every row's ``raw_attempts`` as :func:`raw_attempts_text` writes it. Engines of one
    period stored a replayed response as its cassette line spelled it (spaced, keys in the
    line's order) rather than encoding it again: the same value, other text. Rewritten so
    that equal attempts are equal text in every store. Rows are read in key order, a batch
    at a time, so memory does not grow with the store; a column that is not JSON (edited by
    hand) is left as it is, for the reader to name."""
    after: tuple[str, str] | None = None
    while True:
        if after is None:
            batch = db.execute(
                "SELECT task_id, row_id, raw_attempts FROM rows ORDER BY task_id, row_id "
                f"LIMIT {_REWRITE_BATCH}"
            ).fetchall()
        else:
            batch = db.execute(
                "SELECT task_id, row_id, raw_attempts FROM rows "
                "WHERE task_id > ? OR (task_id = ? AND row_id > ?) "
                f"ORDER BY task_id, row_id LIMIT {_REWRITE_BATCH}",
                (after[0], after[0], after[1]),
            ).fetchall()
        if not batch:
            return
        changed = []
        for task_id, row_id, text in batch:
            try:
                canonical = raw_attempts_text(json.loads(text))
            except (ValueError, RecursionError):
                continue
            if canonical != text:
                changed.append((canonical, task_id, row_id))
        if changed:
            db.executemany(
                "UPDATE rows SET raw_attempts = ? WHERE task_id = ? AND row_id = ?", changed
            )
        after = (batch[-1][0], batch[-1][1])


def m010_review_team(db: Backend) -> None:
    """The review app's team and queues (docs/review.md): reviewer accounts, queues stored with
    their task (settings and the seeded second-review sample), each queued row's review state,
    an append-only log of settle / reopen / skip events, and drafts.

    ``review_items`` is derived from the labels and events of its row, rewritten in the same
    transaction as each answer (:mod:`rubric_engine.review.queue_store`), so a queue page reads
    the rows it lists through an index instead of every label of the task.
    """
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS reviewers (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            revoked_at TEXT,
            token_hash TEXT,
            token_expires_at TEXT,
            password_hash TEXT,
            session_epoch INTEGER NOT NULL DEFAULT 0
        );
        CREATE UNIQUE INDEX IF NOT EXISTS reviewers_by_token ON reviewers (token_hash);
        CREATE TABLE IF NOT EXISTS review_queues (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            name TEXT NOT NULL,
            settings TEXT NOT NULL,
            created_at TEXT NOT NULL,
            created_by TEXT NOT NULL,
            row_count INTEGER NOT NULL,
            PRIMARY KEY (task_id, name)
        );
        CREATE TABLE IF NOT EXISTS review_items (
            task_id TEXT NOT NULL,
            queue TEXT NOT NULL,
            row_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            second INTEGER NOT NULL,
            overridden INTEGER NOT NULL DEFAULT 0,
            disputed INTEGER NOT NULL DEFAULT 0,
            settled INTEGER NOT NULL DEFAULT 0,
            reviews INTEGER NOT NULL DEFAULT 0,
            needed INTEGER NOT NULL,
            state TEXT NOT NULL,
            PRIMARY KEY (task_id, queue, row_id)
        );
        CREATE INDEX IF NOT EXISTS review_items_by_state
            ON review_items (task_id, queue, state, position);
        CREATE INDEX IF NOT EXISTS review_items_by_row ON review_items (task_id, row_id);
        CREATE TABLE IF NOT EXISTS review_events (
            seq INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            row_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            reviewer TEXT NOT NULL,
            at TEXT NOT NULL,
            note TEXT
        );
        CREATE INDEX IF NOT EXISTS review_events_by_row ON review_events (task_id, row_id, seq);
        CREATE INDEX IF NOT EXISTS review_events_by_reviewer
            ON review_events (task_id, reviewer, kind, row_id);
        CREATE TABLE IF NOT EXISTS review_drafts (
            task_id TEXT NOT NULL,
            row_id TEXT NOT NULL,
            reviewer TEXT NOT NULL,
            form TEXT NOT NULL,
            saved_at TEXT NOT NULL,
            PRIMARY KEY (task_id, row_id, reviewer)
        );
        CREATE INDEX IF NOT EXISTS labels_by_task_reviewer
            ON labels (task_id, reviewer, row_id, source);
        CREATE INDEX IF NOT EXISTS labels_by_supersedes ON labels (supersedes)
        """,
    )
    _append_only(
        db, "review_events", "review events are append-only: a reopened row gets a new event"
    )


def m011_samples_and_digests(db: Backend) -> None:
    """Repeated judging and verifiable rows (docs/stability.md, docs/verify.md).

    - ``rows.digest``: each row's digest (:mod:`rubric_engine.store.digest`); empty for rows
      stored before digests, which are never given one afterwards (an edit made before would
      be blessed).
    - ``row_samples``: one line per judge and sample of a sampled row: the sample's own result,
      raw replies and usage. ``judge`` is the judge's place in the panel (1 = the first or only
      one), ``model`` its model.
    - ``row_attempts``: the answered calls of a row still in flight (``answer`` counts them from
      0 within its sample; ``attempts`` is the answer's tries as JSON), so ``--resume`` does not
      pay for them again; removed when the row is stored.
    """
    have = {column[0] for column in db.execute("SELECT * FROM rows WHERE 1=0").description}
    if "digest" not in have:
        _ddl(db, "ALTER TABLE rows ADD COLUMN digest TEXT")
    _ddl(
        db,
        """
        CREATE TABLE IF NOT EXISTS row_samples (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            row_id TEXT NOT NULL,
            judge INTEGER NOT NULL,
            sample INTEGER NOT NULL,
            model TEXT NOT NULL,
            result TEXT NOT NULL,
            raw_attempts TEXT NOT NULL,
            calls INTEGER NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            cost_usd REAL,
            latency_ms REAL NOT NULL,
            cassette_key TEXT,
            cache_read_tokens INTEGER NOT NULL,
            cache_creation_tokens INTEGER NOT NULL,
            PRIMARY KEY (task_id, row_id, judge, sample)
        );
        CREATE TABLE IF NOT EXISTS row_attempts (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            row_id TEXT NOT NULL,
            judge INTEGER NOT NULL,
            sample INTEGER NOT NULL,
            answer INTEGER NOT NULL,
            attempts TEXT NOT NULL,
            PRIMARY KEY (task_id, row_id, judge, sample, answer)
        )
        """,
    )


def m012_labels_by_rubric_seq(db: Backend) -> None:
    """A rubric's labels in the order they were stored, read a page at a time (``labels
    export``, docs/scale.md): without this index a page's query took the rubric's labels by
    ``labels_by_row`` and sorted them all again, so reading them grew with their square."""
    _ddl(db, "CREATE INDEX IF NOT EXISTS labels_by_rubric_seq ON labels (rubric_key, seq)")


def m013_batch_requests_by_job(db: Backend) -> None:
    """A batch job's requests found by the job (``batch import`` counts each job's answers
    and gives its unanswered requests an error; ``--mode batch`` reads a job's requests):
    without this index each of those statements read every request of the store, so an
    import of N rows, in N/8,256 jobs, grew with N² (docs/scale.md)."""
    _ddl(
        db,
        "CREATE INDEX IF NOT EXISTS batch_requests_by_job ON batch_requests (task_id, job_no)",
    )


#: every migration, in the order applied; append only
MIGRATIONS: tuple[Migration, ...] = (
    m001_tasks_and_rows,
    m002_rubric_versions,
    m003_work_items,
    m004_labels,
    m005_calibrations,
    m006_review_claims,
    m007_batch_ledger,
    m008_cached_tokens,
    m009_canonical_raw_attempts,
    m010_review_team,
    m011_samples_and_digests,
    m012_labels_by_rubric_seq,
    m013_batch_requests_by_job,
)
#: what ``meta.schema`` says once every migration is applied
SCHEMA_VERSION = len(MIGRATIONS)
_BOOKKEEPING = (
    "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)


def _state(db: Backend) -> tuple[int | None, set[str]]:
    tables = db.tables()
    schema = None
    if "meta" in tables:
        found = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
        schema = int(found[0]) if found is not None else None
    applied: set[str] = set()
    if "migrations" in tables:
        applied = {name for (name,) in db.execute("SELECT name FROM migrations")}
    return schema, applied


def _refuse_newer(db: Backend, schema: int | None, applied: set[str]) -> None:
    known = {m.__name__ for m in MIGRATIONS}
    unknown = sorted(applied - known)
    if (schema is not None and schema > SCHEMA_VERSION) or unknown:
        which = f" (migrations {', '.join(unknown)})" if unknown else ""
        raise StoreError(
            f"{db.label}: store schema {schema}{which} is newer than this rubric-eval "
            f"understands ({SCHEMA_VERSION}); upgrade rubric-eval"
        )


def pending(db: Backend) -> list[str]:
    """Names of the migrations this store has not recorded, in order.

    Raises:
        StoreError: a newer engine wrote the store.
    """
    schema, applied = _state(db)
    _refuse_newer(db, schema, applied)
    db.commit()
    return [m.__name__ for m in MIGRATIONS if m.__name__ not in applied]


def migrate(db: Backend) -> list[str]:
    """Apply and record the pending migrations; returns their names (empty: up to date).

    Two processes opening a new store at once are serialized (:meth:`Backend.exclusive`); the
    second finds nothing left to do.

    Raises:
        StoreError: a newer engine wrote the store.
    """
    if not pending(db):
        return []
    done: list[str] = []
    with db.exclusive("rubric-eval migrations"):
        db.execute(_BOOKKEEPING)
        schema, applied = _state(db)
        _refuse_newer(db, schema, applied)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for migration in MIGRATIONS:
            if migration.__name__ not in applied:
                migration(db)
                db.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (migration.__name__, now),
                )
                done.append(migration.__name__)
        db.execute("DELETE FROM meta WHERE name='schema'")
        db.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    return done
