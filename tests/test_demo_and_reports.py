"""The shipped demo batches replay offline, and reports rebuild from the store alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.report import report_for_task, write_reports
from rubric_engine.report.render.json_md import render_json, render_markdown
from rubric_engine.store.location import parse_location
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS

DEMOS = [
    ("airline_tau2_dev.json", "airline_cs.yaml", 25),
    ("health_consult_zh.jsonl", "health_cs.yaml", 26),
]


@pytest.mark.parametrize(("cases", "pack", "rows"), DEMOS)
def test_demo_batch_replays_offline(
    tmp_path: Path, cases: str, pack: str, rows: int, store_at: str
) -> None:
    result = score(
        ScoreOptions(
            inputs=[CASES / cases],
            rubric=RUBRICS / pack,
            draft=True,
            store=parse_location(store_at),
            out=tmp_path / "out",
            cassettes=CASSETTES,
        )
    )
    report = result.report
    assert result.cassette_misses == []
    assert report["totals"]["rows"] == rows and report["totals"]["judgeErrors"] == 0
    assert report["task"]["cassettes"] == {"authored": rows}
    assert report["usage"]["calls"] == rows
    lines = result.files.rows.read_text(encoding="utf-8").splitlines()
    assert len(lines) == rows
    first = json.loads(lines[0])
    assert set(first) >= {
        "rowId",
        "status",
        "intentKey",
        "judgeScore",
        "finalScore",
        "cappedBy",
        "redFlagTypes",
        "referenceBasis",
        "warnings",
        "error",
    }
    assert report["redFlags"][0]["count"] > 0  # both demos contain red-line crossings
    md = result.files.markdown.read_text(encoding="utf-8")
    assert md.index("## Red flags") < md.index("## Per intent") < md.index("## Per requirement")


def test_report_is_byte_identical_after_the_rubric_file_changes(
    tmp_path: Path, store_at: str
) -> None:
    pack = tmp_path / "health_cs.yaml"
    shutil.copy(RUBRICS / "health_cs.yaml", pack)
    store_path = parse_location(store_at)
    result = score(
        ScoreOptions(
            inputs=[CASES / "health_consult_zh.jsonl"],
            rubric=pack,
            draft=True,
            store=store_path,
            out=tmp_path / "out",
            cassettes=CASSETTES,
        )
    )
    before_json = result.files.json.read_bytes()
    before_md = result.files.markdown.read_bytes()
    text = pack.read_text(encoding="utf-8")
    edited = text.replace("violationScore: 1", "violationScore: 3").replace(
        "name: 健康咨询", "name: 健康咨询（改）"
    )
    assert edited != text
    pack.write_text(edited, encoding="utf-8")
    with TaskStore(store_path) as store:
        rebuilt = report_for_task(store, result.task_id)
        # score() builds its files from the rows it kept; a rebuild reads them back: same bytes
        again = write_reports(store, result.task_id, rebuilt, tmp_path / "again")
    assert render_json(rebuilt).encode() == before_json
    assert render_markdown(rebuilt).encode() == before_md
    for first, second in zip(result.files.__dict__.values(), again.__dict__.values(), strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name


def test_task_keeps_its_snapshot_and_versions(tmp_path: Path) -> None:
    result = score(
        ScoreOptions(
            inputs=[CASES / "airline_tau2_dev.json"],
            rubric=RUBRICS / "airline_cs.yaml",
            draft=True,
            store=tmp_path / "s.sqlite",
            out=tmp_path / "out",
            cassettes=CASSETTES,
        )
    )
    with TaskStore(tmp_path / "s.sqlite") as store:
        task = store.task(result.task_id)
        stored = list(store.rows(result.task_id))
    assert task.rubric_snapshot["key"] == "airline_cs" and task.rubric_version == 1
    assert task.rubric_hash.startswith("sha256:") and task.prompt_version == "judge_v1"
    assert task.model == "openai/gpt-4o-mini" and task.judge_params["maxReasks"] == 2
    assert task.engine_version and task.analysis_version
    assert stored[0].raw_attempts[0]["response"]["choices"][0]["message"]["content"]
    assert stored[0].prompt_tokens > 0 and stored[0].dialogue["rowId"] == "airline-0"
