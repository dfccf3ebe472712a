"""A report-write failure after the rows are stored is its own exit code (9), not 2, which says
nothing was scored: a script must not re-judge a task that only lacks its files."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.engine.run import ReportFilesError
from rubric_engine.errors import ExitCode
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run


def test_rows_stored_but_files_not_written_is_exit_9(tmp_path: Path) -> None:
    out, store = tmp_path / "out", tmp_path / "s.sqlite"

    def block_the_folder(task_id: str, rows: int) -> None:
        (out / "report.md").mkdir()  # appears after the output check, while rows are judged

    options = ScoreOptions(
        inputs=[CASES / "health_consult_zh.jsonl"],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        cassettes=CASSETTES,
        store=store,
        out=out,
    )
    with pytest.raises(ReportFilesError) as info:
        score(options, on_start=block_the_folder)
    assert info.value.exit_code == ExitCode.REPORT_NOT_WRITTEN == 9
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        assert task.state == "COMPLETED"
    code, printed = run("report", task.id, "--store", store, "--out", tmp_path / "again")
    assert code == 0 and (tmp_path / "again" / "report.md").is_file(), printed


def _scored_demo(tmp_path: Path) -> tuple[Path, str]:
    """The health demo scored from its cassettes into ``tmp_path/s.sqlite``: (store, task id)."""
    store = tmp_path / "s.sqlite"
    code, printed = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--cassettes", CASSETTES, "--store", store, "--out", tmp_path / "first",
        "--display", "none",
    )  # fmt: skip
    assert code == 0, printed
    return store, printed.rsplit("task id: ", 1)[1].split()[0]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_report_out_that_cannot_be_written_is_exit_9_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report TASK --out DIR` on a disk that fills up while the files are written says so
    with exit 9, no traceback, and leaves the store as it was."""
    store, task_id = _scored_demo(tmp_path)
    import os

    fdopen = os.fdopen

    class FillsUp:  # the first report file's first chunk finds the disk full
        def __init__(self, file: Any) -> None:
            self.file = file

        def __enter__(self) -> FillsUp:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def writelines(self, chunks: Any) -> None:
            for _ in chunks:
                raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: FillsUp(fdopen(*a, **k)))
    code, printed = run("report", task_id, "--store", store, "--out", tmp_path / "full")
    monkeypatch.undo()
    assert code == ExitCode.REPORT_NOT_WRITTEN, printed
    assert "No space left on device" in printed and "could not be written to" in printed, printed
    assert "store is unchanged" in printed and "another --out" in printed, printed
    code, printed = run("report", task_id, "--store", store, "--out", tmp_path / "again")
    assert code == 0 and (tmp_path / "again" / "report.json").is_file(), printed


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_printed_output_on_a_full_disk_is_exit_9_without_a_traceback(tmp_path: Path) -> None:
    # `report TASK > /dev/full` (and export, tasks …) gave an OSError traceback, exit 1
    import subprocess
    import sys

    store, task = _scored_demo(tmp_path)
    for args in (("report", task, "--format", "html"), ("tasks",)):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "rubric_engine.cli", *args, "--store", str(store)],
                stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
            )  # fmt: skip
        assert done.returncode == ExitCode.REPORT_NOT_WRITTEN, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert "output could not be written (No space left on device)" in done.stderr
