"""The SQLite backend: one file, WAL journal (the embedded default)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rubric_engine.errors import StoreError
from rubric_engine.store.backend import Cursor, Dialect, task_busy_message
from rubric_engine.store.location import folder_given

#: the page size (bytes) of a store file made from nothing. A stored row (~5.6 KB with its
#: dialogue and raw replies) overflows SQLite's default 4 KB page into a chain of pages; in
#: 32 KB pages several rows share one: writing 20k replayed rows cost ~2 µs a row less CPU,
#: reading them back ~0.5 µs less, for a file of the same size (16 KB: less gained, a file
#: 14 % bigger; 64 KB: slower again), measured standalone and in the 20k replay
#: (-3 to -4 µs a row). A store made before keeps its own size (WAL cannot change it).
NEW_STORE_PAGE_SIZE = 32768
#: SQLite's page cache per connection, KiB (its default is 2000). With 32 KB pages the
#: default cache raised a 100k-row replay's peak memory by ~14 MB (71 -> 85 MB, in the C
#: heap; 20k rows 66 -> 79.5), with 1000 KiB it stays at the 4 KB pages' level (70 MB)
#: and keeps the CPU saved; reads of a store a row at a time need few pages
PAGE_CACHE_KIB = 1000
#: WAL pages past which the checkpoint thread copies the WAL into the store file: SQLite's
#: own default auto-checkpoint threshold (``SQLITE_DEFAULT_WAL_AUTOCHECKPOINT``)
CHECKPOINT_PAGES = 1000
#: the connection's own auto-checkpoint, kept as a backstop at this many times
#: :data:`CHECKPOINT_PAGES`: it bounds the WAL if the thread lags or cannot run
BACKSTOP_FACTOR = 4


class SqliteBackend:
    """Raises: StoreError: the path is a folder; sqlite3 errors are the caller's to wrap."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        if path.is_dir():
            raise folder_given(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30)
        (pages,) = self._db.execute("PRAGMA page_count").fetchone()
        if pages == 0:  # a new file: its page size is chosen now, for good (WAL keeps it)
            self._db.execute(f"PRAGMA page_size={NEW_STORE_PAGE_SIZE}")
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed row survives a crash of rubric-eval; only an OS crash or
        # power loss can drop the last commits (the file stays consistent). FULL's fsync per
        # commit cost more than the rest of a replayed row.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        (page_size,) = self._db.execute("PRAGMA page_size").fetchone()
        self._checkpoints = Checkpointer(path, CHECKPOINT_PAGES * page_size)
        self._db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_FACTOR * CHECKPOINT_PAGES}")

    @property
    def connection(self) -> sqlite3.Connection:
        return self._db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            self._refuse_unwritable(exc)
            raise

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._db.executemany(sql, rows)
        except sqlite3.OperationalError as exc:
            self._refuse_unwritable(exc)
            raise

    def commit(self) -> None:
        try:
            self._db.commit()
        except sqlite3.OperationalError as exc:
            self._refuse_unwritable(exc)
            raise
        self._checkpoints.nudge()

    def _refuse_unwritable(self, exc: sqlite3.OperationalError) -> None:
        """Raise a full disk or an I/O error as a :class:`StoreError` (exit 3, no traceback);
        any other operational error (a lock, a bad statement) is the caller's to re-raise."""
        refused = unwritable(self.path, exc)
        if refused is not None:
            raise refused from exc

    def rollback(self) -> None:
        self._db.rollback()

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        self.commit()
        try:
            self._db.execute("BEGIN IMMEDIATE")  # one writer at a time, for the whole file
        except sqlite3.OperationalError as exc:
            self._refuse_unwritable(exc)
            raise StoreError(
                f"{self.path}: another process holds the store ({exc}); try again"
            ) from exc
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self.commit()

    def tables(self) -> set[str]:
        query = "SELECT name FROM sqlite_master WHERE type='table'"
        return {name for (name,) in self._db.execute(query)}

    def _task_lock_path(self, task_id: str) -> Path:
        return self.path.with_name(self.path.name + ".locks") / f"{task_id}.lock"  # beside it

    @contextmanager
    def task_lock(self, task_id: str) -> Iterator[None]:
        from filelock import FileLock, Timeout

        path = self._task_lock_path(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        # filelock takes the platform's own lock (POSIX or Windows), so `score` runs on both;
        # not re-entrant within a process: a second run of one task in one process is refused too
        lock = FileLock(path, timeout=0, is_singleton=False, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            raise StoreError(task_busy_message(task_id)) from None
        try:
            yield
        finally:
            lock.release()

    def task_held(self, task_id: str) -> bool:
        from filelock import FileLock, Timeout

        path = self._task_lock_path(task_id)
        if not path.exists():  # every holder creates it first
            return False
        lock = FileLock(path, timeout=0, is_singleton=False, thread_local=False)
        try:
            lock.acquire()  # the OS lock dies with its process: free means nobody runs it
        except Timeout:
            return True
        lock.release()
        return False

    def close(self) -> None:
        try:
            self.commit()  # a full disk: StoreError, and the connection is still closed
        finally:
            self._checkpoints.stop()  # before the close, whose own checkpoint ends the WAL
            self._db.close()


class Checkpointer:
    """Copies a WAL store's committed pages into the store file from a thread of its own.

    In WAL mode a commit only appends to ``NAME-wal``; a *checkpoint* copies those pages into
    the store file and syncs both (``synchronous=NORMAL``), which the committing connection
    otherwise does itself every 1000 pages, waiting on the disk. In a replay those waits were
    ~5 % of the wall time (20 ``fdatasync`` of ~10 ms each per 20k rows). SQLite's
    WAL guide names this remedy: turn automatic checkpoints off (here: raise them to a
    backstop) and "run checkpoints … in a separate thread" (https://sqlite.org/wal.html,
    "Automatic Checkpoint"). The thread runs ``PRAGMA wal_checkpoint(PASSIVE)``, which never
    waits for a lock nor blocks a writer, on a connection of its own (sqlite3 releases the
    GIL while it works), whenever a commit finds the WAL past ``threshold`` bytes.

    Nothing about durability changes: a committed row is in the WAL either way, and a kill
    during a checkpoint is one SQLite recovers from. The thread starts on the first commit
    that finds the WAL past ``threshold`` (a short-lived or read-only store never starts it).
    If it cannot open its connection or a checkpoint fails (a full disk), it stops, and the
    connection's backstop auto-checkpoint bounds the WAL; a full disk reaches the writer
    through its own writes, as a :class:`StoreError`.
    """

    def __init__(self, path: Path, threshold: int) -> None:
        self.path = path
        self.threshold = threshold  #: WAL bytes
        self.runs = 0  #: checkpoints the thread has run
        self._wal = f"{path}-wal"
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def nudge(self) -> None:
        """After a commit: wake the thread (starting it) if the WAL is past the threshold."""
        try:
            if os.stat(self._wal).st_size < self.threshold:
                return
        except OSError:  # no WAL (yet, or any more)
            return
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"rubric-eval checkpoints {self.path.name}", daemon=True
            )
            self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        """End the thread, after the checkpoint it may be running."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=0, check_same_thread=False)
        except sqlite3.Error:
            return  # the backstop checkpoints
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA cache_size=-64")  # a checkpoint copies pages; it need not cache them
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                busy, _, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.runs += not busy  # busy: another connection's checkpoint was running
        except sqlite3.Error:
            return  # as above
        finally:
            db.close()


def unwritable(path: Path, exc: BaseException) -> StoreError | None:
    """The :class:`StoreError` of a store that cannot be written (SQLITE_FULL: a full disk;
    SQLITE_IOERR…), naming it and the fix; ``None`` for any other error."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
        return StoreError(
            f"{path}: the store cannot be written ({exc}); free space on its disk or move the "
            "store to one with room"
        )
    return None
