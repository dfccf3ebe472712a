"""The field-level structured-extraction check (docs/rule-checks.md): per-field exact match, numeric
tolerance, nested fields, per-field weights, a weighted score and the failing fields."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from rubric_engine.results.model import RequirementStatus
from rubric_engine.rules.evaluate import evaluate_check
from rubric_engine.rules.evidence import Evidence
from rubric_engine.rules.model import Check

ADAPTER: TypeAdapter[Check] = TypeAdapter(Check)
CHECK = {
    "type": "fields",
    "minScore": 0.7,
    "fields": [
        {"path": "invoice.no", "expected": "INV-7", "weight": 2},
        {"path": "invoice.total", "expected": 1200, "tolerance": 0.5},
        {"path": "items.0.sku", "expected": "ａｂ-1"},  # full-width: folded like every text check
        {"path": "currency", "expected": "CNY"},
    ],
}


def run(answer: object, **change: object) -> tuple[RequirementStatus, str | None, dict]:
    check = ADAPTER.validate_python({**CHECK, **change})
    evidence = Evidence("", (), (), (), structured_output=answer)
    result = evaluate_check(check, evidence, "REQ")
    return result.status, result.detail, result.measures


def test_all_fields_match_with_tolerance_nesting_and_folding() -> None:
    answer = {"invoice": {"no": "inv-7", "total": 1200.4}, "items": [{"sku": "AB-1"}],
              "currency": "CNY"}  # fmt: skip
    status, detail, measures = run(answer)
    assert status is RequirementStatus.FOLLOWED and detail is None
    assert measures == {"fieldScore": 1.0, "failedFields": []}


def test_weighted_score_and_failing_fields_are_named() -> None:
    answer = {"invoice": {"no": "INV-8", "total": 1201}, "items": [], "currency": "CNY"}
    status, detail, measures = run(answer)
    # weights 2 + 1 + 1 + 1 = 5; only currency (1) matches: 0.2 < 0.7
    assert status is RequirementStatus.VIOLATED
    assert measures == {"fieldScore": 0.2,
                        "failedFields": ["invoice.no", "invoice.total", "items.0.sku"]}  # fmt: skip
    assert detail is not None and "weighted field score 0.20 < 0.7" in detail
    assert 'invoice.no="INV-8" (expected "INV-7")' in detail and "items.0.sku missing" in detail
    # a missing low-weight field alone keeps the score above minScore: it passes, still named
    status, detail, measures = run(
        {"invoice": {"no": "INV-7", "total": 1200}, "items": [{"sku": "ab-1"}]}
    )
    assert status is RequirementStatus.FOLLOWED and measures["fieldScore"] == 0.8
    assert detail == "currency missing"


def test_numbers_need_the_tolerance_and_types_are_not_confused() -> None:
    answer = {"invoice": {"no": "INV-7", "total": "1200"}, "items": [{"sku": "ab-1"}]}
    status, _, measures = run({**answer, "currency": "CNY"}, minScore=1)
    assert status is RequirementStatus.FOLLOWED  # "1200" read as a number under a tolerance
    status, _, measures = run(
        {"invoice": {"no": 7}}, fields=[{"path": "invoice.no", "expected": "7"}]
    )
    assert status is RequirementStatus.VIOLATED and measures["failedFields"] == ["invoice.no"]


def test_a_bad_check_is_refused_at_load() -> None:
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"type": "fields", "fields": []})
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"type": "fields", "fields": [{"path": "a..b", "expected": 1}]})
    with pytest.raises(ValidationError):
        ADAPTER.validate_python(
            {"type": "fields", "minScore": 2, "fields": [{"path": "a", "expected": 1}]}
        )
