"""``evaluate``: the engine run that returns each row's result in memory, in input order, and
needs no task in the team's store (the base of the Inspect, DeepEval and promptfoo plug-ins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine import ScoreOptions, evaluate, score
from rubric_engine.errors import ConfigurationError
from rubric_engine.rubric.versions import RubricRegistry
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS

HEALTH_ROWS = [
    json.loads(line) for line in (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
]


def test_rows_in_memory_give_the_stored_run_results_in_input_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    reversed_rows = HEALTH_ROWS[::-1]
    got = evaluate(ScoreOptions(rows=reversed_rows, rubric=RUBRICS / "health_cs.yaml",
                                draft=True, cassettes=CASSETTES))  # fmt: skip
    assert [r.row_id for r in got.rows] == [r["rowId"] for r in reversed_rows]
    assert got.store is None and list(tmp_path.iterdir()) == []  # nothing left behind
    stored = score(ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], draft=True,
                                rubric=RUBRICS / "health_cs.yaml", cassettes=CASSETTES,
                                store=tmp_path / "s.sqlite", out=tmp_path / "out"))  # fmt: skip
    lines = (stored.files.rows).read_text("utf-8").splitlines()
    by_id = {json.loads(x)["rowId"]: json.loads(x) for x in lines}
    for result in got.rows:
        line = by_id[result.row_id]
        assert {k: line[k] for k in result.to_json_dict()} == result.to_json_dict()
    assert got.report.totals.mean_score == stored.report.totals.mean_score


def test_a_published_version_is_scored_without_a_task_in_the_team_store(tmp_path: Path) -> None:
    team = tmp_path / "team.sqlite"
    with TaskStore(team) as store:
        RubricRegistry(store).publish(RUBRICS / "health_cs.yaml")
    got = evaluate(ScoreOptions(rows=HEALTH_ROWS[:2], rubric="health_cs", store=team,
                                cassettes=CASSETTES))  # fmt: skip
    assert got.report.task.rubric_status == "PUBLISHED" and got.report.task.rubric_version == 1
    assert [r.final_score for r in got.rows] == [1, 1]
    with TaskStore(team) as store:
        assert store.tasks() == []
        published = RubricRegistry(store).resolve("health_cs")
        assert got.report.task.rubric_hash == published.content_hash
    again = ScoreOptions(rows=HEALTH_ROWS[:2], rubric="health_cs", store=team,
                         cassettes=CASSETTES, out=tmp_path / "r")  # fmt: skip
    kept = evaluate(again, keep_task=True)
    with TaskStore(team) as store:
        assert [t.id for t in store.tasks()] == [kept.task_id] and kept.store == team


def test_resume_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="finish a stored task with score"):
        evaluate(ScoreOptions(resume="x"))
