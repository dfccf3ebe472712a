"""`serve` on a store another process is writing to: new rows show on reload, and
reviews written meanwhile never corrupt the store (SQLite WAL, one short transaction each)."""

from __future__ import annotations

import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rubric_engine.report.stored import load_task

pytest.importorskip("starlette", reason="the serve extra is not installed")
from rubric_engine.labels.store import read_labels
from rubric_engine.review.accounts import add_reviewer
from rubric_engine.serve.app import ServeConfig, create_app
from rubric_engine.store.task_store import TaskStore
from tests.conftest import ROOT
from tests.serve_helpers import Person, answer_form, make_queue, publish, score_demo

#: copies a finished task's rows, one commit per row, into a new RUNNING task: a scoring run as
#: seen from the store, slowed down so the reader sees it half done. After rows 1, 9 and 17 it
#: says so on stdout and waits for the reader's go on stdin, so the reader sees those partial
#: states however slowly a loaded machine renders a page (a fixed pace alone missed them).
CHECKPOINTS = (1, 9, 17)
WRITER = f"""
import dataclasses, sys, time
from rubric_engine.store.task_store import TaskStore
store_path, source, target = sys.argv[1:4]
with TaskStore(store_path) as store:
    task = store.task(source)
    store.create_task(dataclasses.replace(task, id=target, state="RUNNING", finished_at=None))
    for n, row in enumerate(list(store.rows(source)), 1):
        store.add_row(target, row, commit_every=1)
        if n in {CHECKPOINTS}:
            print(n, flush=True)
            sys.stdin.readline()
        time.sleep(0.08)
    store.finish_task(target, "COMPLETED", {{}})
"""


def _line(writer: subprocess.Popen[str], deadline: float) -> str:
    """The writer's next stdout line ("" once it closed), waiting at most until ``deadline``."""
    assert writer.stdout is not None
    ready = select.select([writer.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]
    assert ready, "the writer said nothing before the deadline"
    return writer.stdout.readline().strip()


def test_new_rows_show_on_reload_and_the_store_stays_sound(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    publish(store, "airline_cs.yaml")
    source = score_demo(store, "airline_tau2_dev.json", "airline_cs", tmp_path / "out")
    target = "20990101-000000-abcdef"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), source, target],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    with TaskStore(store) as opened:
        add_reviewer(opened.backend, "alice", "reviewer")
        results = [r.result for r in opened.rows(source)]
        rubric = load_task(opened, source).rubric
    make_queue(str(store), source, second_review=0)
    client = Person(create_app(ServeConfig(store)), str(store), "alice")
    row_count = re.compile(rf'<tr data-task="{target}">.*?<td class="n rows">(\d+)/25</td>', re.S)
    seen: list[int] = []
    reviewed = 0
    deadline = time.monotonic() + 60
    try:
        assert _line(writer, deadline) == "1"  # the reader starts once the first row is in
        writer.stdin.write("go\n")
        writer.stdin.flush()
        while writer.poll() is None and time.monotonic() < deadline:
            page = client.get("/")
            assert page.status_code == 200
            found = row_count.search(page.text)
            if found:
                seen.append(int(found.group(1)))
            if select.select([writer.stdout], [], [], 0)[0]:
                at = _line(writer, deadline)
                if at:  # the writer waits at a checkpoint: the page shows exactly that count
                    found = row_count.search(client.get("/").text)
                    assert found and int(found.group(1)) == int(at)
                    seen.append(int(at))
                    writer.stdin.write("go\n")
                    writer.stdin.flush()
            if reviewed < len(results):  # write labels while the other process writes rows
                result = results[reviewed]
                answer = client.post(
                    f"/tasks/{source}/review/{result.row_id}", answer_form(result, rubric)
                )
                assert answer.status_code == 200, answer.text[:500]
                reviewed += 1
        assert writer.wait(timeout=30) == 0, writer.stderr.read() if writer.stderr else ""
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    final = re.search(
        rf'<tr data-task="{target}">.*?<td>(\w+)</td>\s*<td class="n rows">(\d+)/25',
        client.get("/").text,
        re.S,
    )
    assert final and final.groups() == ("COMPLETED", "25")
    assert len(set(seen)) >= 3 and seen == sorted(seen)  # partial states seen, never going back
    assert 0 < min(seen) < 25
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT COUNT(*) FROM rows WHERE task_id=?", (target,)).fetchone() == (25,)
    db.close()
    with TaskStore(store) as opened:
        labels = read_labels(opened.backend, task_id=source)
    assert len({lab.row_id for lab in labels}) == reviewed
