"""Eval cases (the general schema and its specialist fields, docs/cases.md) as dialogue rows.

A case says what is tested; the agent's run (``messages``, or ``output``) sits next to it in
the same object. Identity, judgement and governance fields are validated here
(:class:`EvalCase`); then:

* ``expected_behavior`` (and an Agent case's ``success_criteria``) → case-level requirements
  the judge sees (``CASE_EXPECTED_<hash>``); ``negative_behavior`` (and ``failure_criteria``)
  → ``CASE_NEGATIVE_<hash>`` (:mod:`rubric_engine.rubric.case_level`);
* rule checks: ``evaluator_config.rule_checks`` (a named check such as ``no_privacy_leak``,
  or a check object), ``constraints.must_include`` (all must appear),
  ``expected_tool_sequence`` + ``expected_args`` (tool calls in that order, other calls
  allowed, arguments by inclusion), ``gold_evidence`` entries with ``required: true``
  (the document is retrieved);
* every other case field → the row's metadata (snake_case, as the case spells it), with
  ``metadata``'s own fields (``dataset_role``, ``tags``, ``owner``, ``review_status``,
  ``usage_rights_status``) merged in.

Pure.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubric_engine.cases.run import CONVERSATION_KEYS, run_fields
from rubric_engine.dialogue.errors import RowShapeError

#: a row object is an eval case when it has both identity fields
MARKER_KEYS = ("case_id", "case_version")
RUN_KEYS = (
    *CONVERSATION_KEYS,
    "output",
    "trace",
    "expected",
    "referenceOutput",
    "reference_output",
)
#: named rule checks ``evaluator_config.rule_checks`` may list
NAMED_CHECKS: dict[str, dict[str, Any]] = {
    "no_privacy_leak": {"type": "privacy", "name": "no_privacy_leak"},
}


def _canonical(value: Any, choices: type[StrEnum]) -> Any:
    """Accept any case and ``-``/``_``/space spelling of an enum value (``hard_negative``)."""
    if isinstance(value, str):
        key = value.strip().lower().replace("-", " ").replace("_", " ")
        for member in choices:
            if member.value.lower().replace("_", " ") == key:
                return member.value
    return value


class RiskLevel(StrEnum):
    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"


class Difficulty(StrEnum):
    EASY = "Easy"
    MEDIUM = "Medium"
    HARD = "Hard"
    HARD_NEGATIVE = "Hard Negative"
    ADVERSARIAL = "Adversarial"


class DatasetRole(StrEnum):
    """Golden, regression, hard case or red team; the suite's tiers add seed and production."""

    SEED = "seed"
    GOLDEN = "golden"
    REGRESSION = "regression"
    HARD_CASE = "hard_case"
    RED_TEAM = "red_team"
    ADVERSARIAL = "adversarial"
    PRODUCTION = "production"


class ReviewStatus(StrEnum):
    """The case review's ``review_result``, plus ``pending`` for a case not reviewed yet."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    NEEDS_REVISION = "needs_revision"


class _Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseMetadata(_Case):
    """``metadata`` holds at least these; other keys are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    dataset_role: DatasetRole
    tags: tuple[str, ...]
    owner: str = Field(min_length=1)
    review_status: ReviewStatus
    usage_rights_status: str | dict[str, Any]

    @field_validator("dataset_role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> Any:
        return _canonical(value, DatasetRole)

    @field_validator("review_status", mode="before")
    @classmethod
    def _review(cls, value: Any) -> Any:
        return _canonical(value, ReviewStatus)


class EvalCase(_Case):
    """One eval case (docs/cases.md; the specialist fields optional).

    Required: identity (``case_id``, ``case_version``, ``dataset_id``, ``dataset_version``),
    classification (``title``, ``scenario``, ``user_task``, ``ability_tags``, ``risk_level``
    P0–P3, ``difficulty``, ``source``), ``input``, ``expected_behavior`` (at least one),
    ``rubric``, ``evaluator_config`` and ``metadata``. Unknown fields are rejected, so a
    misspelt optional field is caught.
    """

    case_id: str = Field(min_length=1)
    case_version: str | int
    dataset_id: str = Field(min_length=1)
    dataset_version: str | int
    title: str = Field(min_length=1)
    scenario: str = Field(min_length=1)
    user_task: str = Field(min_length=1)
    ability_tags: tuple[str, ...]
    risk_level: RiskLevel
    difficulty: Difficulty
    source: str = Field(min_length=1)
    input: str | dict[str, Any]
    context: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    expected_behavior: tuple[str, ...] = Field(min_length=1)
    negative_behavior: tuple[str, ...] = ()
    rubric: str | dict[str, Any] | list[Any]
    evaluator_config: dict[str, Any]
    metadata: CaseMetadata
    # an LLM case
    reference: Any = None
    constraints: dict[str, Any] | None = None
    generation_config: dict[str, Any] | None = None
    # a RAG case
    gold_evidence: tuple[dict[str, Any], ...] = ()
    environment_requirements: dict[str, Any] | None = None
    context_policy: str | None = None
    citation_requirement: str | None = None
    evaluation_metrics: tuple[str, ...] = ()
    # a tool case
    user_goal: str | None = None
    state: dict[str, Any] | None = None
    available_tools: tuple[str, ...] = ()
    tool_schema: Any = None
    expected_tool: str | None = None
    expected_tool_sequence: tuple[str, ...] = ()
    expected_args: dict[str, dict[str, Any]] | None = None
    expected_result_usage: Any = None
    side_effect_policy: dict[str, Any] | None = None
    # an agent case
    goal: str | None = None
    initial_state: dict[str, Any] | None = None
    interaction: Any = None
    trace_requirement: dict[str, Any] | None = None
    success_criteria: tuple[str, ...] = ()
    failure_criteria: tuple[str, ...] = ()
    safety_constraints: Any = None
    final_state_check: Any = None
    # a business application case
    business_scenario: str | None = None
    user_journey: Any = None
    sop: Any = None
    policy_constraints: Any = None
    service_level: Any = None
    business_success: Any = None
    audit_requirement: Any = None

    @field_validator("risk_level", mode="before")
    @classmethod
    def _risk(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("difficulty", mode="before")
    @classmethod
    def _difficulty(cls, value: Any) -> Any:
        return _canonical(value, Difficulty)


def eval_case_fields() -> str:
    """The top-level fields an eval case may have: the case's own, then the run's."""
    return ", ".join([*(f.alias or n for n, f in EvalCase.model_fields.items()), *RUN_KEYS])


def is_eval_case(obj: Any) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in MARKER_KEYS)


def _rule_checks(case: EvalCase) -> list[Any]:
    checks: list[Any] = []
    for i, item in enumerate(case.evaluator_config.get("rule_checks") or []):
        if isinstance(item, str):
            if item not in NAMED_CHECKS:
                raise RowShapeError(
                    f"evaluator_config.rule_checks[{i}]",
                    f"unknown named check {item!r}; valid "
                    f"names: {', '.join(NAMED_CHECKS)} (or write a check object with a `type`)",
                )
            checks.append(NAMED_CHECKS[item])
        else:
            checks.append(item)
    must_include = (case.constraints or {}).get("must_include")
    if must_include:
        checks.append(
            {
                "type": "must_contain",
                "name": "constraints.must_include",
                "keywords": list(must_include),
            }
        )
    if case.expected_tool_sequence:
        args = case.expected_args or {}
        checks.append(
            {
                "type": "tool_sequence",
                "name": "expected_tool_sequence",
                "mode": "subset",
                "ordered": True,
                "calls": [
                    {"tool": tool, **({"arguments": args[tool]} if tool in args else {})}
                    for tool in case.expected_tool_sequence
                ],
            }
        )
    for doc in case.gold_evidence:
        if doc.get("required") and doc.get("doc_id"):
            checks.append(
                {"type": "reference_document", "name": "gold_evidence", "docId": doc["doc_id"]}
            )
    return checks


def eval_case_row(obj: dict[str, Any]) -> dict[str, Any]:
    """Map an eval case plus its run to a row object.

    Raises:
        pydantic.ValidationError: a case field is missing or invalid (names the field and,
            for enums, the valid values).
        RowShapeError: an unknown named rule check, or the object has no run (``messages``
            or ``output``).
    """
    case = EvalCase.model_validate({k: v for k, v in obj.items() if k not in RUN_KEYS})
    fields = run_fields(obj, case.input, "eval case")
    metadata = case.model_dump(
        mode="json",
        exclude={
            "expected_behavior",
            "negative_behavior",
            "success_criteria",
            "failure_criteria",
            "metadata",
        },
        exclude_none=True,
        exclude_defaults=True,
    )
    metadata.update(case.metadata.model_dump(mode="json"))
    metadata["case_id"], metadata["case_version"] = case.case_id, case.case_version
    return {
        "rowId": case.case_id,
        **fields,
        "trace": fields.get("trace", obj.get("trace")),
        "referenceOutput": obj.get("referenceOutput", obj.get("reference_output", case.reference)),
        "expectedBehavior": [*case.expected_behavior, *case.success_criteria],
        "negativeBehavior": [*case.negative_behavior, *case.failure_criteria],
        "expected": [*_rule_checks(case), *(obj.get("expected") or [])],
        "metadata": metadata,
    }
