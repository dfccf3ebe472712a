"""A report-write failure after the rows are stored is its own exit code (9), not 2, which says
nothing was scored: a script must not re-judge a task that only lacks its files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.errors import ExitCode
from rubric_engine.scoring import ScoreOptions, score
from rubric_engine.scoring.run import ReportFilesError
from rubric_engine.store import TaskStore
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
