"""Verdict cleaning and enforcement (docs/protocol.md §5) and the accepted-score table."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rubric_engine.verdict.model import QuestionsCheck, coerce_score, verdict_model


def validate(rubric: Any, row_id: str = "r1", case_ids: tuple[str, ...] = (), **fields: Any) -> Any:
    base: dict[str, Any] = {"rowId": row_id, "intentKey": "REFUND", "score": 3}
    base.update(fields)
    return verdict_model(rubric).model_validate(
        base, context={"row_id": row_id, "case_requirement_ids": list(case_ids)}
    )


@pytest.mark.parametrize(
    ("sent", "got"),
    [
        (4, 4),
        (4.0, 4),
        ("4", 4),
        (" 4 ", 4),
        ("４", 4),
        ("+4", 4),
        # a numeric string with a zero fraction is the integer (was re-asked: "got the text")
        ("4.0", 4),
        ("4.00", 4),
        (" ４.０ ", 4),
    ],
)
def test_accepted_scores(sent: Any, got: int) -> None:
    assert coerce_score(sent, 1, 5) == got


@pytest.mark.parametrize(
    "sent",
    [3.5, "3.5", "4.5", "4.", ".0", "4.0.0", "4/5", "four", True, False, None, [4], 0, 6, "６"],
)
def test_rejected_scores_name_the_range(sent: Any) -> None:
    with pytest.raises(ValueError, match="from 1 to 5"):
        coerce_score(sent, 1, 5)


def test_boolean_is_never_a_score_even_in_range() -> None:
    with pytest.raises(ValueError, match="boolean"):
        coerce_score(True, 0, 5)  # True == 1 numerically; still refused


def test_ids_are_cleaned_to_the_pack_spelling(mini_rubric: Any) -> None:
    v = validate(
        mini_rubric,
        intentKey=" refund\u200b ",
        redFlagTypes=["false_promise"],
        unmetRequirementIds=["\ufeffRefund_Verify", "ＣＯＭＭＯＮ＿ＬＥＡＫ"],
    )
    assert v.intent_key == "REFUND"
    assert v.red_flag_types == ["FALSE_PROMISE"]
    assert v.unmet_requirement_ids == ["REFUND_VERIFY", "COMMON_LEAK"]


def test_unknown_values_list_the_valid_choices(mini_rubric: Any) -> None:
    with pytest.raises(ValidationError) as info:
        validate(
            mini_rubric,
            intentKey="REFUNDS",
            redFlagTypes=["LEAK"],
            unmetRequirementIds=["NOT_A_RULE"],
        )
    text = str(info.value)
    assert "choose exactly one of: REFUND, CHAT" in text
    assert "'LEAK' is not a red-flag type" in text and "BACKEND_EXPOSURE" in text
    assert "'NOT_A_RULE' is not a requirement ID" in text and "REFUND_VERIFY" in text


def test_row_id_must_match_and_may_be_omitted(mini_rubric: Any) -> None:
    assert validate(mini_rubric, row_id="r9", rowId=None).row_id == "r9"
    with pytest.raises(ValidationError, match="rowId must be 'r1'"):
        validate(mini_rubric, rowId="r2")


def test_case_level_ids_only_for_their_row(mini_rubric: Any) -> None:
    ok = validate(
        mini_rubric,
        case_ids=("CASE_EXPECTED_ABCD1234",),
        unmetRequirementIds=["case_expected_abcd1234"],
    )
    assert ok.unmet_requirement_ids == ["CASE_EXPECTED_ABCD1234"]
    with pytest.raises(ValidationError):
        validate(mini_rubric, unmetRequirementIds=["CASE_EXPECTED_ABCD1234"])


def test_questions_check_values(mini_rubric: Any) -> None:
    assert (
        validate(mini_rubric, questionsCheck="has_issues").questions_check
        is QuestionsCheck.HAS_ISSUES
    )
    assert validate(mini_rubric, questionsCheck=None).questions_check is QuestionsCheck.NOT_PRESENT
    with pytest.raises(ValidationError, match="NOT_PRESENT, OK, HAS_ISSUES"):
        validate(mini_rubric, questionsCheck="MAYBE")


def test_schema_enumerates_the_pack(mini_rubric: Any) -> None:
    schema = verdict_model(mini_rubric).model_json_schema()
    props = schema["properties"]
    assert props["intentKey"]["enum"] == ["REFUND", "CHAT"]
    assert props["redFlagTypes"]["items"]["enum"][0] == "BACKEND_EXPOSURE"
    assert (props["score"]["minimum"], props["score"]["maximum"]) == (1, 5)


@pytest.mark.parametrize(
    "invisible",
    [
        "\u00ad",  # soft hyphen (Cf): the old character class missed it
        "\u061c",  # Arabic letter mark (Cf)
        "\u180e",  # Mongolian vowel separator (Cf)
        "\U000e0001",  # language tag (Cf)
        "\ufff9",  # interlinear annotation anchor (Cf)
        "\u200b",
        "\u2066",
        "\ufeff",
        "\u0007",
    ],
)
def test_every_invisible_format_character_is_removed(mini_rubric: Any, invisible: str) -> None:
    from rubric_engine.verdict.model import clean_token

    assert clean_token(f"REF{invisible}UND") == "REFUND"
    v = validate(
        mini_rubric,
        intentKey=f"{invisible}REFUND",
        redFlagTypes=[f"FALSE{invisible}_PROMISE"],
        unmetRequirementIds=[f"REFUND{invisible}_VERIFY"],
    )
    assert (v.intent_key, v.red_flag_types, v.unmet_requirement_ids) == (
        "REFUND",
        ["FALSE_PROMISE"],
        ["REFUND_VERIFY"],
    )


def test_every_cf_character_of_unicode_is_removed() -> None:
    import sys
    import unicodedata

    from rubric_engine.verdict.model import clean_token

    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150
    kept = [hex(ord(c)) for c in cf if clean_token(f"A{c}B") != "AB"]
    assert kept == []


def test_a_duplicate_red_flag_type_is_kept_once_and_warned(mini_rubric: Any) -> None:
    from rubric_engine.results.model import WarningCode

    cleanups: list[Any] = []
    v = verdict_model(mini_rubric).model_validate(
        {"intentKey": "REFUND", "score": 2, "redFlagTypes": ["FALSE_PROMISE", "FALSE_PROMISE"]},
        context={"row_id": "r1", "case_requirement_ids": [], "cleanups": cleanups},
    )
    assert v.red_flag_types == ["FALSE_PROMISE"]
    assert [(w.code, w.red_flag_type) for w in cleanups] == [
        (WarningCode.DUPLICATE_RED_FLAG_TYPE, "FALSE_PROMISE")
    ]
