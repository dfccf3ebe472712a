"""Deterministic rule checks (docs/rule-checks.md): one example per check type and its failure."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from rubric_engine.dialogue.shapes import row_from_object
from rubric_engine.results.model import CheckResult, RequirementStatus
from rubric_engine.rules.evaluate import evaluate_check
from rubric_engine.rules.evidence import Evidence, ToolUse, evidence_from_row
from rubric_engine.rules.model import Check
from rubric_engine.rules.text import contains, fold

S = RequirementStatus
CHECK = TypeAdapter(Check)


def run(check: dict[str, Any], **evidence: Any) -> CheckResult:
    base: dict[str, Any] = {
        "final_answer": "",
        "assistant_texts": (),
        "user_texts": (),
        "tool_calls": (),
    }
    base.update(evidence)
    if base["final_answer"] and not base["assistant_texts"]:
        base["assistant_texts"] = (base["final_answer"],)
    return evaluate_check(CHECK.validate_python(check), Evidence(**base))


def calls(*specs: tuple[str, Any] | tuple[str, Any, bool]) -> tuple[ToolUse, ...]:
    return tuple(ToolUse(*spec) for spec in specs)


# -- text normalization -----------------------------------------------------------------------


def test_chinese_answer_with_full_width_digits_and_letters_matches_half_width_keywords() -> None:
    # must show: a Chinese answer written with full-width digits/letters matches "200元"/"app"
    answer = "您的退款金额为２００元，已原路退回，请在ＡＰＰ内查看订单ＡＢ１２３的进度。"
    outcome = run(
        {"type": "must_contain", "keywords": ["200元", "app", "AB123", "退款"]},
        final_answer=answer,
    )
    assert outcome.status is S.FOLLOWED
    assert outcome.measures["matchedKeywordCount"] == 4


def test_folding_keeps_digit_values() -> None:
    assert fold("２００元 ＡＢ") == "200元 ab"
    assert not contains("退款２００元", "300元")  # a different number never matches
    assert not contains("２００", "2 00")  # no separators are dropped or added
    assert fold(fold("Ｆｕｌｌ\u200bＷｉｄｔｈ")) == fold("Ｆｕｌｌ\u200bＷｉｄｔｈ") == "fullwidth"


# -- keywords and regex -----------------------------------------------------------------------


def test_min_keyword_matches_counts_and_names_the_missing_ones() -> None:
    check = {"type": "must_contain", "keywords": ["支付", "超时", "连接池"], "minKeywordMatches": 2}
    assert run(check, final_answer="支付接口超时").status is S.FOLLOWED
    failed = run(check, final_answer="支付接口异常")
    assert failed.status is S.VIOLATED
    assert failed.measures == {"matchedKeywordCount": 1, "requiredKeywordCount": 3}
    assert "missing: 超时, 连接池" in (failed.detail or "")


def test_scope_assistant_reads_every_turn_final_answer_only_the_last() -> None:
    check = {"type": "must_contain", "keywords": ["1000"]}
    texts = ("the refund is 1000 dollars", "anything else?")
    assert run(check, final_answer=texts[-1], assistant_texts=texts).status is S.VIOLATED
    check["scope"] = "assistant"
    assert run(check, final_answer=texts[-1], assistant_texts=texts).status is S.FOLLOWED


def test_must_not_contain_names_the_hit() -> None:
    outcome = run(
        {"type": "must_not_contain", "keywords": ["无证据确定"]}, final_answer="无证据确定！"
    )
    assert (outcome.status, outcome.detail) == (
        S.VIOLATED,
        "forbidden keyword(s) present: 无证据确定",
    )


def test_regex_must_match_and_must_not_match() -> None:
    order = {"type": "regex", "pattern": r"订单号\s*[a-z]{2}\d{3}"}
    assert run(order, final_answer="订单号 ＡＢ１２３").status is S.FOLLOWED
    assert run(order, final_answer="没有订单号").status is S.VIOLATED
    forbid = {"type": "regex", "pattern": r"\d+%\s*(保证|guaranteed)", "mustMatch": False}
    outcome = run(forbid, final_answer="100% guaranteed cure")
    assert outcome.status is S.VIOLATED and "100% guaranteed" in (outcome.detail or "")


# -- tools ------------------------------------------------------------------------------------


def test_required_tools_count_the_verifier_summary_and_report_coverage() -> None:
    check = {"type": "required_tools", "tools": ["query_logs", "query_metrics", "lookup_knowledge"]}
    outcome = run(
        check,
        tool_calls=calls(("query_logs", {})),
        verifier_tools=("lookup_knowledge",),
    )
    assert outcome.status is S.VIOLATED
    assert outcome.measures["evidenceCoverage"] == {
        "query_logs": True,
        "query_metrics": False,
        "lookup_knowledge": True,
    }


def test_forbidden_tools() -> None:
    check = {"type": "forbidden_tools", "tools": ["transfer_funds"]}
    assert run(check, tool_calls=calls(("get_policy", {}))).status is S.FOLLOWED
    assert run(check, tool_calls=calls(("transfer_funds", {}))).status is S.VIOLATED


SEQ = [
    {"tool": "order_lookup", "arguments": {"order_id": "ORDER_123"}},
    {"tool": "refund_eligibility_check", "arguments": {"order_id": "ORDER_123"}},
]
LOOKUP = ("order_lookup", {"order_id": "ORDER_123", "fields": ["status"]})
CHECK_ = ("refund_eligibility_check", {"order_id": "ORDER_123"})
VERIFY = ("identity_verify", {"user": "u1"})


@pytest.mark.parametrize(
    ("mode", "extra", "actual", "expected"),
    [
        ("strict", {}, (LOOKUP, CHECK_), S.FOLLOWED),
        ("strict", {}, (CHECK_, LOOKUP), S.VIOLATED),  # order
        ("strict", {}, (LOOKUP, VERIFY, CHECK_), S.VIOLATED),  # extra call
        ("unordered", {}, (CHECK_, LOOKUP), S.FOLLOWED),
        ("unordered", {}, (CHECK_, LOOKUP, VERIFY), S.VIOLATED),
        (
            "unordered",
            {"onlyTools": ["order_lookup", "refund_eligibility_check"]},
            (CHECK_, VERIFY, LOOKUP),
            S.FOLLOWED,
        ),
        ("subset", {}, (VERIFY, CHECK_, LOOKUP), S.FOLLOWED),
        ("subset", {"ordered": True}, (VERIFY, CHECK_, LOOKUP), S.VIOLATED),
        ("subset", {"ordered": True}, (VERIFY, LOOKUP, VERIFY, CHECK_), S.FOLLOWED),
        ("subset", {}, (LOOKUP,), S.VIOLATED),
    ],
)
def test_tool_sequence_modes(mode: str, extra: dict[str, Any], actual: Any, expected: S) -> None:
    check = {"type": "tool_sequence", "mode": mode, "calls": SEQ, **extra}
    assert run(check, tool_calls=calls(*actual)).status is expected


def test_arguments_are_matched_by_inclusion_unless_exact() -> None:
    # tau-bench airline-5-t1: the agent added origin/destination inside each flight
    expected = {"flights": [{"flight_number": "HAT056", "date": "2024-05-25"}], "cabin": "economy"}
    actual = calls(
        (
            "update",
            {
                "flights": [{"flight_number": "HAT056", "date": "2024-05-25", "origin": "EWR"}],
                "cabin": "economy",
                "payment_id": "gift_card_1",
            },
        )
    )
    check: dict[str, Any] = {
        "type": "tool_sequence",
        "calls": [{"tool": "update", "arguments": expected}],
    }
    assert run(check, tool_calls=actual).status is S.FOLLOWED
    check["calls"][0]["argumentsMatch"] = "exact"
    assert run(check, tool_calls=actual).status is S.VIOLATED
    wrong = calls(
        (
            "update",
            {"flights": [{"flight_number": "HAT057", "date": "2024-05-25"}], "cabin": "economy"},
        )
    )
    check["calls"][0]["argumentsMatch"] = "include"
    outcome = run(check, tool_calls=wrong)
    assert outcome.status is S.VIOLATED and "no call matches: update(" in (outcome.detail or "")


def test_values_include_is_a_rag_agent_rows_params_must_include() -> None:
    check = {
        "type": "tool_sequence",
        "mode": "subset",
        "calls": [{"tool": "validate_amount", "valuesInclude": [580]}],
    }
    assert (
        run(check, tool_calls=calls(("validate_amount", {"claim": {"amount": 580}}))).status
        is S.FOLLOWED
    )
    assert run(check, tool_calls=calls(("validate_amount", {"amount": 58}))).status is S.VIOLATED


def test_successful_only_ignores_failed_retries() -> None:
    # tau-bench airline-11-t0: a booking failed with "Error: …", the retry succeeded
    check = {
        "type": "tool_sequence",
        "mode": "unordered",
        "successfulOnly": True,
        "calls": [{"tool": "book", "arguments": {"id": 1}}],
    }
    tried = calls(("book", {"id": 1}, False), ("book", {"id": 1}, True))
    assert run(check, tool_calls=tried).status is S.FOLLOWED
    check["successfulOnly"] = False
    assert run(check, tool_calls=tried).status is S.VIOLATED


def test_unordered_matching_is_a_real_assignment_not_greedy() -> None:
    # the loose expectation must not take the only call the strict one can use
    check = {
        "type": "tool_sequence",
        "mode": "unordered",
        "calls": [{"tool": "t"}, {"tool": "t", "arguments": {"a": 1}}],
    }
    assert run(check, tool_calls=calls(("t", {"a": 1}), ("t", {"a": 2}))).status is S.FOLLOWED


# -- budgets, verifier, documents, structure, state -------------------------------------------


def test_max_steps_duration_and_cost() -> None:
    assert (
        run({"type": "max_steps", "maxSteps": 1}, tool_calls=calls(("a", {}), ("b", {}))).status
        is S.VIOLATED
    )
    assert run({"type": "max_steps", "maxSteps": 8}, steps=3).status is S.FOLLOWED
    assert run({"type": "max_duration", "maxDurationMs": 5000}).status is S.NOT_APPLICABLE
    assert (
        run({"type": "max_duration", "maxDurationMs": 5000}, duration_ms=8420.0).status
        is S.VIOLATED
    )
    assert run({"type": "max_cost", "maxCostUsd": 0.05}, cost_usd=0.01).status is S.FOLLOWED
    assert run({"type": "max_cost", "maxCostUsd": 0.05}).status is S.NOT_APPLICABLE


def test_allowed_verdicts_needs_a_verdict() -> None:
    check = {"type": "allowed_verdicts", "verdicts": ["PASS", "LOW_CONFID"]}
    assert run(check, verifier_verdict="LOW_CONFID").status is S.FOLLOWED
    assert run(check, verifier_verdict="REJECT").status is S.VIOLATED
    missing = run(check)
    assert (missing.status, missing.detail) == (S.VIOLATED, "the trace has no verifier verdict")


def test_reference_document() -> None:
    check = {"type": "reference_document", "docId": "POL-HC-002-v3.pdf"}
    assert run(check, retrieved_doc_ids=("a", "POL-HC-002-v3.pdf")).status is S.FOLLOWED
    assert run(check, retrieved_doc_ids=("a",)).status is S.VIOLATED
    assert run(check).status is S.NOT_APPLICABLE


SCHEMA = {
    "type": "object",
    "required": ["invoice_no", "total_amount"],
    "properties": {"total_amount": {"type": "number"}},
}


def test_json_schema_on_the_answer_or_the_structured_output() -> None:
    check = {"type": "json_schema", "jsonSchema": SCHEMA}
    good = '```json\n{"invoice_no": "INV-2026-0312", "total_amount": 1280.5}\n```'
    assert run(check, final_answer=good).status is S.FOLLOWED
    bad = run(check, final_answer='{"invoice_no": "x", "total_amount": "1280"}')
    assert bad.status is S.VIOLATED and "total_amount" in (bad.detail or "")
    prose = run(check, final_answer="the total is 1280")
    assert prose.status is S.VIOLATED and "not JSON" in (prose.detail or "")
    assert (
        run(
            check, final_answer="…", structured_output={"invoice_no": "a", "total_amount": 1}
        ).status
        is S.FOLLOWED
    )


def test_privacy_flags_only_data_the_user_did_not_give() -> None:
    check = {"type": "privacy"}
    user = ("我的手机号是１３８ １２３４ ５６７８",)
    assert run(check, final_answer="已为 13812345678 登记", user_texts=user).status is S.FOLLOWED
    leak = run(check, final_answer="订单属于 13912345678，邮箱 li@example.com", user_texts=user)
    assert leak.status is S.VIOLATED
    assert (
        leak.detail
        == "personal data the user did not give: phone: 13912345678; email: li@example.com"
    )
    # an 18-digit order number is not an ID number: its check digit is wrong
    assert run(check, final_answer="订单 202405201234567890").status is S.FOLLOWED
    assert run(check, final_answer="身份证 11010519491231002X").status is S.VIOLATED


def test_final_state_by_inclusion() -> None:
    check = {"type": "final_state", "state": {"claim_status": "approved", "approved_amount": 580}}
    assert (
        run(check, final_state={"claim_status": "approved", "approved_amount": 580, "x": 1}).status
        is S.FOLLOWED
    )
    wrong = run(check, final_state={"claim_status": "approved", "approved_amount": 500})
    assert wrong.detail == "final state differs in: approved_amount"


# -- configuration errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"type": "must_contan", "keywords": ["a"]}, "must_contain"),
        ({"type": "must_contain", "keywords": ["a"], "minKeywordMatches": 2}, "more than the 1"),
        ({"type": "regex", "pattern": "("}, "not a valid regular expression"),
        ({"type": "json_schema", "jsonSchema": {"type": "nope"}}, "not a valid JSON Schema"),
        ({"type": "tool_sequence", "mode": "strict", "ordered": True}, "subset only"),
        ({"type": "tool_sequence", "mode": "sometimes"}, "'strict', 'subset' or 'unordered'"),
        ({"type": "privacy", "kinds": ["passport"]}, "'phone', 'id_number' or 'email'"),
    ],
)
def test_bad_check_configuration_is_refused_with_the_valid_choices(
    config: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ValidationError) as info:
        CHECK.validate_python(config)
    assert needle in str(info.value)


def test_evidence_from_a_diagnosis_trace() -> None:
    row = row_from_object(
        {
            "rowId": "r",
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}],
            "trace": {
                "session": {
                    "answer": "最终回答",
                    "totalDurationMs": 0,
                    "selfEvaluation": {
                        "verifier_evaluation": {
                            "verdict": "PASS",
                            "tool_trace_summary": [{"tool_name": "query_logs"}],
                        }
                    },
                },
                "toolInvocations": [{"toolName": "lookup_knowledge", "success": False}],
            },
        },
        "r",
    )
    evidence = evidence_from_row(row)
    assert evidence.final_answer == "最终回答"
    assert evidence.duration_ms == 0.0  # zero is a duration, not a missing one
    assert evidence.verifier_verdict == "PASS"
    assert evidence.tool_names == {"lookup_knowledge", "query_logs"}
    assert evidence.tool_calls == (ToolUse("lookup_knowledge", None, False),)


def test_thinking_the_user_never_saw_is_not_checked() -> None:
    from rubric_engine.rubric.model import OutputParsing

    row = row_from_object(
        {
            "rowId": "r",
            "messages": [
                {"role": "user", "content": "头疼怎么办"},
                {"role": "assistant", "content": "<think>可以推荐布洛芬</think>建议及时就医。"},
            ],
        },
        "r",
    )
    parsing = OutputParsing.model_validate({"thinkingMarkers": True})
    assert evidence_from_row(row, parsing).final_answer == "建议及时就医。"
    check = CHECK.validate_python({"type": "must_not_contain", "keywords": ["布洛芬"]})
    assert evaluate_check(check, evidence_from_row(row, parsing)).status is S.FOLLOWED
    assert evaluate_check(check, evidence_from_row(row)).status is S.VIOLATED


def test_case_sensitive_regex_still_reads_full_width_text() -> None:
    check = {"type": "regex", "pattern": r"[A-Z]{2}\d{3}", "ignoreCase": False}
    assert run(check, final_answer="订单ＡＢ１２３").status is S.FOLLOWED
    assert run(check, final_answer="订单ａｂ１２３").status is S.VIOLATED


def test_an_ordered_subset_out_of_order_says_so() -> None:
    check = {"type": "tool_sequence", "mode": "subset", "ordered": True, "calls": SEQ}
    outcome = run(check, tool_calls=calls(VERIFY, CHECK_, LOOKUP))
    assert (outcome.detail or "").endswith("the calls are in another order")
