"""The label: a person's (or another judge's) judgment of one row under one rubric version.

docs/calibration.md: a review record (reviewer, result, reason), kept while experts correct the
criteria and a second expert re-checks, until the set is locked.
This is the one type every module reads: the store, import/export and calibration.

A label line is either **requirement-level** (``requirementId`` + ``status``) or **row-level**
(no requirement: only ``intentKey`` / ``redFlagTypes`` / ``score``); a requirement-level line may
carry the row-level fields too. Labels are append-only: an edit is a new label whose
``supersedes`` names the old one (:mod:`rubric_engine.labels.store`).
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from rubric_engine.formats.canonical import canonical_json

__all__ = ["UNMET", "Label", "LabelSource", "LabelStatus", "label_content_id"]


class LabelStatus(StrEnum):
    """A reviewer's status for one requirement: the referenceBasis statuses plus ``UNSURE``."""

    FOLLOWED = "FOLLOWED"
    PARTIAL = "PARTIAL"
    VIOLATED = "VIOLATED"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    #: the reviewer could not decide; outside every calibration denominator, counted
    UNSURE = "UNSURE"


def label_content_id(data: dict[str, Any]) -> str:
    """The ``labelId`` of a label's JSON (:meth:`Label.to_json_dict`, or a stored label's JSON
    as read): ``L`` + 16 hex digits of SHA-256 over it without ``labelId``."""
    content = {k: v for k, v in data.items() if k != "labelId"}
    text = canonical_json(content)  # the bytes label ids were always derived from
    return "L" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: the positive class of calibration (docs/calibration.md: "unmet" = VIOLATED or PARTIAL)
UNMET = frozenset({LabelStatus.VIOLATED, LabelStatus.PARTIAL})


class LabelSource(StrEnum):
    """How the label came to be."""

    REVIEW = "review"  #: a reviewer judged the row in a review tool
    IMPORT = "import"  #: read from a file (`rubric-eval labels import`)
    ADJUDICATION = "adjudication"  #: a decision between reviewers who disagreed; wins over them


class Label(BaseModel):
    """One label line. JSON spelling is camelCase (``rowId``, ``requirementId``, …).

    Attributes:
        row_id: the dialogue row (``rowId`` of the scored input).
        requirement_id: a requirement of the row's applicable set; ``None`` for a row-level label.
        status: required with ``requirement_id``, absent without it.
        intent_key: the intent the reviewer chose for the row, when given.
        red_flag_types: the row's red-flag types as the reviewer sees them (the full set, order
            and duplicates ignored); ``None`` = not stated (derived from VIOLATED red lines).
        score: the reviewer's score for the row: a whole point (``2`` or ``2.0``; ``2.5`` is
            refused in every mode), on the pack's scale when checked against a rubric.
        reviewer / role: who (a name or an id; ``judge:<model>`` for another judge) and in what
            capacity (``expert``, ``second_reviewer``, ``adjudicator``, …).
        time: UTC, ISO 8601 ending in ``Z``; filled with the import time when a file has none.
        reason: why (an eval case's review ``required_fix`` / ``issue_type`` go here as text).
        evidence_turns: 0-based message indexes the reviewer relied on; no duplicates.
        rubric_key / rubric_version / rubric_hash: the rubric the label was made under; filled
            from the task on import when absent, refused when they differ from it.
        requirement_hash / row_hash: the content hashes of what the label judged (its
            requirement; the intents, red flags, scale and caps a row label reads), filled from
            that rubric when stored (:mod:`rubric_engine.labels.pins`); a later rubric version
            uses the label only where they are unchanged.
        dialogue_hash: the SHA-256 of the dialogue the label was made on, its metadata aside
            (:func:`rubric_engine.labels.pins.dialogue_pin`), filled when a label of a
            task's row is stored; a task whose row of that rowId holds another dialogue does
            not use the label. ``None``: a label stored before dialogues were pinned, or
            imported without a task; it applies to every row of its rowId.
        saw_judge_verdict: whether the reviewer saw the judge's verdict (``False`` = blind).
        source: review, import or adjudication.
        supersedes: ``labelId`` of the label this one replaces.
        task_id: the task the label was imported against, if any.
        label_id: content hash, assigned by :meth:`with_id`; the same content gets the same id.
        metadata: fields a file carried that this format does not define, kept unchanged.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    row_id: str = Field(min_length=1)
    requirement_id: str | None = None
    status: LabelStatus | None = None
    intent_key: str | None = None
    red_flag_types: tuple[str, ...] | None = None
    score: float | None = None
    reviewer: str = Field(min_length=1)
    role: str | None = None
    time: str | None = None
    reason: str | None = None
    evidence_turns: tuple[int, ...] = ()
    rubric_key: str | None = None
    rubric_version: int | None = None
    rubric_hash: str | None = None
    requirement_hash: str | None = None
    row_hash: str | None = None
    dialogue_hash: str | None = None
    saw_judge_verdict: bool | None = None
    source: LabelSource = LabelSource.IMPORT
    supersedes: str | None = None
    task_id: str | None = None
    label_id: str | None = None
    #: fields of the file this format does not know, kept as they were (see labels.io)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("row_id", "requirement_id", "reviewer", "intent_key", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        # published sets often number their rows and categories: 17 and "17" are the same
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("score", mode="before")
    @classmethod
    def _score_is_a_number(cls, value: Any) -> Any:
        # pydantic's float took true as 1.0 and "3" as 3.0, and NaN compared unequal to itself
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            shown = json.dumps(value) if isinstance(value, bool) else repr(value)
            raise ValueError(
                f"{shown} is not a number; give the reviewer's score as a point of the pack's "
                "scale, e.g. 4"
            )
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number; give a point of the pack's scale")
        if not float(value).is_integer():
            # scores are whole points in every mode: weighted κ and the alternative annotator
            # test compare them point for point, as the judge's own scores are
            raise ValueError(
                f"{value:g} is not a whole point; give the reviewer's score as one point of the "
                "scale (round an averaged score, or import each reviewer's own)"
            )
        return value

    @field_validator("time")
    @classmethod
    def _utc(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is None or parsed.utcoffset() is None:
            raise ValueError(
                f"{value!r} is not a time with a zone; write ISO 8601 with Z or an offset, e.g. "
                "2026-01-01T09:30:00Z or 2026-01-01T17:30:00+08:00 (stored in UTC)"
            )
        return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @field_validator("status", mode="before")
    @classmethod
    def _status_spelling(cls, value: Any) -> Any:
        # files made elsewhere write "violated" or " Followed": one spelling per status
        return value.strip().upper().replace(" ", "_") if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> Label:
        if (self.requirement_id is None) != (self.status is None):
            raise ValueError(
                "requirementId and status go together: give both (a requirement label) or "
                "neither (a row label with intentKey, redFlagTypes or score)"
            )
        if self.requirement_id is None and (
            self.intent_key is None and self.red_flag_types is None and self.score is None
        ):
            raise ValueError(
                "a line without requirementId must carry intentKey, redFlagTypes or score"
            )
        if len(set(self.evidence_turns)) != len(self.evidence_turns) or any(
            t < 0 for t in self.evidence_turns
        ):
            raise ValueError("evidenceTurns are distinct message indexes from 0")
        return self

    @property
    def unmet(self) -> bool | None:
        """True for VIOLATED/PARTIAL, False for FOLLOWED, None when outside the comparison."""
        if self.status in UNMET:
            return True
        return False if self.status is LabelStatus.FOLLOWED else None

    def to_json_dict(self) -> dict[str, Any]:
        """camelCase, JSON-ready, absent optional fields (and empty lists) left out, except an
        empty ``redFlagTypes``: the reviewer said the row has none, which is not "not stated"."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {k: v for k, v in data.items() if v not in ([], {}) or k == "redFlagTypes"}

    def content_id(self) -> str:
        """``L`` + 16 hex digits of SHA-256 over the label's content (without ``labelId``)."""
        return label_content_id(self.to_json_dict())

    def with_id(self) -> Label:
        """This label with ``label_id`` set to :meth:`content_id`."""
        return self.model_copy(update={"label_id": self.content_id()})
