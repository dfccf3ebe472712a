"""The one row → result step: every producer gets the same result from the
same inputs, and the pieces it is built from are worked out once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dialogue.shapes import row_from_object
from rubric_engine.engine.options import DEFAULTS, ScoreOptions, check_options
from rubric_engine.engine.pipeline import RequestBuilder, judge_warnings
from rubric_engine.engine.pipeline import row_result as pipeline_row_result
from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError
from rubric_engine.judge.prompt import load_prompt
from rubric_engine.judge.protocol import JudgeOutcome
from rubric_engine.results.model import (
    JudgeError,
    JudgeErrorKind,
    ProtocolWarning,
    RowStatus,
    WarningCode,
)
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.results.row_result import row_result
from rubric_engine.rubric import load_rubric
from rubric_engine.rubric.case_level import row_case_requirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rules.run import run_rules
from tests.test_normalize_warnings import judge
from tests.test_rules_merge import CHECKED_PACK

ROW = {
    "rowId": "r1",
    "messages": [
        {"role": "user", "content": "refund please"},
        {"role": "assistant", "content": "Here is my system prompt: …"},
    ],
    "expectedBehavior": ["Ask for the order number."],
    "negativeBehavior": ["Promise a refund before checking."],
    "expected": [{"type": "must_contain", "keywords": ["order number"]}],
}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("pack") / "checked.yaml"
    path.write_text(CHECKED_PACK, encoding="utf-8")
    return load_rubric(path)


def test_case_requirements_are_derived_once_behaviours_then_rule_checks(pack: Any) -> None:
    row = row_from_object(ROW, "r1")
    case = row_case_requirements(row)
    assert [r.id[:13] for r in case.behaviours] == ["CASE_EXPECTED", "CASE_NEGATIVE"]
    assert [r.id[:10] for r in case.rules] == ["CASE_RULE_"]
    prepared = RequestBuilder(pack, load_prompt()).prepare(0, row)
    assert prepared.case == case and prepared.case_requirements == case.all
    # the judge is asked about the behaviours only
    assert prepared.request.case_requirement_ids == tuple(r.id for r in case.behaviours)


def test_a_scored_row_is_the_normalizer_with_the_rule_checks_merged(pack: Any) -> None:
    row = row_from_object(ROW, "r1")
    compiled = CompiledRubric.of(pack)
    case, rules = row_case_requirements(row), run_rules(compiled, row)
    verdict = judge(pack, score=4)
    applicable = [r.id for r in compiled.applicable(verdict.intent_key, case.all)]
    expected = normalize_verdict(
        pack, verdict, "r1", case.all, rule_results=rules.statuses(applicable)
    )
    result = row_result(compiled, row, case, rules, verdict)
    assert result.status is RowStatus.SCORED
    assert result.model_copy(update={"rules": None}) == expected
    assert result.rules is not None
    assert [c.requirement_id for c in result.rules.checks] == [
        "COMMON_LEAK",
        "COMMON_TONE",
        case.rules[0].id,
    ]


def test_the_same_row_gives_the_same_result_through_the_pipeline(pack: Any) -> None:
    row = row_from_object(ROW, "r1")
    compiled = CompiledRubric.of(pack)
    prepared = RequestBuilder(pack, load_prompt()).prepare(0, row)
    for outcome in (
        JudgeOutcome(verdict=judge(pack, score=2), error=None, reasks=["why"]),
        JudgeOutcome(verdict=None, error=JudgeError(kind=JudgeErrorKind.REFUSED, message="no")),
        JudgeOutcome(verdict=None, error=None),
    ):
        direct = row_result(
            compiled,
            row,
            row_case_requirements(row),
            run_rules(compiled, row),
            outcome.verdict,
            outcome.error,
            judge_warnings(outcome),
        )
        assert pipeline_row_result(compiled, prepared, outcome) == direct


def test_a_judge_error_row_has_no_score_but_keeps_its_rule_summary(pack: Any) -> None:
    row = row_from_object(ROW, "r1")
    error = JudgeError(kind=JudgeErrorKind.INVALID_OUTPUT, message="re-asks ran out", attempts=3)
    reask = ProtocolWarning(code=WarningCode.JUDGE_REASKED, detail="bad JSON")
    compiled = CompiledRubric.of(pack)
    result = row_result(
        compiled, row, row_case_requirements(row), run_rules(compiled, row), None, error, [reask]
    )
    assert result.status is RowStatus.JUDGE_ERROR and result.final_score is None
    assert result.warnings == (reask,) and result.error == error
    assert result.rules is not None and not result.rules.passed
    assert result.reference_basis == ()


def test_a_checked_row_carries_no_judge_warnings(pack: Any) -> None:
    row = row_from_object(ROW, "r1")
    reask = ProtocolWarning(code=WarningCode.JUDGE_REASKED, detail="never asked")
    compiled = CompiledRubric.of(pack)
    result = row_result(
        compiled, row, row_case_requirements(row), run_rules(compiled, row), warnings=[reask]
    )
    assert result.status is RowStatus.CHECKED and result.warnings == ()
    assert result.red_flag_types == ("BACKEND_EXPOSURE",)  # the rule-violated red line


def test_the_judges_cleanups_follow_its_reasks_on_the_row(pack: Any) -> None:
    trimmed = ProtocolWarning(
        code=WarningCode.JUDGE_VALUE_TRIMMED, detail="stand-in for a clean-up"
    )
    outcome = JudgeOutcome(
        verdict=judge(pack), error=None, reasks=["first"], parse_warnings=[trimmed]
    )
    warnings = judge_warnings(outcome)
    assert [w.detail for w in warnings] == ["first", "stand-in for a clean-up"]


def test_every_error_exits_with_a_code_from_the_one_table() -> None:
    def subclasses(cls: type[RubricEvalError]) -> list[type[RubricEvalError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    for cls in subclasses(RubricEvalError):
        assert isinstance(cls.exit_code, ExitCode), cls


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"concurrency": 0}, "--concurrency must be at least 1"),
        ({"max_tokens": 8}, "--max-tokens must be at least 16"),
        ({"timeout_s": 0.01}, "--timeout must be at least 0.1"),
        ({"temperature": 2.5}, "--temperature must be between 0 and 2"),
    ],
)
def test_the_library_and_the_cli_refuse_the_same_values(
    change: dict[str, Any], message: str, tmp_path: Path
) -> None:
    options = ScoreOptions(inputs=[tmp_path / "x.jsonl"], rubric="k", **change)
    with pytest.raises(ConfigurationError, match=message):
        check_options(options)
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    flag = {"concurrency": "--concurrency", "max_tokens": "--max-tokens"}.get(next(iter(change)))
    flag = flag or {"timeout_s": "--timeout", "temperature": "--temperature"}[next(iter(change))]
    args = ["score", str(tmp_path / "x.jsonl"), "--rubric", "k", flag, str(*change.values())]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.BAD_INPUT and message in result.output
    assert DEFAULTS.concurrency == 8  # the one declaration the CLI reads
