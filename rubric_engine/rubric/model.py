"""Rubric pack models: ``EvalRubric`` and its parts (docs/rubric-packs.md).

A rubric pack is one YAML file per version. Python attributes are snake_case; the YAML/JSON
spelling is camelCase through one alias generator, so each term has exactly two mechanical
spellings (``violation_score`` / ``violationScore``).

These models check *structure* (types, enums, ranges, unknown fields). Rules that span fields
(unique IDs, declared red-flag types, caps inside the scale) live in
:mod:`rubric_engine.rubric.checks`, which reports every problem of a file at once.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    field_validator,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from rubric_engine.formats.canonical import canonical_hash as _canonical_hash
from rubric_engine.rules.model import Check

ID_PATTERN = r"^[A-Z][A-Z0-9_]*$"
KEY_PATTERN = r"^[a-z][a-z0-9_\-]*$"

#: Requirement categories every pack may use; a pack adds its own in ``categories``.
BUILTIN_CATEGORIES: tuple[str, ...] = (
    "SAFETY",
    "KNOWLEDGE",
    "BRAND",
    "PROCESS",
    "TONE",
    "ACCURACY",
    "PRIVACY",
    "FORMAT",
)

DEFAULT_THINKING_MARKERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"),)
DEFAULT_QUESTIONS_CARD = ("<questions>", "</questions>")


class CamelModel(BaseModel):
    """Base for every wire/YAML model: camelCase aliases, unknown fields rejected, frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class RubricStatus(StrEnum):
    """Lifecycle of a rubric version (docs/rubric-packs.md)."""

    DRAFT = "DRAFT"
    PUBLISHED = "PUBLISHED"
    RETIRED = "RETIRED"


class ScoreScale(CamelModel):
    """Integer score range, inclusive on both ends. ``min < max`` is checked with the pack."""

    min: StrictInt = 1
    max: StrictInt = 5


class HardRequirement(CamelModel):
    """The smallest unit of statistics: one rule with a stable ID (docs/protocol.md §2).

    Attributes:
        id: stable, unique within the pack (``COMMON_BACKEND_EXPOSURE``); upper snake case.
        category: one of :data:`BUILTIN_CATEGORIES` or the pack's ``categories``.
        text: the rule as the judge reads it.
        critical: ``True`` marks a red line; then ``red_flag_type`` is required.
        red_flag_type: one of the pack's ``redFlags[].type``.
        observable_in_data: ``False`` means the judge cannot see the facts this rule needs, so
            it is always NOT_APPLICABLE and never enters a denominator (docs/protocol.md §7).
        violation_score: when VIOLATED, the final score is at most this (docs/protocol.md §9).
        source: where the rule comes from in the expert document, for audits.
        check: an optional deterministic check (docs/rule-checks.md,
            :mod:`rubric_engine.rules.model`) that decides this requirement without the judge; its
            result overrides the judge's and is recorded with source ``rule``.
    """

    id: str = Field(pattern=ID_PATTERN)
    category: str = Field(min_length=1)
    text: str = Field(min_length=1)
    critical: StrictBool = False
    red_flag_type: str | None = None
    observable_in_data: StrictBool = True
    violation_score: StrictInt | None = None
    source: str | None = None
    check: Check | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_check(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a requirement without a check dumps (and hashes) exactly as before checks existed
        data: dict[str, Any] = handler(self)
        if self.check is None:
            data.pop("check", None)
        return data


class RubricIntent(CamelModel):
    """One business intent; the judge picks exactly one key per dialogue (docs/protocol.md §2)."""

    key: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    trigger_hints: str = Field(min_length=1)
    notes: str | None = None
    requirements: tuple[HardRequirement, ...] = ()


class RedFlag(CamelModel):
    """One enumerated red-line type (docs/protocol.md §8)."""

    type: str = Field(pattern=ID_PATTERN)
    text: str = Field(min_length=1)


class MarkerPair(CamelModel):
    """A start/end pair of literal markers in the agent's output."""

    start: str = Field(min_length=1)
    end: str = Field(min_length=1)


class QuestionsCard(CamelModel):
    """Where the agent's follow-up questions card sits in its output (docs/protocol.md §12)."""

    enabled: bool = True
    start: str = Field(default=DEFAULT_QUESTIONS_CARD[0], min_length=1)
    end: str = Field(default=DEFAULT_QUESTIONS_CARD[1], min_length=1)


class OutputParsing(CamelModel):
    """How to parse the *agent's* raw output before the judge sees it (docs/protocol.md §12).

    ``thinkingMarkers: true`` is shorthand for ``[{start: "<think>", end: "</think>"}]``;
    ``questionsCard: true`` for ``{enabled: true, start: "<questions>", end: "</questions>"}``.

    Attributes:
        thinking_markers: reasoning sections to strip; only well-formed ones (opening and
            closing marker) are removed, a stray or unclosed marker is a row warning.
        thinking_opens_in_prompt: the agent's chat template writes the opening marker into
            the prompt, so replies carry only the closing one: everything before a reply's
            first closing marker is reasoning. Off by default; when off it is left out of the
            snapshot and the content hash, so packs published before it existed keep theirs.
        questions_card: where the suggested follow-up questions card is.
    """

    thinking_markers: tuple[MarkerPair, ...] = ()
    thinking_opens_in_prompt: StrictBool = False
    questions_card: QuestionsCard = QuestionsCard(enabled=False)

    @model_serializer(mode="wrap")
    def _omit_default_opening(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a pack without the setting dumps (and snapshots) exactly as before it existed
        data: dict[str, Any] = handler(self)
        if not self.thinking_opens_in_prompt:
            data.pop("thinkingOpensInPrompt", None)
            data.pop("thinking_opens_in_prompt", None)
        return data

    @field_validator("thinking_markers", mode="before")
    @classmethod
    def _expand_thinking_shorthand(cls, value: Any) -> Any:
        if value is True:
            return [{"start": s, "end": e} for s, e in DEFAULT_THINKING_MARKERS]
        if value is False or value is None:
            return []
        return value

    @field_validator("questions_card", mode="before")
    @classmethod
    def _expand_card_shorthand(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {"enabled": value}
        if value is None:
            return {"enabled": False}
        return value


class EvalRubric(CamelModel):
    """A rubric pack: one version of an executable quality protocol (docs/rubric-packs.md).

    Build one with :func:`rubric_engine.rubric.load_rubric` (file) or
    :func:`rubric_engine.rubric.parse_rubric` (dict); both run the cross-field checks of
    :mod:`rubric_engine.rubric.checks`, which ``model_validate`` alone does not.
    """

    key: str = Field(pattern=KEY_PATTERN)
    name: str = Field(min_length=1)
    version: StrictInt = Field(ge=1, le=2**31 - 1)
    status: RubricStatus = RubricStatus.DRAFT
    language: str = Field(min_length=2)
    description: str | None = None
    score_scale: ScoreScale = ScoreScale()
    categories: tuple[str, ...] = ()
    common_requirements: tuple[HardRequirement, ...] = ()
    intents: tuple[RubricIntent, ...] = ()
    red_flags: tuple[RedFlag, ...] = ()
    scoring_notes: tuple[str, ...] = ()
    output_parsing: OutputParsing = OutputParsing()

    # -- derived lookups (cached; the model is frozen) ---------------------------------------

    @cached_property
    def requirements_by_id(self) -> dict[str, HardRequirement]:
        """Every requirement of the pack, common and per intent, by ID."""
        found = {r.id: r for r in self.common_requirements}
        for intent in self.intents:
            found.update({r.id: r for r in intent.requirements})
        return found

    @cached_property
    def intents_by_key(self) -> dict[str, RubricIntent]:
        return {i.key: i for i in self.intents}

    @cached_property
    def red_flag_types(self) -> tuple[str, ...]:
        """Red-flag types in pack order; reports and rows list flags in this order."""
        return tuple(f.type for f in self.red_flags)

    def applicable_requirements(self, intent_key: str) -> tuple[HardRequirement, ...]:
        """Common requirements then the intent's, in pack order (docs/protocol.md §6).

        Raises:
            KeyError: ``intent_key`` is not one of the pack's intents.
        """
        return self.common_requirements + self.intents_by_key[intent_key].requirements

    # -- canonical form -----------------------------------------------------------------------

    def canonical_content(self) -> dict[str, Any]:
        """The pack as a JSON-ready dict with camelCase keys, *without* ``status``.

        Status is lifecycle metadata: retiring a version must not change its content hash.
        Fields left at their default are omitted, so a later engine that adds an optional field
        (with a default) computes the same hash for an unchanged pack, and a version published
        today is not reported as edited after an upgrade.
        """
        data = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        data.pop("status", None)
        return data

    def content_hash(self) -> str:
        """``sha256:`` + hex digest of the canonical JSON (sorted keys, no whitespace)."""
        return content_hash(self.canonical_content())

    def snapshot(self) -> dict[str, Any]:
        """Full JSON-ready snapshot, status included, as stored with every task
        (docs/rubric-packs.md)."""
        return self.model_dump(mode="json", by_alias=True)


def content_hash(data: Any) -> str:
    """Hash of a JSON-ready value in canonical form: ``sha256:<64 hex digits>``."""
    return _canonical_hash(data)
