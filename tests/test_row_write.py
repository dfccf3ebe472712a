"""How a finished row is written (issue 18, per-row CPU of a replay): one upsert statement on
both backends (SQLite's ``INSERT OR REPLACE`` checked the foreign key for a delete too), which
keeps what was stored and read before."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from rubric_engine.store import TaskStore
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
