"""Report files and output paths: checked before judging, written atomically, and
a finished task's files can always be written again."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.report.render.output import LeftoverFilesWarning, write_atomic
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run, score_demo

FILES = ("report.json", "report.md", "report.html", "rows.jsonl")


def test_resume_of_a_complete_task_writes_its_files_again_and_exits_0(tmp_path: Path) -> None:
    # a kill between marking the task COMPLETED and writing its files left no report, and a
    # further --resume refused with exit 2 ("nothing to resume")
    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    assert code == 0, out
    task_id = out.rsplit("task id: ", 1)[1].split()[0]
    first = {name: (tmp_path / "out" / name).read_bytes() for name in FILES}
    for name in FILES[1:]:
        (tmp_path / "out" / name).unlink()
    (tmp_path / "out" / "report.json").write_text('{"half": ', encoding="utf-8")
    code, out = run("score", "--resume", task_id, "--store", store)
    assert code == 0, out
    assert f"task {task_id} was already complete: nothing was judged" in out
    assert {name: (tmp_path / "out" / name).read_bytes() for name in FILES} == first
    with TaskStore(store) as opened:
        assert opened.task(task_id).state == "COMPLETED"


def test_a_report_file_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    target.write_text("old\n", encoding="utf-8")

    def chunks() -> object:
        yield "new line 1\n"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_atomic(target, chunks())  # type: ignore[arg-type]
    assert target.read_text("utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temp file left
    write_atomic(target, ["a\n", "b\n"])
    assert target.read_text("utf-8") == "a\nb\n"


def test_a_temp_file_left_by_a_killed_writer_is_removed_and_files_are_not_private(
    tmp_path: Path,
) -> None:
    """kill -9 while a report file is written leaves its ``.NAME.PID.XXXX.tmp``; the next
    write of that file removes it (the writer is gone), never a live writer's. The written
    file has the usual permissions (0666 less the umask), not the temp file's 0600."""
    import os
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    orphan = tmp_path / f".rows.jsonl.{gone.stdout.strip()}.abc123.tmp"
    orphan.write_text("half a file", "utf-8")
    live = tmp_path / f".rows.jsonl.{os.getppid()}.def456.tmp"  # a running process's
    live.write_text("being written", "utf-8")
    other = tmp_path / f".report.md.{gone.stdout.strip()}.ghi789.tmp"  # another file's
    other.write_text("x", "utf-8")
    with pytest.warns(LeftoverFilesWarning, match=orphan.name):
        write_atomic(tmp_path / "rows.jsonl", "a\n")
    assert not orphan.exists() and live.exists() and other.exists()
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "rows.jsonl").stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("where", ["file", "devnull", "folder-in-place"])
def test_report_out_paths_that_cannot_hold_the_files_are_clear_errors(
    tmp_path: Path, where: str
) -> None:
    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    task_id = out.rsplit("task id: ", 1)[1].split()[0]
    target = {"file": tmp_path / "existing.txt", "devnull": Path("/dev/null")}.get(
        where, tmp_path / "reports"
    )
    if where == "file":
        target.write_text("keep me", encoding="utf-8")
    if where == "folder-in-place":
        (target / "report.md").mkdir(parents=True)
    code, out = run("report", task_id, "--store", store, "--out", target)
    assert code == 2, out
    assert "Traceback" not in out
    expected = "inside it is a folder" if where == "folder-in-place" else "is a file, not a folder"
    assert expected in out, out
    if where == "file":
        assert target.read_text("utf-8") == "keep me"


def test_score_checks_the_report_folder_before_judging(tmp_path: Path) -> None:
    # before: a folder named report.json inside --out passed the check, every row was
    # judged, and writing the report ended in a traceback
    store = tmp_path / "s.sqlite"
    (tmp_path / "out" / "report.json").mkdir(parents=True)
    code, out = score_demo(tmp_path, store)
    assert code == 2 and "report.json inside it is a folder" in out, out
    with TaskStore(store) as opened:
        assert opened.tasks() == []  # nothing was judged


def test_after_judging_a_write_failure_keeps_the_task_id_and_says_how_to_rebuild(
    tmp_path: Path,
) -> None:
    from rubric_engine.engine.run import ReportFilesError

    out = tmp_path / "out"

    def block_the_folder(task_id: str, rows: int) -> None:
        (out / "report.html").mkdir()  # appears while the rows are judged

    options = ScoreOptions(
        inputs=[CASES / "health_consult_zh.jsonl"],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        cassettes=CASSETTES,
        store=tmp_path / "s.sqlite",
        out=out,
    )
    with pytest.raises(ReportFilesError) as info:
        score(options, on_start=block_the_folder)
    with TaskStore(tmp_path / "s.sqlite") as opened:
        (task,) = opened.tasks()
    message = str(info.value)
    assert f"task {task.id} is stored" in message
    assert f"rubric-eval report {task.id} --store" in message and "--out DIR" in message


def test_schema_out_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    code, out = run("rubric", "schema", "--out", tmp_path)
    assert code == 2 and "is a folder; --out takes a file path" in out, out
    code, out = run("rubric", "schema", "--out", tmp_path / "schema.json")
    assert code == 0 and (tmp_path / "schema.json").read_text("utf-8").startswith("{")


def test_the_pass_rate_is_rounded_once(tmp_path: Path) -> None:
    # 1 of 26 passed: 0.0385 in report.json; it read 3.9% (0.0385 rounded again), not 3.85%
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite")
    assert code == 0, out
    report = (tmp_path / "out" / "report.json").read_text("utf-8")
    assert '"passRate": 0.0385' in report
    markdown = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "- Pass rate: 3.85% (1 of 26" in markdown and "3.9%" not in markdown
    assert "3.85%" in (tmp_path / "out" / "report.html").read_text("utf-8")
    assert "pass rate 3.85%" in out


def test_a_replayed_report_says_where_its_answers_came_from(tmp_path: Path) -> None:
    # before: headed "Judge: openai/gpt-4o-mini" like a model's run, and the deliberately
    # worse set's report looked the same as the normal one
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite")
    assert code == 0, out
    markdown = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "- Answers: replayed from cassettes, not from a call to `openai/gpt-4o-mini`" in markdown
    assert "26 row(s) authored by rubric-eval developers (Claude, reading each dialogue)" in (
        markdown
    )
    assert "answers replayed from cassettes" in (tmp_path / "out" / "report.html").read_text()
    worse = tmp_path / "worse"
    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--store", tmp_path / "s.sqlite", "--cassettes", CASSETTES.parent / "cassettes-worse",
        "--out", worse,
    )  # fmt: skip
    assert code == 0, out
    assert "DELIBERATELY WORSE" in (worse / "report.md").read_text("utf-8")
    assert "written to be worse" in out


def test_ctrl_c_while_the_report_files_are_written_says_the_task_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row is stored and the task COMPLETED before the files are written; Ctrl-C there
    used to say "interrupted … --resume finishes the task". It now says the task is complete
    and how to write its files (exit 130 still: the command did not finish)."""
    from rubric_engine.engine import run as scoring_run

    def interrupted(*_: object, **__: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring_run, "_write_files", interrupted)
    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    assert code == 130, out
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        assert task.state == "COMPLETED"
    assert "interrupted while the report files were written" in out and "COMPLETED" in out
    assert f"rubric-eval report {task.id}" in out and "--resume" not in out, out


def test_a_report_folder_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a failure (or a kill) while the third file was written left rows.jsonl and report.md of
    # the new run beside report.json and report.html of the old one
    from rubric_engine.report import load_task, report_from_task, stored

    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    assert code == 0, out
    first = {name: (tmp_path / "out" / name).read_bytes() for name in FILES}
    worse = CASSETTES.parent / "cassettes-worse"
    code, out = run("score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml",
                    "--draft", "--store", store, "--cassettes", worse,
                    "--out", tmp_path / "other", "--display", "none")  # fmt: skip
    assert code == 0, out
    second = out.rsplit("task id: ", 1)[1].split()[0]

    def half(*_: object) -> object:
        yield "<html>"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stored, "html_report_chunks", half)
    with TaskStore(store) as opened:
        task = load_task(opened, second)
        with pytest.raises(OSError, match="No space"):
            stored.write_reports(opened, second, report_from_task(task), tmp_path / "out", task)
    assert {name: (tmp_path / "out" / name).read_bytes() for name in FILES} == first
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(FILES)


def test_files_a_killed_writer_left_are_named_when_the_next_run_removes_them(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    task_id = out.rsplit("task id: ", 1)[1].split()[0]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    staged = tmp_path / "out" / f".rubric-eval-staging.{gone}.x1y2"
    staged.mkdir()
    (staged / "rows.jsonl").write_text("x" * 3000, "utf-8")
    orphan = tmp_path / "out" / f".report.html.{gone}.abc123.tmp"
    orphan.write_text("half a page", "utf-8")
    code, out = run("report", task_id, "--store", store, "--out", tmp_path / "out")
    assert code == 0, out
    assert not staged.exists() and not orphan.exists()
    assert "warning: removed 2 temporary item(s) a killed writer left" in out, out
    assert staged.name in out and orphan.name in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(FILES)
