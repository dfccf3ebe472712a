"""How a finished row is written: one upsert statement on both backends (SQLite's
``INSERT OR REPLACE`` checked the foreign key for a delete too), new SQLite files made with
32 KB pages (older stores keep theirs). Each keeps what was stored and read before: the same
rows after a row is written again, the same report files from an old store and a new one."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

import rubric_engine.store.sqlite as sqlite_backend
from rubric_engine.store.task_store import TaskStore
from tests.test_store_backends import DEMOS, read_files, score_demo


def test_a_row_stored_again_replaces_the_first_and_only_in_its_task(
    store_at: str, tmp_path: Path
) -> None:
    """A resumed row is stored again under its rowId: the upsert replaces every column (seq
    too) of that task's row; the same rowId in another task is another row."""
    source = score_demo(store_at, *DEMOS[0], tmp_path / "out")
    with TaskStore(store_at) as store:
        task = store.task(source)
        target = task.id + "-again"
        store.create_task(dataclasses.replace(task, id=target, state="RUNNING"))
        first, second = list(store.rows(source))[:2]
        store.add_row(target, first)
        store.commit()
        # another row's columns under the first row's rowId, at another place in the input
        again = dataclasses.replace(
            second,
            seq=7,
            result=second.result.model_copy(update={"row_id": first.result.row_id}),
            cache_read_tokens=11,
        )
        store.add_row(target, again)
        store.commit()
        assert list(store.rows(target)) == [again]
        assert list(store.rows(source))[:2] == [first, second]  # the source task's rows kept


def test_a_row_of_a_task_not_in_the_store_is_still_refused(tmp_path: Path) -> None:
    """The upsert keeps the rows → tasks foreign key checked (``PRAGMA foreign_keys=ON``)."""
    source = score_demo(tmp_path / "s.sqlite", *DEMOS[0], tmp_path / "out")
    with TaskStore(tmp_path / "s.sqlite") as store:
        row = next(store.rows(source))
        store.add_row("no-such-task", row)
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            store.commit()


def test_a_new_sqlite_store_has_32k_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store made before this change (SQLite's 4 KB pages) keeps its page size, takes more
    rows, and rebuilds report files byte for byte equal to a new store's of the same run."""
    new, old = tmp_path / "new.sqlite", tmp_path / "old.sqlite"
    tasks = {"new": score_demo(new, *DEMOS[0], tmp_path / "new")}
    with monkeypatch.context() as patched:  # the engine before: SQLite's default page size
        patched.setattr(sqlite_backend, "NEW_STORE_PAGE_SIZE", 4096)
        tasks["old"] = score_demo(old, *DEMOS[0], tmp_path / "old-first")
    tasks["old-again"] = score_demo(old, *DEMOS[0], tmp_path / "old")  # written by this engine
    for path, size in ((new, sqlite_backend.NEW_STORE_PAGE_SIZE), (old, 4096)):
        with TaskStore(path) as store:
            assert store.connection.execute("PRAGMA page_size").fetchone() == (size,)
    from tests.test_cli import run

    for name, path in (("old", old), ("old-again", old), ("new", new)):
        code, out = run("report", tasks[name], "--store", path, "--out", tmp_path / "re" / name)
        assert code == 0, out
    files = {name: read_files(tmp_path / "re" / name) for name in ("old", "old-again", "new")}
    assert len(files["new"]) == 4
    for name, task in (("old", tasks["old"]), ("old-again", tasks["old-again"])):
        assert _masked(files[name], task) == _masked(files["new"], tasks["new"]), name
    assert files["old-again"] == read_files(tmp_path / "old")  # as the run wrote them


def _masked(files: dict[str, bytes], task: str) -> dict[str, bytes]:
    from tests.test_store_backends import _mask

    return {name: _mask(data, task) for name, data in files.items()}
