"""The store's row columns, byte for byte: :func:`~rubric_engine.store.task_store.result_json`
encodes the result's plain Python dump; these tests pin that the bytes are those of the
JSON-mode dump through ``json.dumps`` (what every store has held) for every kind of value a
result holds: enums, tuples, absent and present optional blocks, non-ASCII, quotes and
control characters, integer and float milliseconds; the dialogue and raw attempts as
canonical JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rubric_engine.formats.canonical import canonical_json
from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    CheckResult,
    JudgeError,
    JudgeErrorKind,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    RuleSummary,
    WarningCode,
)
from rubric_engine.store.task_store import StoredRow, row_values

TRICKY = 'quote " backslash \\ tab \t newline \n nul \x00 bell \x07 中文 “引号” \u2028 é'


def _results() -> list[RowResult]:
    checks = (
        CheckResult(
            requirement_id="CASE_RULE_0123abcd",
            type="must_contain",
            name="keywords",
            status=RequirementStatus.VIOLATED,
            detail=TRICKY,
            measures={"matchedKeywordCount": 1},  # excluded from JSON
        ),
        CheckResult(
            requirement_id="COMMON_X", type="required_tools", name="tools", status="FOLLOWED"
        ),
    )
    rules = RuleSummary(
        case_id="row-1",
        title=TRICKY,
        passed=False,
        failed_checks=(f"keywords: {TRICKY}",),
        verifier_verdict="PASS",
        matched_keyword_count=1,
        required_keyword_count=3,
        evidence_coverage={"search": True, "查询": False},
        tool_call_count=2,
        duration_ms=8420.5,
        checks=checks,
    )
    basis = (
        BasisEntry(requirement_id="A", status="FOLLOWED", source=BasisSource.DEFAULT),
        BasisEntry(
            requirement_id="B",
            status=RequirementStatus.VIOLATED,
            source="judge",
            evidence_turns=(1, 3),
        ),
        BasisEntry(requirement_id="C", status="PARTIAL", source=BasisSource.BACKFILL),
    )
    warnings = (
        ProtocolWarning(code=WarningCode.JUDGE_REASKED, detail=TRICKY),
        ProtocolWarning(code="RED_FLAG_ADDED", requirement_id="B", red_flag_type="FLAG"),
    )
    return [
        RowResult(
            row_id="row-1",
            status=RowStatus.SCORED,
            intent_key="INTENT",
            judge_score=4,
            final_score=2,
            capped_by=("B",),
            red_flag_types=("FLAG", "其他"),
            reference_basis=basis,
            warnings=warnings,
            score_explanation=TRICKY,
            questions_check="NOT_PRESENT",
            questions_issues=(TRICKY,),
            rules=rules,
        ),
        RowResult(
            row_id="row-2",
            status="JUDGE_ERROR",
            warnings=warnings[:1],
            error=JudgeError(
                kind=JudgeErrorKind.CASSETTE_MISS, message=TRICKY, attempts=0, cassette_key="k"
            ),
            rules=rules.model_copy(update={"duration_ms": 12, "checks": ()}),
        ),
        RowResult(row_id="row-3", status=RowStatus.CHECKED, reference_basis=basis[:1]),
        RowResult(row_id="行-4", status=RowStatus.SCORED, judge_score=5, final_score=5),
    ]


@pytest.mark.parametrize("result", _results(), ids=lambda r: r.row_id)
def test_row_columns_are_the_bytes_of_the_json_mode_dump(result: RowResult) -> None:
    dialogue: dict[str, Any] = {
        "rowId": result.row_id,
        "messages": [{"role": "user", "content": TRICKY}],
        "metadata": {"z": 1.5, "a": [None, True, {"b": TRICKY}]},
    }
    attempts = [{"response": {"choices": [{"message": {"content": TRICKY}}]}, "error": None}]
    stored = StoredRow(
        seq=0,
        result=result,
        dialogue=dialogue,
        raw_attempts=attempts,
        calls=1,
        prompt_tokens=0,
        completion_tokens=0,
        cost_usd=None,
        latency_ms=0.0,
        cassette_key=None,
    )
    values = row_values("task", stored)
    # the result as json.dumps of the JSON-mode dump; the dialogue in its own key order (the
    # prompt renders it so); the attempts as canonical text
    assert values[5] == json.dumps(result.to_json_dict(), ensure_ascii=False)
    assert values[6] == json.dumps(dialogue, ensure_ascii=False, separators=(",", ":"))
    assert values[6].index('"z"') < values[6].index('"a"')
    assert values[7] == canonical_json(attempts)
