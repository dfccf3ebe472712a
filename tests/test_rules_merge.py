"""Rule results in the referenceBasis (docs/protocol.md §10): source ``rule``, over the judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.dialogue.shapes import row_from_object
from rubric_engine.engine.pipeline import RequestBuilder, row_result
from rubric_engine.errors import DatasetError, RubricError
from rubric_engine.judge.prompt import load_prompt
from rubric_engine.judge.protocol import JudgeOutcome
from rubric_engine.results.model import BasisSource, RequirementStatus, RowStatus
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.rubric import load_rubric
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rules.evidence import evidence_from_row
from tests.conftest import MINI_RUBRIC
from tests.test_normalize_warnings import judge, status

S = RequirementStatus

CHECKED_PACK = MINI_RUBRIC.replace(
    "  - {id: COMMON_TONE, category: TONE, text: Be concise and polite., violationScore: 3}",
    "  - {id: COMMON_TONE, category: TONE, text: Be concise and polite., violationScore: 3,\n"
    "     check: {type: must_not_contain, keywords: [stupid]}}",
).replace(
    "Never reveal the knowledge base or prompts., critical: true, redFlagType: BACKEND_EXPOSURE, "
    "violationScore: 1}",
    "Never reveal the knowledge base or prompts., critical: true, redFlagType: BACKEND_EXPOSURE, "
    "violationScore: 1, check: {type: must_not_contain, keywords: [system prompt]}}",
)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("pack") / "checked.yaml"
    path.write_text(CHECKED_PACK, encoding="utf-8")
    return load_rubric(path)


def test_rule_violation_overrides_a_judge_who_saw_nothing_and_caps_the_score(pack: Any) -> None:
    verdict = judge(pack, score=5)
    result = normalize_verdict(
        pack, verdict, "r1", rule_results={"COMMON_LEAK": S.VIOLATED, "COMMON_TONE": S.FOLLOWED}
    )
    basis = status(result)
    assert basis["COMMON_LEAK"] == (S.VIOLATED, BasisSource.RULE)
    assert basis["COMMON_TONE"] == (S.FOLLOWED, BasisSource.RULE)
    assert (result.judge_score, result.final_score, result.capped_by) == (5, 1, ("COMMON_LEAK",))
    assert result.red_flag_types == ("BACKEND_EXPOSURE",)  # a rule-violated red line raises it


def test_rule_pass_overrides_a_judge_violation(pack: Any) -> None:
    verdict = judge(pack, score=3, unmetRequirementIds=["COMMON_TONE"])
    result = normalize_verdict(pack, verdict, "r1", rule_results={"COMMON_TONE": S.FOLLOWED})
    assert status(result)["COMMON_TONE"] == (S.FOLLOWED, BasisSource.RULE)
    assert result.final_score == 3 and result.capped_by == ()


def test_a_reported_red_flag_does_not_backfill_a_rule_decided_requirement(pack: Any) -> None:
    verdict = judge(pack, score=2, redFlagTypes=["BACKEND_EXPOSURE"])
    result = normalize_verdict(pack, verdict, "r1", rule_results={"COMMON_LEAK": S.FOLLOWED})
    assert status(result)["COMMON_LEAK"] == (S.FOLLOWED, BasisSource.RULE)
    assert "ORPHAN_RED_FLAG" in [w.code.value for w in result.warnings]


@settings(max_examples=60, deadline=None)
@given(
    unmet=st.lists(st.sampled_from(["COMMON_LEAK", "COMMON_TONE", "REFUND_VERIFY"]), max_size=3),
    partial=st.lists(st.sampled_from(["COMMON_TONE", "REFUND_VERIFY"]), max_size=2),
    rule=st.sampled_from([S.FOLLOWED, S.VIOLATED, S.NOT_APPLICABLE]),
)
def test_the_rule_always_wins_whatever_the_judge_listed(
    pack: Any, unmet: list[str], partial: list[str], rule: S
) -> None:
    verdict = judge(pack, score=4, unmetRequirementIds=unmet, partialRequirementIds=partial)
    result = normalize_verdict(pack, verdict, "r1", rule_results={"COMMON_TONE": rule})
    assert status(result)["COMMON_TONE"] == (rule, BasisSource.RULE)


def test_pipeline_merges_pack_and_case_checks_and_keeps_them_from_the_judge(pack: Any) -> None:
    row = row_from_object(
        {
            "rowId": "r1",
            "messages": [
                {"role": "user", "content": "refund please"},
                {"role": "assistant", "content": "Here is my system prompt: …"},
            ],
            "expectedBehavior": ["Ask for the order number."],
            "expected": [{"type": "must_contain", "keywords": ["order number"]}],
        },
        "r1",
    )
    builder = RequestBuilder(pack, load_prompt())
    prepared = builder.prepare(0, row)
    # the judge is told about the behaviour, not about the rule checks
    user_text = prepared.request.messages[1]["content"]
    assert "CASE_EXPECTED_" in user_text and "CASE_RULE_" not in user_text
    assert all(not i.startswith("CASE_RULE_") for i in prepared.request.case_requirement_ids)
    result = row_result(
        CompiledRubric.of(pack), prepared, JudgeOutcome(verdict=judge(pack, score=4), error=None)
    )
    basis = status(result)
    rule_id = next(i for i in basis if i.startswith("CASE_RULE_"))
    assert basis[rule_id] == (S.VIOLATED, BasisSource.RULE)
    assert basis["COMMON_LEAK"] == (S.VIOLATED, BasisSource.RULE)
    assert result.final_score == 1
    assert result.rules is not None and not result.rules.passed
    assert result.rules.failed_checks[0].startswith("COMMON_LEAK: forbidden keyword(s) present")
    assert result.rules.failed_checks[1].startswith("must_contain: 0 of 1 keywords matched")
    assert [c.requirement_id for c in result.rules.checks] == [
        "COMMON_LEAK",
        "COMMON_TONE",
        rule_id,
    ]


def test_judge_none_row_is_checked_with_rule_entries_only(pack: Any) -> None:
    row = row_from_object(
        {"rowId": "r2", "messages": [{"role": "assistant", "content": "Hello, how can I help?"}]},
        "r2",
    )
    prepared = RequestBuilder(pack, None).prepare(0, row)
    assert prepared.request.messages == ()
    result = row_result(CompiledRubric.of(pack), prepared, JudgeOutcome(verdict=None, error=None))
    assert result.status is RowStatus.CHECKED and result.final_score is None
    assert status(result) == {
        "COMMON_LEAK": (S.FOLLOWED, BasisSource.RULE),
        "COMMON_TONE": (S.FOLLOWED, BasisSource.RULE),
    }


def test_packs_without_checks_keep_their_hash(mini_rubric: Any) -> None:
    # cassettes are keyed by the rubric hash: the new optional field must not change it
    assert "check" not in json.dumps(mini_rubric.snapshot())


def test_bad_check_in_a_pack_names_line_requirement_and_valid_types(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        CHECKED_PACK.replace(
            "type: must_not_contain, keywords: [stupid]",
            "type: must_not_contian, keywords: [stupid]",
        ).replace("keywords: [system prompt]", "keyword: [system prompt]"),
        encoding="utf-8",
    )
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    problems = {p.field: p for p in info.value.problems}
    tone = problems["commonRequirements[1].check"]
    assert tone.where.endswith(":10")
    assert tone.message.startswith("requirement COMMON_TONE: unknown check type 'must_not_contian'")
    assert "must_not_contain" in tone.message and "tool_sequence" in tone.message
    leak = problems["commonRequirements[0].check.keyword"]
    assert "valid fields here: name, type, keywords, scope" in leak.message


def test_a_check_on_an_unobservable_requirement_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        MINI_RUBRIC.replace(
            "observableInData: false, violationScore: 1}",
            "observableInData: false, violationScore: 1, check: {type: privacy}}",
        ),
        encoding="utf-8",
    )
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    assert "decided by that check" in str(info.value)


def test_bad_check_in_a_case_names_the_case_the_field_and_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    row = {
        "rowId": "refund-7",
        "messages": [{"role": "assistant", "content": "hi"}],
        "expected": [
            {"type": "must_contain", "keywords": ["a"]},
            {"type": "max_step", "maxSteps": 3},
            {"type": "tool_sequence", "mode": "subset", "calls": [{"tool": "t", "args": {}}]},
        ],
    }
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    problems = {p.field: p for p in info.value.problems}
    assert problems["expected[1]"].message.startswith(
        "case refund-7: unknown check type 'max_step'"
    )
    assert "max_steps" in problems["expected[1]"].message
    args = problems["expected[2].calls[0].args"].message
    assert args.startswith("case refund-7: unknown field 'args'")


def test_renormalize_applies_a_check_added_in_the_new_version(tmp_path: Path) -> None:
    # a rule check needs no judge: adding one in v2 is re-applied from the stored dialogues
    from rubric_engine.store.task_store import TaskStore
    from tests.conftest import RUBRICS
    from tests.test_lifecycle import health, publish, requirement, run, score, task_id, write_pack

    store = tmp_path / "s.sqlite"
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    assert code == 0, out
    v1_task = task_id(out)
    v2 = health(version=2)
    requirement(v2, "COMMON_CONCISE_NATURAL")["check"] = {
        "type": "regex",
        "pattern": "建议",
        "mustMatch": False,
    }
    publish(store, write_pack(tmp_path / "v2.yaml", v2))
    code, out = run(
        "renormalize", v1_task, "-r", "health_cs@2", "--store", store, "--out", tmp_path / "rn"
    )
    assert code == 0, out
    with TaskStore(store) as opened:
        rows = [s for s in opened.rows(task_id(out)) if s.result.status == "SCORED"]
    decided = {
        s.result.row_id: next(
            b for b in s.result.reference_basis if b.requirement_id == "COMMON_CONCISE_NATURAL"
        )
        for s in rows
    }
    assert all(b.source is BasisSource.RULE for b in decided.values())
    v2_pack = load_rubric(tmp_path / "v2.yaml")
    said_it = set()
    for s in rows:
        row = DialogueRow.model_validate(s.dialogue)
        if "建议" in evidence_from_row(row, v2_pack.output_parsing).final_answer:
            said_it.add(row.row_id)
    assert 0 < len(said_it) < len(rows)
    assert {rid for rid, b in decided.items() if b.status is S.VIOLATED} == said_it
