"""Rule checks on the inputs a newcomer got wrong first: numbers written as strings, malformed
trace entries, RAG/agent row values in the wrong shape, thinking text, verifier verdict changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.errors import DatasetError
from rubric_engine.report import diff_side, load_task
from rubric_engine.report.diff import diff_tasks
from rubric_engine.store.task_store import TaskStore
from tests.test_cases import rules_only

TURNS = [{"role": "user", "content": "退款多久到账？"}, {"role": "assistant", "content": "3天内"}]


def rows(tmp_path: Path, *objs: dict[str, Any], name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(o, ensure_ascii=False) for o in objs) + "\n", "utf-8")
    return path


def results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["caseId"]: r for r in report["rules"]["results"]}


def test_trace_numbers_written_as_strings_are_read_as_numbers(tmp_path: Path) -> None:
    slow = {
        "rowId": "slow",
        "messages": TURNS,
        "trace": {"durationMs": "6000", "costUsd": "0.06", "steps": "9"},
        "expected": [
            {"type": "max_duration", "maxDurationMs": 100},
            {"type": "max_cost", "maxCostUsd": 0.05},
            {"type": "max_steps", "maxSteps": 2},
        ],
    }
    found = results(rules_only(tmp_path, rows(tmp_path, slow)))["slow"]
    assert found["passed"] is False and len(found["failedChecks"]) == 3


@pytest.mark.parametrize(
    ("trace", "field"),
    [
        ({"durationMs": "slow"}, "trace.durationMs: must be a number"),
        ({"costUsd": True}, "trace.costUsd: must be a number"),
        ({"steps": {"n": 3}}, "trace.steps: must be a count or a list"),
        ({"toolInvocations": [{"arguments": {}}, "query_logs"]}, "trace.toolInvocations[0]"),
    ],
)
def test_malformed_trace_values_fail_when_the_row_is_read(
    tmp_path: Path, trace: dict[str, Any], field: str
) -> None:
    path = rows(tmp_path, {"rowId": "r", "messages": TURNS, "trace": trace})
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert f"{path}:1: {field}" in str(info.value)


@pytest.mark.parametrize("values", [{"order_id": "ORDER_123"}, "ORDER_123"])
def test_rag_agent_params_must_include_must_be_a_list(tmp_path: Path, values: Any) -> None:
    case = {
        "id": "agent-1",
        "category": "agent",
        "input": "退款",
        "expected": {"tool_calls": [{"tool": "refund_submit", "params_must_include": values}]},
        "output": "已提交",
    }
    with pytest.raises(DatasetError) as info:
        DialogueSource(rows(tmp_path, case)).validate()
    assert "params_must_include: case agent-1: must be a list of values" in str(info.value)


def test_rules_without_a_pack_do_not_read_thinking_sections(tmp_path: Path) -> None:
    row = {
        "rowId": "p",
        "messages": [
            {"role": "user", "content": "我的订单呢"},
            {"role": "assistant", "content": "<think>user phone 13812345678</think>好的，马上查。"},
        ],
        "expected": [{"type": "privacy"}],
    }
    assert results(rules_only(tmp_path, rows(tmp_path, row)))["p"]["passed"] is True


def test_empty_check_lists_are_errors_not_silent_passes(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "f.json").write_text(json.dumps({"session": {"answer": "x"}}), "utf-8")
    case = {
        "id": "d1",
        "traceFixture": "f.json",
        "expectedRootCauseKeywords": [],
        "requiredEvidenceTools": ["query_logs"],
    }
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([case]), "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert "expectedRootCauseKeywords" in str(info.value)
    row = {"rowId": "r", "messages": TURNS, "expected": [{"type": "privacy", "kinds": []}]}
    with pytest.raises(DatasetError) as info:
        DialogueSource(rows(tmp_path, row)).validate()
    assert "kinds" in str(info.value)


def test_a_verifier_verdict_change_is_recorded_by_diff(tmp_path: Path) -> None:
    def case(verdict: str) -> dict[str, Any]:
        return {
            "rowId": "c1",
            "messages": TURNS,
            "trace": {"verifierVerdict": verdict},
            "expected": [{"type": "allowed_verdicts", "verdicts": ["PASS", "LOW_CONFID"]}],
        }

    store = tmp_path / "store.sqlite"
    first = rules_only(tmp_path, rows(tmp_path, case("LOW_CONFID"), name="a.jsonl"))
    second = rules_only(tmp_path, rows(tmp_path, case("PASS"), name="b.jsonl"))
    with TaskStore(store) as opened:
        diff = diff_tasks(
            diff_side(load_task(opened, first["task"]["id"])),
            diff_side(load_task(opened, second["task"]["id"])),
        )
    metrics = {(i["scope"], i["metric"], i["type"]) for i in diff["items"]}
    assert ("case", "verdict", "CHANGED") in metrics
    assert ("aggregate", "rules.verdictDistribution", "CHANGED") in metrics


def test_tool_sequence_failures_say_what_is_missing(tmp_path: Path) -> None:
    row = {
        "rowId": "t",
        "messages": TURNS,
        "trace": {"toolInvocations": [{"toolName": "order_lookup", "arguments": {"id": "A"}}]},
        "expected": [
            {
                "type": "tool_sequence",
                "mode": "subset",
                "calls": [{"tool": "order_lookup"}, {"tool": "order_lookup"}],
            },
            {
                "type": "tool_sequence",
                "mode": "subset",
                "calls": [{"tool": "order_lookup", "valuesInclude": ["C"]}],
            },
        ],
    }
    failed = results(rules_only(tmp_path, rows(tmp_path, row)))["t"]["failedChecks"]
    assert "2 expected call(s) need distinct calls" in failed[0]
    assert 'no call matches: order_lookup() with values ["C"]' in failed[1]


def test_case_errors_read_plainly_and_list_the_fields(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "f.json").write_text(json.dumps({"session": {"answer": "x"}}), "utf-8")
    cases = [
        {"id": "x", "traceFixture": "f.json", "requiredEvidenceTools": []},
        {"id": "y", "traceFixture": "f.json", "expectedRootCauseKeywords": "连接池"},
        {"id": "z", "traceFixture": "f.json", "allowedVerdict": ["PASS"]},
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    text = str(info.value)
    assert "requiredEvidenceTools: case x: must list at least 1 entry" in text
    assert "expectedRootCauseKeywords: case y: must be a list" in text
    assert (
        "unknown field 'allowedVerdict' (did you mean 'allowedVerdicts'?); valid fields here: "
        "id, title" in text
    )
    assert "allowedVerdicts" in text and "Input should be" not in text
