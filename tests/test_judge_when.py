"""``--judge-when``: the judge is called only on the rows whose metadata meets the condition;
the other rows are decided by their rule checks (CHECKED) and cost no call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.engine.judge_when import parse_judge_when
from rubric_engine.errors import ConfigurationError
from tests.conftest import CASES, CASSETTES, RUBRICS

runner = CliRunner()


def test_conditions() -> None:
    assert parse_judge_when("risk_level=high")({"risk_level": "high"})
    assert not parse_judge_when("risk_level=high")({})
    assert parse_judge_when("risk_level!=high")({})  # a missing field is not equal
    assert parse_judge_when("tier in golden, adversarial")({"tier": "adversarial"})
    assert parse_judge_when("tags=vip")({"tags": ["new", "vip"]})
    assert parse_judge_when("sourceLine=26")({"sourceLine": 26})  # compared as text
    with pytest.raises(ConfigurationError, match="FIELD=VALUE"):
        parse_judge_when("risk_level>high")


def test_only_the_selected_rows_reach_the_judge(tmp_path: Path) -> None:
    agent_rows = "answerSource!=original (MedicalGPT sample data)"
    result = score(
        ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric=RUBRICS / "health_cs.yaml",
                     draft=True, store=tmp_path / "s.sqlite", out=tmp_path / "o",
                     cassettes=CASSETTES, judge_when=agent_rows)
    )  # fmt: skip
    rows = [json.loads(line) for line in result.files.rows.read_text("utf-8").splitlines()]
    judged = {r["rowId"] for r in rows if r["status"] == "SCORED"}
    assert judged == {"medgpt-26-agent", "medgpt-47-agent", "medgpt-13-agent", "medgpt-45-agent"}
    assert {r["status"] for r in rows if r["rowId"] not in judged} == {"CHECKED"}
    assert result.report.usage.calls == 4 and result.report.totals.checked == 22
    # a resume takes the condition from the task and refuses another one
    code = runner.invoke(app, ["score", "--resume", result.task_id, "--store",
                               str(tmp_path / "s.sqlite"), "--judge-when", "a=b"])  # fmt: skip
    assert code.exit_code == 2 and "--judge-when" in code.output


def test_judge_when_needs_the_judge(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="drop --judge-when"):
        score(ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], judge="none",
                           store=tmp_path / "s.sqlite", judge_when="a=b"))  # fmt: skip
