"""One example per protocol warning code, plus the worked examples of docs/protocol.md §9."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rubric_engine.results.model import BasisSource, RequirementStatus, WarningCode
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.rubric.case_level import case_requirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.verdict.model import verdict_model

S = RequirementStatus


def judge(rubric: Any, case_ids: tuple[str, ...] = (), **fields: Any) -> Any:
    base = {
        "rowId": "r1",
        "intentKey": "REFUND",
        "score": 4,
        "redFlagTypes": [],
        "unmetRequirementIds": [],
        "partialRequirementIds": [],
    }
    base.update(fields)
    return verdict_model(rubric).model_validate(
        base, context={"row_id": "r1", "case_requirement_ids": list(case_ids)}
    )


def codes(result: Any) -> list[str]:
    return [w.code.value for w in result.warnings]


def status(result: Any) -> dict[str, tuple[S, BasisSource]]:
    return {e.requirement_id: (e.status, e.source) for e in result.reference_basis}


def test_seed_example_cap_and_backfill(mini_rubric: Any) -> None:
    # docs/protocol.md §9: judge says 3, lists a requirement capped at 1 -> final 1, flag added
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, score=3, unmetRequirementIds=["COMMON_LEAK"]), "r1"
    )
    assert (result.judge_score, result.final_score) == (3, 1)
    assert result.capped_by == ("COMMON_LEAK",)
    assert result.red_flag_types == ("BACKEND_EXPOSURE",)
    assert codes(result) == ["RED_FLAG_ADDED"]


def test_full_reference_basis_in_pack_order(mini_rubric: Any) -> None:
    result = normalize_verdict(mini_rubric, judge(mini_rubric), "r1")
    assert [e.requirement_id for e in result.reference_basis] == [
        "COMMON_LEAK",
        "COMMON_TONE",
        "COMMON_CARD_SOURCE",
        "REFUND_VERIFY",
        "REFUND_NO_PROMISE",
        "REFUND_NO_PROMISE_AMOUNT",
    ]
    assert status(result)["COMMON_CARD_SOURCE"] == (S.NOT_APPLICABLE, BasisSource.DEFAULT)
    assert status(result)["COMMON_TONE"] == (S.FOLLOWED, BasisSource.DEFAULT)
    assert result.warnings == ()


def test_cross_intent_requirement_dropped(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, unmetRequirementIds=["CHAT_SHORT"]), "r1"
    )
    assert codes(result) == ["CROSS_INTENT_REQUIREMENT"]
    assert "CHAT_SHORT" not in status(result)
    assert result.final_score == 4


def test_duplicate_requirement_id(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric,
        judge(mini_rubric, unmetRequirementIds=["REFUND_VERIFY", "refund_verify "]),
        "r1",
    )
    assert codes(result) == ["DUPLICATE_REQUIREMENT_ID"]
    assert status(result)["REFUND_VERIFY"] == (S.VIOLATED, BasisSource.JUDGE)


def test_unmet_and_partial_violated_wins(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric,
        judge(
            mini_rubric,
            unmetRequirementIds=["REFUND_VERIFY"],
            partialRequirementIds=["REFUND_VERIFY", "COMMON_TONE"],
        ),
        "r1",
    )
    assert codes(result) == ["UNMET_AND_PARTIAL"]
    assert status(result)["REFUND_VERIFY"][0] is S.VIOLATED
    assert status(result)["COMMON_TONE"] == (S.PARTIAL, BasisSource.JUDGE)
    assert result.final_score == 2  # PARTIAL never caps; VIOLATED REFUND_VERIFY caps at 2


def test_unobservable_reported_stays_not_applicable(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, unmetRequirementIds=["COMMON_CARD_SOURCE"]), "r1"
    )
    assert codes(result) == ["UNOBSERVABLE_REPORTED"]
    assert status(result)["COMMON_CARD_SOURCE"] == (S.NOT_APPLICABLE, BasisSource.DEFAULT)
    assert result.final_score == 4 and result.red_flag_types == ()


def test_red_flag_backfilled_marks_the_least_severe_critical_of_type(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, redFlagTypes=["FALSE_PROMISE"]), "r1"
    )
    assert codes(result) == ["RED_FLAG_BACKFILLED"]
    assert result.warnings[0].requirement_id == "REFUND_NO_PROMISE_AMOUNT"  # no cap: mildest
    assert result.warnings[0].detail == "also of this type: REFUND_NO_PROMISE"
    assert status(result)["REFUND_NO_PROMISE_AMOUNT"] == (S.VIOLATED, BasisSource.BACKFILL)
    assert status(result)["REFUND_NO_PROMISE"] == (S.FOLLOWED, BasisSource.DEFAULT)
    assert result.red_flag_types == ("FALSE_PROMISE",)
    assert result.final_score == 4 and result.capped_by == ()


def test_backfill_never_makes_an_extra_violation_raise_the_score(mini_rubric: Any) -> None:
    # regression (found by hypothesis on airline_cs): backfilling *every* critical requirement
    # of a flag type scored a flag alone lower than the flag plus its mildest named rule
    alone = normalize_verdict(mini_rubric, judge(mini_rubric, redFlagTypes=["FALSE_PROMISE"]), "r1")
    named = normalize_verdict(
        mini_rubric,
        judge(
            mini_rubric,
            redFlagTypes=["FALSE_PROMISE"],
            unmetRequirementIds=["REFUND_NO_PROMISE_AMOUNT"],
        ),
        "r1",
    )
    assert named.final_score <= alone.final_score


def test_no_backfill_when_a_violated_requirement_carries_the_flag(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric,
        judge(
            mini_rubric,
            redFlagTypes=["FALSE_PROMISE"],
            unmetRequirementIds=["REFUND_NO_PROMISE_AMOUNT"],
        ),
        "r1",
    )
    assert result.warnings == ()
    assert status(result)["REFUND_NO_PROMISE"][0] is S.FOLLOWED


@pytest.mark.parametrize("flag", ["PRICE_DISCLOSURE", "CARD_VIOLATION"])
def test_orphan_red_flag_kept_and_counted(mini_rubric: Any, flag: str) -> None:
    # neither type has a critical requirement in the mini pack
    result = normalize_verdict(mini_rubric, judge(mini_rubric, redFlagTypes=[flag]), "r1")
    assert codes(result) == ["ORPHAN_RED_FLAG"]
    assert result.red_flag_types == (flag,)
    assert result.final_score == 4


def test_min_score_without_red_flag(mini_rubric: Any) -> None:
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, score=1, partialRequirementIds=["COMMON_TONE"]), "r1"
    )
    assert codes(result) == ["MIN_SCORE_WITHOUT_RED_FLAG"]
    assert result.final_score == 1


@pytest.mark.parametrize(
    ("score", "expected"), [(3, ["LOW_SCORE_WITHOUT_UNMET_REQUIREMENT"]), (4, [])]
)
def test_low_score_without_unmet_requirement(
    mini_rubric: Any, score: int, expected: list[str]
) -> None:
    # regression: a 3 whose only listed rule was dropped as cross-intent was left unexplained
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, score=score, unmetRequirementIds=["CHAT_SHORT"]), "r1"
    )
    assert codes(result) == ["CROSS_INTENT_REQUIREMENT", *expected]
    assert result.final_score == score


def test_questions_check_without_card(mini_rubric: Any) -> None:
    result = normalize_verdict(mini_rubric, judge(mini_rubric, questionsCheck="HAS_ISSUES"), "r1")
    assert codes(result) == ["QUESTIONS_CHECK_WITHOUT_CARD"]


def test_judge_reasked_is_carried_through(mini_rubric: Any) -> None:
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.engine.pipeline import RequestBuilder, row_result
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.judge.protocol import JudgeOutcome

    row = DialogueRow.model_validate(
        {
            "rowId": "r1",
            "messages": [
                {"role": "user", "content": "refund?"},
                {"role": "assistant", "content": "Sure."},
            ],
        }
    )
    prepared = RequestBuilder(mini_rubric, load_prompt()).prepare(0, row)
    outcome = JudgeOutcome(
        verdict=judge(mini_rubric), error=None, reasks=["intentKey: 'REFUNDS' is not in the rubric"]
    )
    result = row_result(CompiledRubric.of(mini_rubric), prepared, outcome)
    assert codes(result) == ["JUDGE_REASKED"]
    assert result.warnings[0].detail == "intentKey: 'REFUNDS' is not in the rubric"
    assert result.final_score == 4


def test_case_level_requirements_join_the_applicable_set(mini_rubric: Any) -> None:
    reqs = case_requirements(("Greets the user by name",), ("Asks for the card PIN",))
    ids = tuple(r.id for r in reqs)
    assert ids[0].startswith("CASE_EXPECTED_") and ids[1].startswith("CASE_NEGATIVE_")
    result = normalize_verdict(
        mini_rubric,
        judge(mini_rubric, case_ids=ids, unmetRequirementIds=[ids[1].lower()]),
        "r1",
        reqs,
    )
    assert status(result)[ids[1]] == (S.VIOLATED, BasisSource.JUDGE)
    assert status(result)[ids[0]] == (S.FOLLOWED, BasisSource.DEFAULT)


def test_case_ids_are_stable_under_reordering_and_whitespace() -> None:
    a = case_requirements(("Refund goes to the card", "Confirm first"), ())
    b = case_requirements((" Confirm first", "Refund goes to the card"), ())
    assert sorted(r.id for r in a) == sorted(r.id for r in b)


def test_every_warning_code_has_an_example_here() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    missing = [c.value for c in WarningCode if c.value not in source]
    assert missing == []


def test_red_flag_upgrades_a_partial_red_line_of_its_type(mini_rubric: Any) -> None:
    # regression: the flag was pinned on the mildest rule while the rule the judge named as
    # PARTIAL stayed PARTIAL
    result = normalize_verdict(
        mini_rubric,
        judge(
            mini_rubric, redFlagTypes=["FALSE_PROMISE"], partialRequirementIds=["REFUND_NO_PROMISE"]
        ),
        "r1",
    )
    assert status(result)["REFUND_NO_PROMISE"] == (S.VIOLATED, BasisSource.BACKFILL)
    assert status(result)["REFUND_NO_PROMISE_AMOUNT"] == (S.FOLLOWED, BasisSource.DEFAULT)
    assert codes(result) == ["RED_FLAG_BACKFILLED"]
    assert "all or nothing" in (result.warnings[0].detail or "")
    assert result.final_score == 2


def test_a_partial_red_line_without_a_flag_is_violated_flagged_and_capped(
    mini_rubric: Any,
) -> None:
    # regression: a critical requirement judged PARTIAL with no flag reported got no flag, no
    # cap and no warning (12 such rows in the shipped demo)
    result = normalize_verdict(
        mini_rubric, judge(mini_rubric, partialRequirementIds=["REFUND_NO_PROMISE"]), "r1"
    )
    assert status(result)["REFUND_NO_PROMISE"] == (S.VIOLATED, BasisSource.BACKFILL)
    assert result.red_flag_types == ("FALSE_PROMISE",)
    assert (result.judge_score, result.final_score, result.capped_by) == (
        4,
        2,
        ("REFUND_NO_PROMISE",),
    )
    assert codes(result) == ["CRITICAL_PARTIAL_VIOLATED"]
    # a PARTIAL that is not a red line stays PARTIAL
    tone = normalize_verdict(
        mini_rubric, judge(mini_rubric, partialRequirementIds=["COMMON_TONE"]), "r1"
    )
    assert status(tone)["COMMON_TONE"] == (S.PARTIAL, BasisSource.JUDGE)
    assert codes(tone) == [] and tone.final_score == 4


def test_malformed_thinking_markers_are_row_warnings() -> None:
    # docs/protocol.md §12: the text around a stray or unclosed marker is kept, and the row says so
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.results.agent_output import thinking_warnings
    from rubric_engine.rubric.model import OutputParsing

    row = DialogueRow.model_validate(
        {
            "rowId": "t",
            "messages": [
                {"role": "assistant", "content": "seen</think> too"},
                {"role": "assistant", "content": "<think>ok</think>fine"},
                {"role": "assistant", "content": "and <think>this"},
            ],
        }
    )
    found = thinking_warnings(row, OutputParsing.model_validate({"thinkingMarkers": True}))
    assert [(w.code.value, (w.detail or "")[:6]) for w in found] == [
        ("STRAY_THINKING_END", "turn 1"),
        ("UNCLOSED_THINKING_START", "turn 3"),
    ]
    assert thinking_warnings(row, OutputParsing()) == ()


def test_reply_warnings_reach_the_row_after_the_reasks(mini_rubric: Any) -> None:
    """The judge's parse warnings (judge/parse.py) are counted on the row: AMBIGUOUS_REPLY
    for an ambiguous answer that was re-asked, then one per clean-up of the accepted verdict
    (JUDGE_VALUE_TRIMMED, JUDGE_VALUE_RECASED, INVISIBLE_CHARACTER_REMOVED,
    JUDGE_VALUE_NFKC_NORMALIZED, SCORE_TEXT_CONVERTED, DUPLICATE_RED_FLAG_TYPE)."""
    import json

    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.engine.pipeline import RequestBuilder, row_result
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.judge.protocol import JudgeOutcome
    from rubric_engine.results.model import ProtocolWarning
    from rubric_engine.verdict.parse import ParsedVerdict, RowContext, parse_reply

    sent = {
        "intentKey": " refund",
        "score": "２",
        "redFlagTypes": ["FALSE\u00ad_PROMISE", "FALSE_PROMISE"],
        "unmetRequirementIds": ["ＲＥＦＵＮＤ＿ＮＯ＿ＰＲＯＭＩＳＥ"],
    }
    reply = {"choices": [{"finish_reason": "stop", "message": {"content": json.dumps(sent)}}]}
    parsed = parse_reply(reply, verdict_model(mini_rubric), RowContext("r1"))
    assert isinstance(parsed, ParsedVerdict)
    row = DialogueRow.model_validate(
        {"rowId": "r1", "messages": [{"role": "user", "content": "refund?"}]}
    )
    prepared = RequestBuilder(mini_rubric, load_prompt()).prepare(0, row)
    ambiguous = ProtocolWarning(code=WarningCode.AMBIGUOUS_REPLY, detail="two objects")
    outcome = JudgeOutcome(
        verdict=parsed.verdict,
        error=None,
        reasks=["two objects"],
        parse_warnings=[ambiguous, *parsed.cleanups],
    )
    result = row_result(CompiledRubric.of(mini_rubric), prepared, outcome)
    assert codes(result) == [
        "JUDGE_REASKED",
        "AMBIGUOUS_REPLY",
        "JUDGE_VALUE_TRIMMED",
        "JUDGE_VALUE_RECASED",
        "SCORE_TEXT_CONVERTED",
        "INVISIBLE_CHARACTER_REMOVED",
        "DUPLICATE_RED_FLAG_TYPE",
        "JUDGE_VALUE_NFKC_NORMALIZED",
    ]
    assert result.judge_score == 2 and result.red_flag_types == ("FALSE_PROMISE",)


def test_a_sampled_rows_aggregate_warns_about_its_splits() -> None:
    """A sampled row's own warnings (docs/stability.md): INTENT_SPLIT when its samples picked
    different intents, RED_FLAG_SPLIT when the vote dropped a red flag a sample raised."""
    from rubric_engine.results.samples import Sample, aggregate_samples
    from tests.test_samples import INTENTS, ORDER, REQS, judged

    clean = judged({"rowId": "r", "intentKey": INTENTS[0], "score": 4, "redFlagTypes": []})
    other = {"rowId": "r", "intentKey": INTENTS[1], "score": 1}
    flagged = judged({**other, "redFlagTypes": ["MEDICAL_OVERREACH"]})
    got = aggregate_samples(
        [Sample(1, n, r) for n, r in enumerate([clean, clean, flagged], 1)], REQS, ORDER
    )
    assert {WarningCode.INTENT_SPLIT, WarningCode.RED_FLAG_SPLIT} <= {w.code for w in got.warnings}
