"""`rubric-eval tasks` tells a RUNNING task whose process was killed (nobody holds its task
lock) from one that is running, on both store backends, without changing the stored state."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from rubric_engine.engine import task_lock
from rubric_engine.store.location import parse_location
from rubric_engine.store.task_store import TaskStore
from tests.test_cli import run
from tests.test_store_backends import DEMOS, score_demo


def _hold(store: str, task_id: str, held: object, release: object) -> None:
    with task_lock(parse_location(store), task_id):
        held.set()  # type: ignore[attr-defined]
        release.wait(60)  # type: ignore[attr-defined]


def test_tasks_marks_a_killed_running_task_stale(store_at: str, tmp_path: Path) -> None:
    task_id = score_demo(store_at, *DEMOS[0], tmp_path / "out")
    with TaskStore(parse_location(store_at)) as opened:
        opened.set_state(task_id, "RUNNING")  # what a SIGKILL mid-run leaves behind
    code, out = run("tasks", "--store", store_at)
    assert code == 0, out
    assert f"RUNNING (stale: no process holds it; score --resume {task_id})" in out
    # its report says what RUNNING may mean and how to finish it
    code, out = run("report", task_id, "--store", store_at, "--format", "md")
    assert code == 0, out
    assert "**State: RUNNING**" in out
    assert f"the run was interrupted: `rubric-eval score --resume {task_id}` judges" in out
    # another process running it: plain RUNNING
    context = multiprocessing.get_context("spawn")
    held, release = context.Event(), context.Event()
    worker = context.Process(target=_hold, args=(store_at, task_id, held, release))
    worker.start()
    try:
        assert held.wait(60)
        code, out = run("tasks", "--store", store_at)
        assert code == 0 and "RUNNING" in out and "stale" not in out, out
    finally:
        release.set()
        worker.join(60)
    with TaskStore(parse_location(store_at)) as opened:
        assert opened.task(task_id).state == "RUNNING"  # listing changed nothing
        assert not opened.task_held(task_id)
    with task_lock(parse_location(store_at), task_id):  # a listing never took the lock
        pass
