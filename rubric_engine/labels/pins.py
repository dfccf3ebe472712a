"""What a label judged, pinned by content hash, so a new rubric version keeps the labels of
what it did not change and leaves out the others (pure; docs/calibration.md "Labels pinned to
what they judged").

- A **requirement label** is pinned to its requirement: the SHA-256 of the requirement's ID,
  text, category, ``critical`` and red-flag type, ``observableInData`` and ``violationScore``
  (not ``source``, an audit note, nor a rule ``check``, which changes who decides, not what is
  asked). Case-level requirements (``CASE_…``) have IDs derived from their own text, so the ID
  is the pin.
- A **row label** (intent, red flags, score) is pinned to what defines those fields for the
  whole row: the intents (key, name, trigger hints, notes), the red-flag types, which
  requirements are red lines of which type, the score scale, every cap and the scoring notes.

Editing one requirement's text changes that requirement's pin only.

- Every label of a task's row is also pinned to the **dialogue** it was made on
  (:func:`dialogue_pin`, its metadata aside): a task that scored another dialogue under the
  same rowId (the eval set re-run with a new agent version) does not use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rubric_engine.formats.canonical import canonical_hash
from rubric_engine.labels.model import Label
from rubric_engine.rubric.model import EvalRubric, HardRequirement

__all__ = [
    "RubricPins",
    "dialogue_pin",
    "pin_label",
    "requirement_pin",
    "row_pin",
    "rubric_pins",
    "unpinned",
]


def dialogue_pin(dialogue: Any) -> str:
    """``sha256:…`` of a row's dialogue as the store keeps it (the decoded ``rows.dialogue``)
    without its ``metadata``: the messages, reference, trace and case texts the judge and the
    reviewer read, in canonical JSON. A run's own notes (an agent version, a source line) do
    not change what was judged."""
    if isinstance(dialogue, dict):
        dialogue = {k: v for k, v in dialogue.items() if k != "metadata"}
    return canonical_hash(dialogue)


def requirement_pin(req: HardRequirement) -> str:
    """``sha256:…`` of what a reviewer judged when labelling this requirement."""
    return canonical_hash(
        {
            "id": req.id,
            "text": req.text,
            "category": req.category,
            "critical": req.critical,
            "redFlagType": req.red_flag_type,
            "observableInData": req.observable_in_data,
            "violationScore": req.violation_score,
        }
    )


def row_pin(rubric: EvalRubric) -> str:
    """``sha256:…`` of what defines a row label's intent, red flags and score."""
    reqs = rubric.requirements_by_id.values()
    return canonical_hash(
        {
            "intents": [
                {"key": i.key, "name": i.name, "triggerHints": i.trigger_hints, "notes": i.notes}
                for i in rubric.intents
            ],
            "redFlags": [{"type": f.type, "text": f.text} for f in rubric.red_flags],
            "redLines": {r.id: r.red_flag_type for r in reqs if r.critical},
            "scoreScale": rubric.score_scale.model_dump(mode="json", by_alias=True),
            "caps": {r.id: r.violation_score for r in reqs if r.violation_score is not None},
            "scoringNotes": list(rubric.scoring_notes),
        }
    )


@dataclass(frozen=True)
class RubricPins:
    """The pins of one rubric version: per requirement ID, and the row pin."""

    requirements: Mapping[str, str]
    row: str


def rubric_pins(rubric: EvalRubric) -> RubricPins:
    """Every pin of a rubric version."""
    return RubricPins(
        {rid: requirement_pin(req) for rid, req in rubric.requirements_by_id.items()},
        row_pin(rubric),
    )


def _has_row_fields(label: Label) -> bool:
    return (
        label.intent_key is not None or label.red_flag_types is not None or label.score is not None
    )


def pin_label(label: Label, pins: RubricPins) -> Label:
    """The label with its pins filled from the rubric it was made under (kept when present)."""
    update: dict[str, str] = {}
    rid = label.requirement_id
    if rid is not None and label.requirement_hash is None and rid in pins.requirements:
        update["requirement_hash"] = pins.requirements[rid]
    if _has_row_fields(label) and label.row_hash is None:
        update["row_hash"] = pins.row
    return label.model_copy(update=update) if update else label


def unpinned(label: Label, pins: RubricPins) -> tuple[Label | None, str | None, bool]:
    """What of a label still holds under ``pins`` (the calibrated rubric version).

    Args:
        label: a label with its own pins filled (:func:`pin_label` of the version it was made
            under); a label missing a pin it needs counts as changed.

    Returns:
        ``(kept, left_out_requirement, row_left_out)``: the label with the parts whose pin
        differs removed (``None`` when nothing is left), the requirement ID whose status was
        left out (or ``None``), and whether the row fields were left out.
    """
    rid = label.requirement_id
    drop_requirement = (
        rid is not None
        and not rid.startswith("CASE_")
        and (rid not in pins.requirements or label.requirement_hash != pins.requirements[rid])
    )
    drop_row = _has_row_fields(label) and label.row_hash != pins.row
    keeps_requirement = rid is not None and not drop_requirement
    keeps_row = _has_row_fields(label) and not drop_row
    left_out = rid if drop_requirement else None
    if not keeps_requirement and not keeps_row:
        return None, left_out, drop_row
    update: dict[str, object] = {}
    if drop_requirement:
        update.update(requirement_id=None, status=None, requirement_hash=None)
    if drop_row:
        update.update(intent_key=None, red_flag_types=None, score=None, row_hash=None)
    return (label.model_copy(update=update) if update else label), left_out, drop_row
