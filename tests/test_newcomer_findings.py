"""Regression tests for what a newcomer pass found on labels, calibration and the team store.

Each test names the failure it guards; each failed on the code before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from rubric_engine.store.task_store import TaskStore
from tests.conftest import RUBRICS
from tests.test_labels import run


def test_a_mistyped_store_url_is_refused_not_made_a_local_folder(tmp_path: Path) -> None:
    # 'postgresq://…' published into a new SQLite file named after the URL, exit 0
    code, out = run(
        "rubric", "publish", RUBRICS / "health_cs.yaml", "--store", "postgresq://me@db/rubric"
    )
    assert code == 2 and "postgresq:// is not a store this engine opens" in out
    assert "postgresql://USER@HOST:PORT/DB" in out
    assert not Path("postgresq:").exists()


def test_a_duplicated_key_in_a_label_line_is_refused(tmp_path: Path) -> None:
    # {"status": "VIOLATED", "status": "FOLLOWED"} was stored as FOLLOWED, append-only
    path = tmp_path / "dup.jsonl"
    path.write_text(
        '{"rowId": "r1", "requirementId": "X", "status": "VIOLATED", "status": "FOLLOWED", '
        '"reviewer": "ann", "rubricKey": "health_cs"}\n',
        encoding="utf-8",
    )
    code, out = run("labels", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 2 and "dup.jsonl:1" in out and "'status' appears twice" in out
    assert not (tmp_path / "s.sqlite").exists() or _labels(tmp_path / "s.sqlite") == 0


def test_a_duplicated_key_in_a_dialogue_row_is_refused(tmp_path: Path) -> None:
    row = '{"rowId": "a", "rowId": "b", "messages": [{"role": "user", "content": "hi"}]}\n'
    path = tmp_path / "rows.jsonl"
    path.write_text(row, encoding="utf-8")
    code, out = run(
        "score",
        path,
        "--rubric",
        RUBRICS / "health_cs.yaml",
        "--draft",
        "--judge",
        "none",
        "--store",
        tmp_path / "s.sqlite",
        "--out",
        tmp_path / "o",
    )
    assert code == 2 and "rows.jsonl:1" in out and "'rowId' appears twice" in out


def test_labels_without_a_task_are_checked_against_the_stored_rubric(tmp_path: Path) -> None:
    # an unpublished rubricKey and an unknown requirement ID were imported silently
    store = tmp_path / "s.sqlite"
    assert run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)[0] == 0
    lines = [
        {
            "rowId": "r1",
            "requirementId": "NOPE",
            "status": "VIOLATED",
            "reviewer": "ann",
            "rubricKey": "health_cs",
            "rubricVersion": 1,
        },
        {
            "rowId": "r2",
            "requirementId": "X",
            "status": "VIOLATED",
            "reviewer": "ann",
            "rubricKey": "nopepack",
        },
        {"rowId": "r3", "score": 9, "reviewer": "ann", "rubricKey": "health_cs"},
    ]
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    code, out = run("labels", "import", path, "--store", store)
    assert code == 2 and "3 problem(s) against the stored rubric versions" in out, out
    assert "'NOPE' is not in health_cs@1; valid:" in out
    assert "no version of 'nopepack' was published here" in out
    assert "9 is outside the scale 1..5" in out
    assert _labels(store) == 0


def test_a_label_time_message_names_the_offsets_it_accepts(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"rowId": "r", "score": 3, "reviewer": "a", "rubricKey": "k", '
        '"time": "2026-01-01T09:30:00"}\n',
        encoding="utf-8",
    )
    code, out = run("labels", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 2 and "not a time with a zone" in out and "+08:00" in out


def test_dir_of_the_package_lists_the_public_api() -> None:
    import rubric_engine

    assert {"score", "score_async", "read_report", "ScoreOptions"} <= set(dir(rubric_engine))


def _labels(store: Path) -> int:
    with TaskStore(store) as opened:
        return int(opened.backend.execute("SELECT COUNT(*) FROM labels").fetchone()[0])
