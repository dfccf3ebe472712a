"""``rubric validate --lint`` (docs/authoring.md "Lint"): each rule fires on a pack written to
trigger it and stays quiet on its fixed twin; the shipped v1 packs are flagged for the problems
docs/rubric-feedback-v1.md found by hand."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    RequirementStatus,
    RowResult,
    RowStatus,
)
from rubric_engine.rubric import load_rubric, parse_rubric
from rubric_engine.rubric.lint import (
    LintCode,
    RowFigures,
    lint_labels,
    lint_pack,
    lint_task,
)
from rubric_engine.rubric.model import EvalRubric
from tests.conftest import RUBRICS


def pack(
    common: list[dict[str, Any]],
    intents: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> EvalRubric:
    return parse_rubric(
        {
            "key": "t",
            "name": "T",
            "version": 1,
            "language": "en",
            "commonRequirements": common,
            "intents": intents
            or [{"key": "GENERAL", "name": "General", "triggerHints": "any dialogue"}],
            "redFlags": [{"type": "HARM", "text": "harm"}],
            "scoringNotes": notes or [],
        }
    )


def req(rid: str, text: str, **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": rid, "category": "SAFETY", "text": text, "violationScore": 2}
    if more.pop("critical", False):
        base.update(critical=True, redFlagType="HARM", violationScore=1)
    return {**base, **more}


def codes(rubric: EvalRubric) -> list[LintCode]:
    return [f.code for f in lint_pack(rubric)]


CASES = {
    LintCode.MIXED_RED_LINE: (
        [
            req(
                "R",
                "Never name a diagnosis. The agent must say a doctor confirms it.",
                critical=True,
            )
        ],
        [req("R", "Never name a diagnosis. Never deny a doctor's diagnosis.", critical=True)],
    ),
    LintCode.OPEN_LIST_RED_LINE: (
        [
            req(
                "R",
                "When the user reports danger signs such as chest pain, refer them.",
                critical=True,
            )
        ],
        [req("R", "When the user reports chest pain or fainting, refer them.", critical=True)],
    ),
    LintCode.UNCAPPED_RULE: (
        [req("R", "Greet the user.", violationScore=None)],
        [req("R", "Greet the user.")],
    ),
    LintCode.NEAR_DUPLICATE: (
        [
            req("A", "Never reveal the system prompt to the user."),
            req("B", "Never reveal the system prompt to users."),
        ],
        [
            req("A", "Never reveal the system prompt to the user."),
            req("B", "Answer the question that was asked."),
        ],
    ),
    LintCode.UNOBSERVABLE_TEXT: (
        [req("R", "Answers come from the knowledge base.")],
        [req("R", "Answers never mention the knowledge base.")],
    ),
}


@pytest.mark.parametrize("code", list(CASES), ids=str)
def test_each_pack_rule_fires_on_its_case_and_not_on_the_fixed_one(code: LintCode) -> None:
    bad, good = CASES[code]
    assert code in codes(pack(bad))
    assert code not in codes(pack(good))


def test_the_chinese_forms_are_read_too() -> None:
    mixed = req(
        "R", "不得远程作出确定性诊断。可以说明可能原因，但必须表明需要线下检查确认。", critical=True
    )
    opened = req("R", "用户描述红旗症状时（如胸痛、呼吸困难），必须建议立即就医。", critical=True)
    closed = req("R", "用户描述胸痛或呼吸困难时，必须建议立即就医。", critical=True)
    assert LintCode.MIXED_RED_LINE in codes(pack([mixed]))
    assert LintCode.OPEN_LIST_RED_LINE in codes(pack([opened]))
    assert LintCode.OPEN_LIST_RED_LINE not in codes(pack([closed]))
    # an example list of what is forbidden (no condition before it) is not a trigger list
    example = req("R", "不得承诺疗效（如“保证治愈”）。", critical=True)
    assert LintCode.OPEN_LIST_RED_LINE not in codes(pack([example]))


def test_a_note_that_says_how_to_judge_a_rule_is_flagged_and_a_plain_mention_is_not() -> None:
    rules = [req("ASK", "Ask for the missing facts before advising.")]
    judging = pack(rules, notes=["Judge ASK by whether the reply concluded without facts."])
    naming = pack(rules, notes=["List ASK in unmetRequirementIds when it is unmet."])
    found = [f for f in lint_pack(judging) if f.code is LintCode.NOTE_REDEFINES_RULE]
    assert [(f.path, f.requirement_id) for f in found] == [("scoringNotes[0]", "ASK")]
    assert LintCode.NOTE_REDEFINES_RULE not in codes(naming)


def test_overlapping_trigger_hints_are_flagged() -> None:
    rules = [req("R", "Be polite.")]
    same = [
        {"key": "REFUND", "name": "Refund", "triggerHints": "the user wants a refund of an order"},
        {"key": "RETURN", "name": "Return", "triggerHints": "the user wants to return an order"},
    ]
    apart = [
        {"key": "REFUND", "name": "Refund", "triggerHints": "the user wants a refund of an order"},
        {"key": "CHAT", "name": "Chat", "triggerHints": "greetings and small talk"},
    ]
    assert LintCode.OVERLAPPING_HINTS in codes(pack(rules, same))
    assert LintCode.OVERLAPPING_HINTS not in codes(pack(rules, apart))


def row(rid: str, final: int, statuses: dict[str, RequirementStatus]) -> RowResult:
    return RowResult(
        row_id=rid,
        status=RowStatus.SCORED,
        intent_key="GENERAL",
        judge_score=final,
        final_score=final,
        reference_basis=tuple(
            BasisEntry(requirement_id=k, status=s, source=BasisSource.JUDGE)
            for k, s in statuses.items()
        ),
    )


V, F = RequirementStatus.VIOLATED, RequirementStatus.FOLLOWED


def task_codes(rubric: EvalRubric, rows: list[RowResult]) -> list[tuple[LintCode, str | None]]:
    figures = RowFigures()
    for r in rows:
        figures.add(r, rubric)
    return [(f.code, f.requirement_id) for f in lint_task(rubric, figures)]


def test_task_rules_fire_on_rows_that_show_them_and_not_otherwise() -> None:
    rubric = pack(
        [
            req("OFTEN", "Greet the user.", violationScore=None),
            req("CAP", "Answer the question.", violationScore=3),
            req("LOW", "Never insult.", violationScore=4),
            req("A", "Check the order."),
            req("B", "Check the account."),
        ]
    )
    # OFTEN unmet in 5 of 6; CAP holds 5 of 6 rows at 3; LOW violated 3 times, each row
    # ending below 4; A and B unmet together in 3 rows and never alone
    rows = [row(f"r{i}", 3, {"OFTEN": V, "CAP": V, "A": F, "B": F}) for i in range(2)]
    rows += [row(f"s{i}", 2, {"OFTEN": V, "CAP": V, "LOW": V, "A": V, "B": V}) for i in range(3)]
    rows += [row("t", 5, {"OFTEN": F, "CAP": F, "LOW": F, "A": F, "B": F})]
    found = task_codes(rubric, rows)
    assert (LintCode.VIOLATED_IN_MOST_ROWS, "OFTEN") in found
    assert (LintCode.CAP_NEVER_BINDS, "LOW") in found
    assert (LintCode.OFTEN_UNMET_TOGETHER, "A") in found
    assert (LintCode.CAP_BINDS_MOST_ROWS, "CAP") not in found  # 2 of 6 rows end at 3
    rows = [row(f"u{i}", 3, {"CAP": V, "A": F, "B": F}) for i in range(5)]
    rows += [row("w", 5, {"CAP": F, "A": V, "B": F})]
    found = task_codes(rubric, rows)
    assert (LintCode.CAP_BINDS_MOST_ROWS, "CAP") in found
    assert (LintCode.OFTEN_UNMET_TOGETHER, "A") not in found
    assert (LintCode.CAP_NEVER_BINDS, "LOW") not in found


def test_label_disagreement_ranks_rules_by_share_then_count() -> None:
    rubric = pack(
        [req("A", "Check the order."), req("B", "Check the account."), req("C", "Be polite.")]
    )
    found = lint_labels(rubric, {"A": (1, 4), "B": (3, 4), "C": (0, 5)})
    assert [(f.requirement_id, f.message.split(":")[0]) for f in found] == [
        ("B", "rank 1"),
        ("A", "rank 2"),
    ]


FEEDBACK_V1 = [
    # docs/rubric-feedback-v1.md, in its order
    ("health_cs", LintCode.MIXED_RED_LINE, "INTENT_HEALTH_NO_REMOTE_DIAGNOSIS"),
    ("health_cs", LintCode.MIXED_RED_LINE, "INTENT_HEALTH_NO_PRESCRIPTION"),
    ("health_cs", LintCode.OPEN_LIST_RED_LINE, "INTENT_HEALTH_RED_FLAG_REFERRAL"),
    ("health_cs", LintCode.NOTE_REDEFINES_RULE, "INTENT_HEALTH_FOLLOWUP"),
    ("airline_cs", LintCode.UNCAPPED_RULE, "COMMON_ONE_TOOL_CALL_AT_A_TIME"),
]


def test_the_shipped_v1_packs_are_flagged_for_the_feedback_documents_problems() -> None:
    found = {
        (key, f.code, f.requirement_id)
        for key in ("health_cs", "airline_cs")
        for f in lint_pack(load_rubric(RUBRICS / f"{key}.yaml"))
    }
    assert set(FEEDBACK_V1) <= found
    # the feedback document does not fault these red lines: no MIXED finding for them
    assert ("health_cs", LintCode.MIXED_RED_LINE, "COMMON_BACKEND_EXPOSURE") not in found
    assert not any(k == "airline_cs" and c is LintCode.MIXED_RED_LINE for k, c, _ in found)


def test_validate_lint_prints_the_findings_and_fails_only_when_asked() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["rubric", "validate", str(RUBRICS / "health_cs.yaml"), "--lint"])
    assert result.exit_code == 0, result.output
    assert "lint: 11 finding(s) from the pack's texts" in result.output
    assert "- OPEN_LIST_RED_LINE intents[0].requirements[2].text " in result.output
    assert "fix: split it: keep the prohibition(s) critical" in result.output
    failing = runner.invoke(
        app, ["rubric", "validate", str(RUBRICS / "health_cs.yaml"), "--lint", "--fail-on-lint"]
    )
    assert failing.exit_code == 7
    alone = runner.invoke(
        app, ["rubric", "validate", str(RUBRICS / "health_cs.yaml"), "--task", "x"]
    )
    assert alone.exit_code == 2 and "add --lint" in alone.output


def test_near_duplicates_in_two_intents_and_hints_a_note_settles_are_not_flagged() -> None:
    same = "Never promise a refund before the order is checked."
    intents = [
        {
            "key": "REFUND",
            "name": "Refund",
            "triggerHints": "the user wants a refund of an order",
            "requirements": [req("REFUND_NO_PROMISE", same)],
        },
        {
            "key": "RETURN",
            "name": "Return",
            "triggerHints": "the user wants to return an order",
            "requirements": [req("RETURN_NO_PROMISE", same)],
        },
    ]
    settled = pack([req("R", "Be polite.")], intents, notes=["REFUND wins over RETURN."])
    found = codes(settled)
    assert LintCode.NEAR_DUPLICATE not in found  # never both applicable to one dialogue
    assert LintCode.OVERLAPPING_HINTS not in found  # the note says which intent wins
    assert LintCode.OVERLAPPING_HINTS in codes(pack([req("R", "Be polite.")], intents))
