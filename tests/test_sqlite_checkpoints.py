"""The SQLite store's checkpoint thread: a commit no longer waits on the disk while
the WAL is copied into the store file; the thread does it, the connection's own
auto-checkpoint stays as a backstop, and nothing committed is lost."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from rubric_engine.store import sqlite as sqlite_store
from rubric_engine.store.sqlite import SqliteBackend

PAGE = sqlite_store.NEW_STORE_PAGE_SIZE
BLOB = b"x" * (PAGE // 2)  # two rows a page


def _write(backend: SqliteBackend, rows: int, start: int = 0) -> None:
    backend.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER PRIMARY KEY, b BLOB)")
    for n in range(start, start + rows):
        backend.execute("INSERT INTO t VALUES (?, ?)", (n, BLOB))
        backend.commit()


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rubric-eval checkpoints")]


def _wait_for(condition: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_the_thread_copies_the_wal_into_the_store_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_PAGES", 16)
    monkeypatch.setattr(sqlite_store, "BACKSTOP_FACTOR", 1000)  # the backstop never fires here
    path = tmp_path / "store.sqlite"
    backend = SqliteBackend(path)
    try:
        _write(backend, 2)  # a few WAL pages: under the threshold, no thread
        assert backend._checkpoints.runs == 0 and not _checkpoint_threads()
        before = path.stat().st_size
        _write(backend, 100, start=2)
        assert _checkpoint_threads(), "a WAL past the threshold starts the thread"
        assert _wait_for(lambda: backend._checkpoints.runs > 0)
        # only a checkpoint writes pages into the store file while the connection is open
        assert _wait_for(lambda: path.stat().st_size >= before + 10 * PAGE)
    finally:
        backend.close()
    assert not _checkpoint_threads(), "close ends the thread"
    assert not Path(f"{path}-wal").exists()  # the last connection's close ended the WAL
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*), min(n), max(n) FROM t").fetchone() == (102, 0, 101)


def test_without_the_thread_the_backstop_bounds_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_PAGES", 4)
    monkeypatch.setattr(sqlite_store, "BACKSTOP_FACTOR", 4)
    monkeypatch.setattr(sqlite_store.Checkpointer, "nudge", lambda self: None)  # never starts
    path = tmp_path / "store.sqlite"
    backend = SqliteBackend(path)
    try:
        _write(backend, 200)  # 100 pages
        assert not _checkpoint_threads()
        # the WAL restarts from its head after each auto-checkpoint at 16 pages: it never
        # holds more than those and one commit's pages (a row, the table's b-tree, a header)
        assert os.stat(f"{path}-wal").st_size < (16 + 8) * (PAGE + 24)
    finally:
        backend.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (200,)


def test_a_thread_that_cannot_open_its_connection_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_PAGES", 4)
    monkeypatch.setattr(sqlite_store, "BACKSTOP_FACTOR", 4)
    path = tmp_path / "store.sqlite"
    backend = SqliteBackend(path)  # the main connection is open before the connect fails
    real_connect = sqlite3.connect

    def refuse_in_thread(*args: object, **kwargs: object) -> sqlite3.Connection:
        if threading.current_thread() is not threading.main_thread():
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store.sqlite3, "connect", refuse_in_thread)
    try:
        _write(backend, 200)
        assert backend._checkpoints.runs == 0
        assert os.stat(f"{path}-wal").st_size < (16 + 8) * (PAGE + 24)  # the backstop
    finally:
        backend.close()
    monkeypatch.undo()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (200,)
