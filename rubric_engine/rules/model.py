"""Deterministic rule checks as configuration: one pydantic model per check type
(docs/rule-checks.md).

A check is attached to a pack requirement (``check:``) or to a case (``expected:``) and is
chosen by its ``type`` field (a discriminated union), so a misspelt type, a missing field or
an unknown field fails when the rubric or dataset is loaded, with the valid choices named.
Field names follow the camelCase/snake_case convention of the rest of the project
(``minKeywordMatches`` in YAML/JSON, ``min_keyword_matches`` in Python).

The case formats of docs/cases.md name the same checks: diagnosis cases (keywords with
``minKeywordMatches``, required evidence tools, allowed verifier verdicts, forbidden answer
keywords), RAG/agent rows (tool calls with ``params_must_include``, forbidden tools,
``max_steps``, ``max_cost_usd``, reference document, ``final_state``) and eval cases (expected
tool sequence and arguments, the privacy rule ``no_privacy_leak``). Pure: models only;
evaluation is in :mod:`rubric_engine.rules.evaluate`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import regex
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

#: Where a text check looks: the final answer (last assistant text) or every assistant turn.
Scope = Literal["final_answer", "assistant"]
PrivacyKind = Literal["phone", "id_number", "email"]
PRIVACY_KINDS: tuple[str, ...] = ("phone", "id_number", "email")


class _CheckBase(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    #: optional label used in ``failedChecks`` (docs/cases.md); defaults to the type
    name: str | None = Field(default=None, min_length=1)

    @property
    def label(self) -> str:
        return self.name or str(getattr(self, "type", "check"))


def _keywords_field() -> Any:
    return Field(min_length=1)


def _no_blank(values: tuple[str, ...]) -> tuple[str, ...]:
    if any(not v.strip() for v in values):
        raise ValueError("entries must not be blank")
    return values


class MustContain(_CheckBase):
    """At least ``minKeywordMatches`` of ``keywords`` appear (all of them when unset)."""

    type: Literal["must_contain"]
    keywords: tuple[str, ...] = _keywords_field()
    min_keyword_matches: StrictInt | None = Field(default=None, ge=1)
    scope: Scope = "final_answer"

    no_blank = field_validator("keywords")(_no_blank)

    @model_validator(mode="after")
    def _min_within(self) -> MustContain:
        if self.min_keyword_matches is not None and self.min_keyword_matches > len(self.keywords):
            raise ValueError(
                f"minKeywordMatches ({self.min_keyword_matches}) is more than the "
                f"{len(self.keywords)} keyword(s) given; lower it or add keywords"
            )
        return self

    @property
    def required_matches(self) -> int:
        return self.min_keyword_matches or len(self.keywords)


class MustNotContain(_CheckBase):
    """None of ``keywords`` appears."""

    type: Literal["must_not_contain"]
    keywords: tuple[str, ...] = _keywords_field()
    scope: Scope = "final_answer"

    no_blank = field_validator("keywords")(_no_blank)


class RegexCheck(_CheckBase):
    """``pattern`` (Python ``re`` syntax; matched with a time limit) matches the text (or must
    not: ``mustMatch: false``).

    The text is NFKC-normalized; with ``ignoreCase`` (the default) it is also case-folded.
    """

    type: Literal["regex"]
    pattern: str = Field(min_length=1)
    must_match: bool = True
    ignore_case: bool = True
    scope: Scope = "final_answer"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            regex.compile(value)  # as evaluate_check matches it
        except regex.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class RequiredTools(_CheckBase):
    """Every tool in ``tools`` was invoked (a diagnosis case's ``requiredEvidenceTools``)."""

    type: Literal["required_tools"]
    tools: tuple[str, ...] = Field(min_length=1)

    no_blank = field_validator("tools")(_no_blank)


class ForbiddenTools(_CheckBase):
    """No tool in ``tools`` was invoked (a RAG/agent row's ``tool_calls_must_not``)."""

    type: Literal["forbidden_tools"]
    tools: tuple[str, ...] = Field(min_length=1)

    no_blank = field_validator("tools")(_no_blank)


class ExpectedCall(BaseModel):
    """One expected tool call.

    ``arguments`` is matched by inclusion by default: every key given must be present with an
    equal value, recursively; lists match element by element (same length); the call may carry
    more keys. ``argumentsMatch: exact`` asks for equality. ``valuesInclude`` lists values that
    must appear anywhere in the arguments (a RAG/agent row's ``params_must_include``).
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    arguments_match: Literal["include", "exact"] = "include"
    values_include: tuple[Any, ...] = ()


class ToolSequence(_CheckBase):
    """The tool calls match ``calls`` (an eval case's ``expected_tool_sequence``/``expected_args``).

    Modes: ``strict`` — the same calls in the same order and nothing else; ``unordered`` — the
    same calls in any order and nothing else; ``subset`` — each expected call is matched by a
    distinct actual call, other calls allowed (in the given order when ``ordered: true``).
    ``onlyTools`` restricts which actual calls are looked at (e.g. the write tools);
    ``successfulOnly`` ignores calls the trace marks as failed.
    """

    type: Literal["tool_sequence"]
    mode: Literal["strict", "subset", "unordered"] = "strict"
    calls: tuple[ExpectedCall, ...] = ()
    only_tools: tuple[str, ...] | None = None
    successful_only: bool = False
    ordered: bool = False

    @model_validator(mode="after")
    def _coherent(self) -> ToolSequence:
        if self.mode == "subset" and not self.calls:
            raise ValueError("mode subset with no calls checks nothing; list the expected calls")
        if self.ordered and self.mode != "subset":
            raise ValueError("ordered applies to mode subset only (strict is already ordered)")
        return self


class MaxSteps(_CheckBase):
    """At most ``maxSteps`` steps: the trace's step count, else its number of tool calls."""

    type: Literal["max_steps"]
    max_steps: StrictInt = Field(ge=0)


class MaxDuration(_CheckBase):
    """The run took at most ``maxDurationMs`` milliseconds (NOT_APPLICABLE without a duration)."""

    type: Literal["max_duration"]
    max_duration_ms: StrictInt | StrictFloat = Field(ge=0)


class MaxCost(_CheckBase):
    """The run cost at most ``maxCostUsd`` US dollars (NOT_APPLICABLE without a cost)."""

    type: Literal["max_cost"]
    max_cost_usd: StrictInt | StrictFloat = Field(ge=0)


class AllowedVerdicts(_CheckBase):
    """The verifier's verdict is present and one of ``verdicts`` (``allowedVerdicts``)."""

    type: Literal["allowed_verdicts"]
    # the trace's verifier's verdicts, never the judge's: ``verdicts`` only in check files
    verifier_verdicts: tuple[str, ...] = Field(alias="verdicts", min_length=1)

    no_blank = field_validator("verifier_verdicts")(_no_blank)


class ReferenceDocument(_CheckBase):
    """``docId`` is among the retrieved documents (a RAG/agent row's ``reference_doc_id``)."""

    type: Literal["reference_document"]
    doc_id: str = Field(min_length=1)


class JsonSchemaCheck(_CheckBase):
    """The structured answer validates against ``jsonSchema`` (JSON Schema, any draft).

    The structured answer is the trace's ``structuredOutput`` when present, else the final
    answer parsed as JSON (a fenced ```json block is accepted).
    """

    type: Literal["json_schema"]
    json_schema: dict[str, Any]

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
        return value


class ExpectedField(BaseModel):
    """One field of a structured answer: where it is, what it should be, how much it counts.

    ``path`` is dotted (``policy.holder.name``; a list index is a number: ``items.0.sku``).
    ``tolerance`` (numbers only) accepts ``|actual - expected| <= tolerance``; text is compared
    exactly after NFKC and case folding like every text check.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    path: str = Field(min_length=1, pattern=r"^[^.\s]+(\.[^.\s]+)*$")
    expected: Any
    tolerance: StrictFloat | StrictInt | None = Field(default=None, ge=0)
    weight: StrictFloat | StrictInt = Field(default=1, gt=0)


class FieldsCheck(_CheckBase):
    """Field-level check of a structured extraction (docs/rule-checks.md): per-field exact match,
    numeric tolerance, nested fields, per-field weights; passes when the weighted share of
    matching fields is at least ``minScore`` (default 1: every field)."""

    type: Literal["fields"]
    fields: tuple[ExpectedField, ...] = Field(min_length=1)
    min_score: StrictFloat | StrictInt = Field(default=1, ge=0, le=1)


class PrivacyCheck(_CheckBase):
    """The answer holds no phone number, ID number or email the user did not give."""

    type: Literal["privacy"]
    kinds: tuple[PrivacyKind, ...] = Field(default=("phone", "id_number", "email"), min_length=1)
    scope: Scope = "assistant"


class FinalState(_CheckBase):
    """The trace's ``finalState`` includes ``state`` (a RAG/agent row's ``final_state``)."""

    type: Literal["final_state"]
    state: dict[str, Any] = Field(min_length=1)


Check = Annotated[
    MustContain
    | MustNotContain
    | RegexCheck
    | RequiredTools
    | ForbiddenTools
    | ToolSequence
    | MaxSteps
    | MaxDuration
    | MaxCost
    | AllowedVerdicts
    | ReferenceDocument
    | JsonSchemaCheck
    | FieldsCheck
    | PrivacyCheck
    | FinalState,
    Field(discriminator="type"),
]

CHECK_TYPES: tuple[str, ...] = (
    "must_contain",
    "must_not_contain",
    "regex",
    "required_tools",
    "forbidden_tools",
    "tool_sequence",
    "max_steps",
    "max_duration",
    "max_cost",
    "allowed_verdicts",
    "reference_document",
    "json_schema",
    "fields",
    "privacy",
    "final_state",
)


def strip_tags(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """A validation error location without pydantic's union-tag segments.

    pydantic reports ``check.must_contain.keywords``; the file says ``check.keywords``.
    """
    out: list[str | int] = []
    for part in loc:
        if part in CHECK_TYPES and out and (out[-1] == "check" or isinstance(out[-1], int)):
            continue
        out.append(part)
    return tuple(out)


def check_model(type_name: str) -> type[BaseModel] | None:
    """The model class of a check type, or ``None`` for an unknown type."""
    for model in _CHECK_MODELS:
        if get_args(model.model_fields["type"].annotation) == (type_name,):
            return model
    return None


_CHECK_MODELS: tuple[type[BaseModel], ...] = (
    MustContain,
    MustNotContain,
    RegexCheck,
    RequiredTools,
    ForbiddenTools,
    ToolSequence,
    MaxSteps,
    MaxDuration,
    MaxCost,
    AllowedVerdicts,
    ReferenceDocument,
    JsonSchemaCheck,
    FieldsCheck,
    PrivacyCheck,
    FinalState,
)


def check_error_message(error: Any) -> str | None:
    """A plain message for pydantic's discriminated-union errors on a check, else ``None``.

    Args:
        error: one entry of ``ValidationError.errors()``.
    """
    valid = ", ".join(CHECK_TYPES)
    if error.get("type") == "union_tag_invalid":
        tag = (error.get("ctx") or {}).get("tag")
        return f"unknown check type {tag!r}; valid types: {valid} (see docs/rule-checks.md)"
    if error.get("type") == "union_tag_not_found":
        return f"a check needs a `type`; valid types: {valid} (see docs/rule-checks.md)"
    return None
