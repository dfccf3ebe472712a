"""A store that cannot be written (a full disk) ends `score` with exit 3 and the way on, not a
traceback; the rows committed before it filled are kept and `--resume` finishes the task.

The full disk is SQLite's own: ``PRAGMA max_page_count`` caps the file 48 KB above its size
when it is opened, which SQLite reports as SQLITE_FULL, "database or disk is full"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.store.sqlite import SqliteBackend
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run

HEALTH = CASES / "health_consult_zh.jsonl"


@pytest.mark.parametrize("send_every", [32, 1])
def test_a_full_store_stops_the_run_with_exit_3_and_resume_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, send_every: int
) -> None:
    """The store fills at a commit (rows sent every 32, the demo's 26 at the commit), or
    while a worker sends its rows (every row sent at once: the error then comes out of the
    run's task group, where it was an ExceptionGroup traceback with exit 1)."""
    monkeypatch.setattr("rubric_engine.store.task_store.SEND_EVERY_ROWS", send_every)
    opened = SqliteBackend.__init__

    def capped(self: SqliteBackend, path: Path) -> None:
        opened(self, path)
        (pages,) = self._db.execute("PRAGMA page_count").fetchone()
        (size,) = self._db.execute("PRAGMA page_size").fetchone()
        room = 12 * 4096 // size  # 48 KB whatever the page size: room for a few rows
        self._db.execute(f"PRAGMA max_page_count={pages + room}")

    store = tmp_path / "s.sqlite"
    args = ("--store", store, "--out", tmp_path / "out", "--display", "none")
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    assert code == 0, out
    monkeypatch.setattr(SqliteBackend, "__init__", capped)
    code, out = run("score", HEALTH, "-r", "health_cs", "--cassettes", CASSETTES, *args)
    assert code == 3 and "Traceback" not in out, out
    assert "the store cannot be written (database or disk is full)" in out, out
    task = out.split("Task ", 1)[1].split()[0]
    assert f"rubric-eval score --resume {task} --store {store}" in out.replace("\n", " "), out
    monkeypatch.setattr(SqliteBackend, "__init__", opened)
    with TaskStore(store) as s:
        kept = len(list(s.rows(task)))
    code, out = run("score", "--resume", task, *args)
    assert code == 0, out
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == len({r["rowId"] for r in rows}) == 26
    assert kept < 26  # the run did not finish before the store filled


def test_a_full_disk_at_a_publish_s_commit_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real full disk fails where SQLite must grow its journal: here, every commit
    import sqlite3

    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]

    class FullDisk:
        def __init__(self, db: sqlite3.Connection) -> None:
            self._db = db

        def __getattr__(self, name: str) -> object:
            return getattr(self._db, name)

        def commit(self) -> None:
            raise full

    opened = SqliteBackend.__init__

    def on_a_full_disk(self: SqliteBackend, path: Path) -> None:
        opened(self, path)
        self._db = FullDisk(self._db)  # type: ignore[assignment]

    store = tmp_path / "s.sqlite"
    code, out = run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store)
    assert code == 0, out
    monkeypatch.setattr(SqliteBackend, "__init__", on_a_full_disk)
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    assert code == 3 and "Traceback" not in out, out
    assert "cannot be written (database or disk is full)" in out and "broken" not in out, out
