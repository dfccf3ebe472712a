"""The ``judge_v3`` verdict: evidence turns for each unmet or partial requirement
(docs/protocol.md §4).

A ``judge_v3`` judge adds one field to the verdict of :mod:`rubric_engine.verdict.model`::

    "evidence": {"COMMON_EXPLICIT_CONFIRMATION": [12, 14], "COMMON_NO_FALSE_CLAIMS": [20]}

Turn numbers are the ``[N]`` labels of the dialogue the judge was shown. ``judge_v3`` numbers
turns from :data:`EVIDENCE_FIRST_TURN` (0), the index of the row's ``messages`` — the same
numbers the review page shows (``#N``) and a reviewer's label stores (``evidenceTurns``), so a
turn has one number everywhere (the older prompts number from 1 and ask for no turns).

Checked like every other judge value, and re-asked with the valid choices when wrong:

- a key is a requirement ID, cleaned and matched like the ID lists (an unknown ID lists the
  valid ones); it must be listed in ``unmetRequirementIds`` or ``partialRequirementIds``;
- a value is a JSON array of integer turn numbers inside the dialogue: from 0 to the row's
  last turn (the row's turn count arrives as ``turn_count`` in the validation context);
- duplicates inside one list are kept once and the list is sorted; an empty list, or an
  unmet ID without an entry, means the judge named no turn (not an error: a missing action
  has no one turn that shows it).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from rubric_engine.verdict.model import VerdictBase, _match, _note, canonical_lookup

#: the number of a row's first message in a ``judge_v3`` prompt and in its evidence
EVIDENCE_FIRST_TURN = 0


def _turn_range(info: ValidationInfo) -> tuple[int, int | None]:
    count = (info.context or {}).get("turn_count")
    return EVIDENCE_FIRST_TURN, (EVIDENCE_FIRST_TURN + count - 1) if count else None


def _turn(value: Any, rid: str, low: int, high: int | None) -> int:
    within = f"from {low} to {high}" if high is not None else f"from {low}"
    expected = f"evidence.{rid}: turns are the [N] numbers of the dialogue, integers {within}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{expected}; got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{expected}; {value!r} is not an integer")
        value = int(value)
    turn = int(value)
    if turn < low or (high is not None and turn > high):
        raise ValueError(f"{expected}; turn {turn} is outside the dialogue")
    return turn


class EvidenceVerdictBase(VerdictBase):
    """:class:`~rubric_engine.verdict.model.VerdictBase` plus ``evidence`` (the ``judge_v3``
    verdict)."""

    evidence: dict[str, list[int]] = Field(
        default_factory=dict,
        description=(
            "For each ID in unmetRequirementIds or partialRequirementIds: the turn numbers [N] "
            "of the dialogue that show it. Only those IDs; {} when both lists are empty."
        ),
        json_schema_extra={
            "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}}
        },
    )

    @field_validator("evidence", mode="before")
    @classmethod
    def _check_evidence(cls, value: Any, info: ValidationInfo) -> dict[str, list[int]]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError(
                "evidence must be a JSON object {REQUIREMENT_ID: [turn, ...]} naming, for each "
                "unmet or partial requirement, the dialogue turns that show it"
            )
        lookup = cls._requirements
        extra = (info.context or {}).get("case_requirement_ids") or ()
        if extra:
            lookup = {**lookup, **canonical_lookup(extra)}
        low, high = _turn_range(info)
        out: dict[str, set[int]] = {}
        problems: list[str] = []
        for key, turns in value.items():
            rid = _match(key, lookup)
            if rid is None:
                problems.append(
                    f"evidence: {key!r} is not a requirement ID of this rubric; valid: "
                    f"{', '.join(dict.fromkeys(lookup.values()))}"
                )
                continue
            _note(info, "evidence", key, rid, requirement_id=rid)
            if not isinstance(turns, list):
                problems.append(f"evidence.{rid} must be a JSON array of turn numbers")
                continue
            kept = out.setdefault(rid, set())
            for turn in turns:
                try:
                    kept.add(_turn(turn, rid, low, high))
                except ValueError as exc:
                    problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))
        return {rid: sorted(turns) for rid, turns in out.items()}

    @model_validator(mode="after")
    def _evidence_for_listed_ids(self) -> EvidenceVerdictBase:
        listed = {*self.unmet_requirement_ids, *self.partial_requirement_ids}
        stray = [rid for rid in self.evidence if rid not in listed]
        if stray:
            ids = [*self.unmet_requirement_ids, *self.partial_requirement_ids]
            valid = ", ".join(dict.fromkeys(ids)) or "none, so evidence must be {}"
            raise ValueError(
                f"evidence names {', '.join(stray)}, which "
                f"{'is' if len(stray) == 1 else 'are'} not in unmetRequirementIds or "
                f"partialRequirementIds; give turns only for the IDs listed there: {valid}"
            )
        return self

    def evidence_turns(self) -> Mapping[str, tuple[int, ...]]:
        """Turn numbers by requirement ID (sorted, distinct; IDs with no turn left out)."""
        return {rid: tuple(turns) for rid, turns in self.evidence.items() if turns}
