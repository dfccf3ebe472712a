"""The judge's structured verdict and how its values are cleaned and enforced (SPEC §4).

The judge returns only what is informative (seed 003 §七)::

    {rowId, intentKey, score, redFlagTypes[], scoreExplanation,
     unmetRequirementIds[], partialRequirementIds[], questionsCheck, questionsIssues[]}

:func:`verdict_model` builds one pydantic model per rubric. Its validators *clean* every
intent key, requirement ID and red-flag type (trim, drop invisible characters, NFKC, match
case-insensitively to the pack's spelling) and *reject* what is still unknown, with a message
that lists the valid choices — instructor feeds that message back to the judge as a re-ask.
The JSON Schema sent to the judge carries the same enumerations.

Row-specific facts arrive through the validation context
``{"row_id": str, "case_requirement_ids": [str, ...]}``: pydantic's ``context=``, or
:data:`ROW_CONTEXT` for the duration of one row's judge call. (Not instructor's ``context=``:
instructor renders every message as a Jinja template with it, which would rewrite any
``{{ … }}`` or ``{% … %}`` in a dialogue.)

Accepted score values (anything else is re-asked; a boolean is never a score):

=====================  ===========  ==========================================
judge sent             outcome      why
=====================  ===========  ==========================================
``4``                  4            an integer
``4.0``                4            an integral float is the same number
``"4"``, ``" 4 "``     4            a string holding only an integer
``"４"`` (full-width)   4            NFKC makes it the ASCII digit
``3.5``, ``"3.5"``     re-ask       not an integer; we never round
``"4/5"``, ``"four"``  re-ask       not a bare integer
``true`` / ``false``   re-ask       booleans are not scores
out of the scale       re-ask       the range is part of the protocol
=====================  ===========  ==========================================

Pure: no I/O.
"""

from __future__ import annotations

import copy
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from enum import StrEnum
from functools import lru_cache
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from rubric_engine.judge_reply import extract_verdict_json
from rubric_engine.rubric.model import ID_PATTERN, EvalRubric

#: validation context of the row being judged, set by the judge edge around one call
ROW_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("rubric_eval_row_context", default=None)
_INVISIBLE = re.compile(
    r"[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff]"
)
_INTEGER = re.compile(r"^[+-]?\d+$")
_camel = lru_cache(maxsize=64)(to_camel)  # pydantic's is a few regexes per call


class QuestionsCheck(StrEnum):
    """Finding on the agent's suggested follow-up questions card."""

    NOT_PRESENT = "NOT_PRESENT"
    OK = "OK"
    HAS_ISSUES = "HAS_ISSUES"


@lru_cache(maxsize=4096)  # the same IDs and keys come back in row after row
def clean_token(value: str) -> str:
    """Trim, drop invisible/control characters, NFKC-normalise. Case is kept."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", value)).strip()


def canonical_lookup(spellings: Iterable[str]) -> dict[str, str]:
    """Map ``clean_token(s).casefold()`` to the pack's spelling ``s``."""
    return {clean_token(s).casefold(): s for s in spellings}


def _match(value: Any, lookup: Mapping[str, str]) -> str | None:
    if not isinstance(value, str):
        return None
    return lookup.get(clean_token(value).casefold())


def coerce_score(value: Any, low: int, high: int) -> int:
    """Apply the accepted-score table of this module.

    Raises:
        ValueError: with a message for the judge naming the valid range.
    """
    expected = f"score must be a bare integer from {low} to {high}"
    if isinstance(value, bool):
        raise ValueError(f"{expected}; a boolean ({value!r}) is not a score")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{expected}; {value!r} is not an integer")
        value = int(value)
    elif isinstance(value, str):
        text = clean_token(value)
        if not _INTEGER.match(text):
            raise ValueError(f"{expected}; got the text {value!r}")
        value = int(text)
    if not isinstance(value, int):
        raise ValueError(f"{expected}; got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{expected}; {value} is outside the scale")
    return value


class VerdictBase(BaseModel):
    """Fields and validators shared by every rubric's verdict model.

    Subclasses made by :func:`verdict_model` set the class-level lookup tables.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        json_schema_extra=lambda schema, cls: _enumerate_pack(schema, cls),
    )

    _intents: ClassVar[dict[str, str]] = {}
    _flags: ClassVar[dict[str, str]] = {}
    _requirements: ClassVar[dict[str, str]] = {}
    _scale: ClassVar[tuple[int, int]] = (1, 5)

    row_id: str | None = Field(default=None, description="The rowId of the dialogue judged.")
    intent_key: str = Field(description="Exactly one intent key from the rubric's list.")
    score: int = Field(description="Integer score inside the rubric's score scale.")
    red_flag_types: list[str] = Field(
        default_factory=list, description="Red-line types this dialogue crossed; [] if none."
    )
    score_explanation: str = Field(
        default="", description="1-3 sentences naming the requirement IDs behind the score."
    )
    unmet_requirement_ids: list[str] = Field(
        default_factory=list, description="IDs of applicable requirements that were VIOLATED."
    )
    partial_requirement_ids: list[str] = Field(
        default_factory=list, description="IDs of applicable requirements only partly met."
    )
    questions_check: QuestionsCheck = Field(
        default=QuestionsCheck.NOT_PRESENT,
        description="Finding on the agent's follow-up questions card, if the rubric uses one.",
    )
    questions_issues: list[str] = Field(
        default_factory=list, description="Problems found in the questions card."
    )

    @classmethod
    def model_validate_json(
        cls,
        json_data: str | bytes | bytearray,
        *,
        strict: bool | None = None,
        context: Any | None = None,
        **_: Any,
    ) -> Self:
        """Validate the verdict found in a judge's reply (see :mod:`rubric_engine.judge_reply`).

        ``context`` defaults to :data:`ROW_CONTEXT`. ``strict`` is ignored: the validators of
        this module decide what is accepted (the score table above), whoever calls.

        Raises:
            json.JSONDecodeError: the reply holds no JSON object.
            pydantic.ValidationError: the object breaks the protocol.
        """
        text = json_data if isinstance(json_data, str) else bytes(json_data).decode("utf-8")
        data = json.loads(extract_verdict_json(text))
        return cls.model_validate(data, context=ROW_CONTEXT.get() if context is None else context)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The JSON Schema, computed once per model (it goes into every judge request)."""
        if args or kwargs:
            return super().model_json_schema(*args, **kwargs)
        cached = cls.__dict__.get("_schema_cache")
        if cached is None:
            cached = super().model_json_schema()
            setattr(cls, "_schema_cache", cached)  # noqa: B010 - pydantic guards attributes
        return copy.deepcopy(cached)

    @model_validator(mode="before")
    @classmethod
    def _must_be_object(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the verdict must be one JSON object with the fields of the schema")
        return data

    @field_validator("row_id", mode="before")
    @classmethod
    def _check_row_id(cls, value: Any, info: ValidationInfo) -> Any:
        expected = (info.context or {}).get("row_id")
        if value is None or expected is None:
            return expected if value is None else str(value)
        if clean_token(str(value)).casefold() != clean_token(expected).casefold():
            raise ValueError(f"rowId must be {expected!r}, the dialogue you are judging")
        return expected

    @field_validator("intent_key", mode="before")
    @classmethod
    def _check_intent(cls, value: Any) -> str:
        found = _match(value, cls._intents)
        if found is None:
            raise ValueError(
                f"intentKey {value!r} is not in the rubric; choose exactly one of: "
                f"{', '.join(cls._intents.values())}"
            )
        return found

    @field_validator("score", mode="before")
    @classmethod
    def _check_score(cls, value: Any) -> int:
        return coerce_score(value, *cls._scale)

    @field_validator("red_flag_types", mode="before")
    @classmethod
    def _check_flags(cls, value: Any) -> list[str]:
        return _clean_list(value, cls._flags, "red-flag type", "redFlagTypes")

    @field_validator("unmet_requirement_ids", "partial_requirement_ids", mode="before")
    @classmethod
    def _check_ids(cls, value: Any, info: ValidationInfo) -> list[str]:
        lookup = cls._requirements
        extra = (info.context or {}).get("case_requirement_ids") or ()
        if extra:
            lookup = {**lookup, **canonical_lookup(extra)}
        return _clean_list(value, lookup, "requirement ID", _camel(str(info.field_name)))

    @field_validator("questions_check", mode="before")
    @classmethod
    def _check_questions(cls, value: Any) -> Any:
        if value is None:
            return QuestionsCheck.NOT_PRESENT
        found = _match(value, _QUESTIONS_CHECKS)
        if found is None:
            raise ValueError(
                f"questionsCheck {value!r} is invalid; use one of {', '.join(QuestionsCheck)}"
            )
        return found

    @field_validator("score_explanation", mode="before")
    @classmethod
    def _explanation_text(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("questions_issues", mode="before")
    @classmethod
    def _issues_list(cls, value: Any) -> Any:
        return [] if value is None else value


_QUESTIONS_CHECKS = canonical_lookup(QuestionsCheck)


def _enumerate_pack(schema: dict[str, Any], cls: Any) -> None:
    """Put the pack's closed sets into the schema the judge is sent."""
    props = schema.get("properties", {})
    if cls._intents:
        props["intentKey"]["enum"] = list(cls._intents.values())
    if cls._flags:
        props["redFlagTypes"]["items"] = {"type": "string", "enum": list(cls._flags.values())}
    props["score"]["minimum"], props["score"]["maximum"] = cls._scale
    for name in ("unmetRequirementIds", "partialRequirementIds"):
        props[name]["items"] = {"type": "string", "pattern": ID_PATTERN}


def _clean_list(value: Any, lookup: Mapping[str, str], what: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{field} must be a JSON array of strings")
    out: list[str] = []
    unknown: list[str] = []
    for item in value:
        found = _match(item, lookup)
        if found is None:
            unknown.append(repr(item))
        else:
            out.append(found)
    if unknown:
        raise ValueError(
            f"{field}: {', '.join(unknown)} is not a {what} of this rubric; valid: "
            f"{', '.join(dict.fromkeys(lookup.values()))}"
        )
    return out


def verdict_model(rubric: EvalRubric) -> type[VerdictBase]:
    """The verdict model for one rubric snapshot (cached by content hash).

    The JSON Schema of the result enumerates the pack's intent keys and red-flag types and the
    score range, so a provider with schema-constrained decoding enforces them too.
    """
    return _verdict_model(
        rubric.content_hash(),
        tuple(i.key for i in rubric.intents),
        rubric.red_flag_types,
        tuple(rubric.requirements_by_id),
        (rubric.score_scale.min, rubric.score_scale.max),
    )


@lru_cache(maxsize=64)
def _verdict_model(
    _hash: str,
    intents: tuple[str, ...],
    flags: tuple[str, ...],
    requirement_ids: tuple[str, ...],
    scale: tuple[int, int],
) -> type[VerdictBase]:
    model = create_model("JudgeVerdict", __base__=VerdictBase)
    model._intents = canonical_lookup(intents)
    model._flags = canonical_lookup(flags)
    model._requirements = canonical_lookup(requirement_ids)
    model._scale = scale
    return model
