"""The judge's structured verdict and how its values are cleaned and enforced (docs/protocol.md §5).

The judge returns only what is informative (docs/protocol.md §4)::

    {rowId, intentKey, score, redFlagTypes[], scoreExplanation,
     unmetRequirementIds[], partialRequirementIds[], questionsCheck, questionsIssues[]}

:func:`verdict_model` builds one pydantic model per rubric. Its validators *clean* every
intent key, requirement ID and red-flag type (trim, drop invisible characters, NFKC, match
case-insensitively to the pack's spelling) and *reject* what is still unknown, with a message
that lists the valid choices — the judge is re-asked with that message.
The JSON Schema sent to the judge carries the same enumerations.

Row-specific facts arrive through pydantic's validation context, passed explicitly by the
caller (:func:`rubric_engine.verdict.parse.parse_reply`)::

    {"row_id": str, "case_requirement_ids": [str, ...], "cleanups": [ProtocolWarning, ...]}

``cleanups`` is optional: when present, every clean-up a validator applies to a judge value
(an ID, intent key, red-flag type, rowId or questionsCheck) is appended to it as a counted row
warning (docs/protocol.md §5 "every clean-up is a counted warning"), one per kind of change:

- ``" REFUND "`` → ``REFUND``: ``JUDGE_VALUE_TRIMMED``
- ``"refund"`` → ``REFUND``: ``JUDGE_VALUE_RECASED``
- ``REF`` + U+00AD + ``UND``, U+200B + ``REFUND`` → ``REFUND``:
  ``INVISIBLE_CHARACTER_REMOVED`` (every Unicode format character, category Cf, the soft
  hyphen included; control characters too)
- ``"ＲＥＦＵＮＤ"`` (full-width) → ``REFUND``: ``JUDGE_VALUE_NFKC_NORMALIZED``
- the same red-flag type twice → kept once: ``DUPLICATE_RED_FLAG_TYPE``
- a score sent as text (``"4"``, ``"4.0"``, ``"４"``) → 4: ``SCORE_TEXT_CONVERTED``

(A requirement ID listed twice is kept and warned by the normalizer, DUPLICATE_REQUIREMENT_ID.)

Accepted score values (anything else is re-asked; a boolean is never a score):

=====================  ===========  ==========================================
judge sent             outcome      why
=====================  ===========  ==========================================
``4``                  4            an integer
``4.0``                4            an integral float is the same number
``"4"``, ``" 4 "``     4            a string holding only an integer (warned)
``"4.0"``, ``"4.00"``  4            a numeric string with a zero fraction (warned)
``"４"`` (full-width)   4            NFKC makes it the ASCII digit (warned)
``3.5``, ``"3.5"``     re-ask       not an integer; we never round
``"4/5"``, ``"four"``  re-ask       not a bare integer
``true`` / ``false``   re-ask       booleans are not scores
out of the scale       re-ask       the range is part of the protocol
=====================  ===========  ==========================================

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Any, ClassVar

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

from rubric_engine.results.model import ProtocolWarning, WarningCode
from rubric_engine.rubric.model import ID_PATTERN, EvalRubric

#: dropped from every ID, key and type: the line separators and the characters (besides every
#: category Cc and Cf one) that the first version of this table removed
_ALSO_INVISIBLE = frozenset("\u2028\u2029\u202f\u2065")
_INTEGER = re.compile(r"^[+-]?\d+(?:\.0+)?$")
_camel = lru_cache(maxsize=64)(to_camel)  # pydantic's is a few regexes per call
_TEXT = frozenset({str})  # the one type of a JSON string (no subclass: it is kept as sent)


class QuestionsCheck(StrEnum):
    """Finding on the agent's suggested follow-up questions card."""

    NOT_PRESENT = "NOT_PRESENT"
    OK = "OK"
    HAS_ISSUES = "HAS_ISSUES"


def _visible(char: str) -> bool:
    return char not in _ALSO_INVISIBLE and unicodedata.category(char) not in ("Cc", "Cf")


@lru_cache(maxsize=4096)  # the same IDs and keys come back in row after row
def clean_token(value: str) -> str:
    """NFKC-normalise, drop invisible characters (every Unicode category Cf and Cc one), trim.

    Case is kept. The soft hyphen (U+00AD), zero-width and bidi marks and the BOM are Cf.
    """
    text = unicodedata.normalize("NFKC", value)
    return "".join(c for c in text if _visible(c)).strip()


@lru_cache(maxsize=4096)
def cleanup_codes(sent: str, kept: str) -> tuple[WarningCode, ...]:
    """The kinds of clean-up that turned the judge's ``sent`` into the pack's ``kept`` spelling.

    Returns:
        In a fixed order (NFKC, invisible, trimmed, re-cased); empty when ``sent == kept``.
    """
    if sent == kept:
        return ()
    codes: list[WarningCode] = []
    text = unicodedata.normalize("NFKC", sent)
    if text != sent:
        codes.append(WarningCode.JUDGE_VALUE_NFKC_NORMALIZED)
    visible = "".join(c for c in text if _visible(c))
    if visible != text:
        codes.append(WarningCode.INVISIBLE_CHARACTER_REMOVED)
    if visible.strip() != visible:
        codes.append(WarningCode.JUDGE_VALUE_TRIMMED)
    if visible.strip() != kept:
        codes.append(WarningCode.JUDGE_VALUE_RECASED)
    return tuple(codes)


def canonical_lookup(spellings: Iterable[str]) -> dict[str, str]:
    """Map ``clean_token(s).casefold()`` to the pack's spelling ``s``."""
    return {clean_token(s).casefold(): s for s in spellings}


def _match(value: Any, lookup: Mapping[str, str]) -> str | None:
    if not isinstance(value, str):
        return None
    return lookup.get(clean_token(value).casefold())


def _note(info: ValidationInfo, field: str, sent: Any, kept: str, **where: str | None) -> None:
    """Record the clean-ups from ``sent`` to ``kept`` in the context's ``cleanups`` list."""
    sink = (info.context or {}).get("cleanups")
    if sink is None or not isinstance(sent, str):
        return
    for code in cleanup_codes(sent, kept):
        sink.append(
            ProtocolWarning(code=code, detail=f"{field}: {sent!r} read as {kept!r}", **where)
        )


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
        value = int(text.split(".")[0])
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
    #: the pack's own spellings (the values of the tables above): a judge value that is one
    #: of them is kept as sent, with nothing to clean or note
    _intent_spellings: ClassVar[frozenset[str]] = frozenset()
    _flag_spellings: ClassVar[frozenset[str]] = frozenset()
    _requirement_spellings: ClassVar[frozenset[str]] = frozenset()
    #: the requirement IDs a judge may be told to list: the observable ones (the prompt says
    #: never to list one marked UNOBSERVABLE, so no re-ask or schema offers those)
    _listable: ClassVar[tuple[str, ...]] = ()
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
        if value == expected:  # the usual answer: nothing to clean, nothing to note
            return expected
        if clean_token(str(value)).casefold() != clean_token(expected).casefold():
            raise ValueError(f"rowId must be {expected!r}, the dialogue you are judging")
        _note(info, "rowId", value, expected)
        return expected

    @field_validator("intent_key", mode="before")
    @classmethod
    def _check_intent(cls, value: Any, info: ValidationInfo) -> str:
        if type(value) is str and value in cls._intent_spellings:
            return value  # the pack's spelling: nothing to clean
        found = _match(value, cls._intents)
        if found is None:
            raise ValueError(
                f"intentKey {value!r} is not in the rubric; choose exactly one of: "
                f"{', '.join(cls._intents.values())}"
            )
        _note(info, "intentKey", value, found)
        return found

    @field_validator("score", mode="before")
    @classmethod
    def _check_score(cls, value: Any, info: ValidationInfo) -> int:
        score = coerce_score(value, *cls._scale)
        sink = (info.context or {}).get("cleanups") if isinstance(value, str) else None
        if sink is not None:
            sink.append(
                ProtocolWarning(
                    code=WarningCode.SCORE_TEXT_CONVERTED,
                    detail=f"score: {value!r} read as {score}",
                )
            )
        return score

    @field_validator("red_flag_types", mode="before")
    @classmethod
    def _check_flags(cls, value: Any, info: ValidationInfo) -> list[str]:
        flags = _clean_list(
            value, cls._flags, "red-flag type", "redFlagTypes", info, exact=cls._flag_spellings
        )
        kept = list(dict.fromkeys(flags))
        sink = (info.context or {}).get("cleanups")
        if sink is not None and len(kept) != len(flags):
            for flag in dict.fromkeys(f for i, f in enumerate(flags) if f in flags[:i]):
                sink.append(
                    ProtocolWarning(
                        code=WarningCode.DUPLICATE_RED_FLAG_TYPE,
                        red_flag_type=flag,
                        detail=f"redFlagTypes: {flag!r} sent {flags.count(flag)} times, kept once",
                    )
                )
        return kept

    @field_validator("unmet_requirement_ids", "partial_requirement_ids", mode="before")
    @classmethod
    def _check_ids(cls, value: Any, info: ValidationInfo) -> list[str]:
        lookup = cls._requirements
        exact = cls._requirement_spellings
        extra = (info.context or {}).get("case_requirement_ids") or ()
        if extra:
            lookup = {**lookup, **canonical_lookup(extra)}
            exact = frozenset(lookup.values())
        return _clean_list(
            value,
            lookup,
            "requirement ID",
            _camel(str(info.field_name)),
            info,
            lambda: [*cls.listable_requirement_ids(), *extra],
            exact,
        )

    @classmethod
    def listable_requirement_ids(cls) -> tuple[str, ...]:
        """The pack's requirement IDs a judge may list (observable ones), in pack order."""
        return cls._listable

    @field_validator("questions_check", mode="before")
    @classmethod
    def _check_questions(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return QuestionsCheck.NOT_PRESENT
        if type(value) is str and value in _QUESTIONS_BY_VALUE:
            return _QUESTIONS_BY_VALUE[value]  # the exact spelling: nothing to clean
        found = _match(value, _QUESTIONS_CHECKS)
        if found is None:
            raise ValueError(
                f"questionsCheck {value!r} is invalid; use one of {', '.join(QuestionsCheck)}"
            )
        _note(info, "questionsCheck", value, found)
        return found

    @field_validator("score_explanation", mode="before")
    @classmethod
    def _explanation_text(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("questions_issues", mode="before")
    @classmethod
    def _issues_list(cls, value: Any) -> Any:
        return [] if value is None else value

    def evidence_turns(self) -> Mapping[str, tuple[int, ...]]:
        """Turns the judge named per unmet or partial requirement; none before ``judge_v3``.

        Overridden by :class:`EvidenceVerdictBase`; a method, not a field, so the v1/v2
        verdict models and their JSON Schemas (part of every cassette key) stay as they were.
        """
        return {}


_QUESTIONS_CHECKS = canonical_lookup(QuestionsCheck)
_QUESTIONS_BY_VALUE = {str(check): check for check in _QUESTIONS_CHECKS.values()}
#: every spelling of the verdict's field names: an object with one of them is verdict-shaped
VERDICT_KEYS = frozenset(
    name
    for field, info in VerdictBase.model_fields.items()
    for name in (field, info.alias or field)
)


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


def _clean_list(
    value: Any,
    lookup: Mapping[str, str],
    what: str,
    field: str,
    info: ValidationInfo,
    shown: Callable[[], Iterable[str]] | None = None,
    exact: frozenset[str] = frozenset(),
) -> list[str]:
    """Clean every item of ``value`` to its ``lookup`` spelling; an unknown one raises, naming
    the valid choices (``shown()``, else every value of ``lookup``). ``exact``: the values of
    ``lookup``; a list of only those is returned as sent (nothing to clean or note)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{field} must be a JSON array of strings")
    if _TEXT.issuperset(map(type, value)) and exact.issuperset(value):  # all str, all exact
        return list(value)
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
            f"{', '.join(dict.fromkeys(lookup.values() if shown is None else shown()))}"
        )
    where = "red_flag_type" if what == "red-flag type" else "requirement_id"
    for item, found in zip(value, out, strict=True):
        if item != found:  # the pack's own spelling has no clean-up to note
            _note(info, field, item, found, **{where: found})
    return out


def verdict_model(rubric: EvalRubric, evidence: bool = False) -> type[VerdictBase]:
    """The verdict model for one rubric snapshot (cached by content hash).

    The JSON Schema of the result enumerates the pack's intent keys and red-flag types and the
    score range, so a provider with schema-constrained decoding enforces them too.

    Args:
        rubric: the snapshot judged with.
        evidence: the prompt asks for evidence turns (``judge_v3``): the model is an
            :class:`EvidenceVerdictBase` with the ``evidence`` field. ``False`` gives exactly
            the model (and schema) every earlier prompt was keyed with.
    """
    return _verdict_model(
        rubric.content_hash(),
        tuple(i.key for i in rubric.intents),
        rubric.red_flag_types,
        tuple(rubric.requirements_by_id),
        (rubric.score_scale.min, rubric.score_scale.max),
        tuple(i for i, r in rubric.requirements_by_id.items() if r.observable_in_data),
        evidence,
    )


@lru_cache(maxsize=64)
def _verdict_model(
    _hash: str,
    intents: tuple[str, ...],
    flags: tuple[str, ...],
    requirement_ids: tuple[str, ...],
    scale: tuple[int, int],
    listable: tuple[str, ...] = (),
    evidence: bool = False,
) -> type[VerdictBase]:
    base: type[VerdictBase] = VerdictBase
    if evidence:
        from rubric_engine.verdict.evidence import EvidenceVerdictBase

        base = EvidenceVerdictBase
    model = create_model("JudgeVerdict", __base__=base)
    model._intents = canonical_lookup(intents)
    model._flags = canonical_lookup(flags)
    model._requirements = canonical_lookup(requirement_ids)
    model._intent_spellings = frozenset(model._intents.values())
    model._flag_spellings = frozenset(model._flags.values())
    model._requirement_spellings = frozenset(model._requirements.values())
    model._scale = scale
    model._listable = listable
    return model
