"""What changed between two rubric versions, in words a rubric author reads (docs/rubric-packs.md).

:func:`diff_rubrics` compares requirements (by stable ID, including moves between the common
list and an intent), intents (by key), red-flag types, the score scale and the pack-level fields.
:func:`renormalize_blockers` says which of those changes make the old judge outputs unusable
under the new version, i.e. which need new judge calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.rubric.model import EvalRubric, HardRequirement

_FIELD_LABELS = {
    "text": "text",
    "category": "category",
    "critical": "red line",
    "redFlagType": "red-flag type",
    "observableInData": "observable in data",
    "violationScore": "cap (violationScore)",
    "check": "rule check",
    "name": "name",
    "triggerHints": "trigger hints",
    "notes": "notes",
    "language": "language",
    "description": "description",
    "scoreScale": "score scale",
    "categories": "categories",
    "scoringNotes": "scoring notes",
    "outputParsing": "output parsing",
}
_LONG = 160


@dataclass(frozen=True)
class FieldChange:
    field: str  #: camelCase field name
    before: Any
    after: Any

    def describe(self) -> str:
        label = _FIELD_LABELS.get(self.field, self.field)
        return f"{label}: {_show(self.before)} → {_show(self.after)}"


@dataclass(frozen=True)
class Change:
    """One added, removed or changed item.

    ``section`` is ``requirement``, ``intent``, ``red-flag type`` or ``pack``; ``subject`` the
    requirement ID, intent key, red-flag type or pack field.
    """

    section: str
    kind: str  #: added | removed | changed
    subject: str
    summary: str = ""
    fields: tuple[FieldChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "kind": self.kind,
            "subject": self.subject,
            "summary": self.summary,
            "fields": [
                {"field": f.field, "before": f.before, "after": f.after} for f in self.fields
            ],
        }


@dataclass(frozen=True)
class RubricDiff:
    before: str  #: e.g. ``airline_cs v1``
    after: str
    changes: tuple[Change, ...] = field(default_factory=tuple)

    def of(self, section: str, kind: str | None = None) -> list[Change]:
        return [c for c in self.changes if c.section == section and kind in (None, c.kind)]

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "changes": [c.to_json() for c in self.changes],
        }

    def render(self) -> str:
        """Plain text: one block per section; ``+`` added, ``-`` removed, ``~`` changed."""
        if not self.changes:
            return f"{self.before} → {self.after}: no changes to rules, intents or red flags\n"
        counts = ", ".join(
            f"{n} {what}"
            for what, n in (
                ("requirement change(s)", len(self.of("requirement"))),
                ("intent change(s)", len(self.of("intent"))),
                ("red-flag type change(s)", len(self.of("red-flag type"))),
                ("pack-level change(s)", len(self.of("pack"))),
            )
            if n
        )
        out = [f"{self.before} → {self.after}: {counts}"]
        if self.before.split(" v")[0] != self.after.split(" v")[0]:
            out.append("note: these are two different packs (keys differ), not two versions")
        titles = {
            "requirement": "Requirements",
            "intent": "Intents",
            "red-flag type": "Red-flag types",
            "pack": "Pack",
        }
        marks = {"added": "+", "removed": "-", "changed": "~"}
        for section, title in titles.items():
            found = self.of(section)
            if not found:
                continue
            out += ["", title]
            for change in found:
                line = f"  {marks[change.kind]} {change.subject} {change.kind}"
                out.append(line + (f" {change.summary}" if change.summary else ""))
                out += [f"      {f.describe()}" for f in change.fields]
        return "\n".join(out) + "\n"


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        text = " ".join(value.split())
        short = text if len(text) <= _LONG else text[: _LONG - 1] + "…"
        return json.dumps(short, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _field_changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[FieldChange, ...]:
    names = list(before) + [k for k in after if k not in before]
    return tuple(
        FieldChange(name, before.get(name), after.get(name))
        for name in names
        if before.get(name) != after.get(name)
    )


def _dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True)
    return data


def _locations(rubric: EvalRubric) -> dict[str, tuple[str, HardRequirement]]:
    found = {r.id: ("common", r) for r in rubric.common_requirements}
    for intent in rubric.intents:
        found.update({r.id: (f"intent {intent.key}", r) for r in intent.requirements})
    return found


def _requirement_summary(where: str, req: HardRequirement) -> str:
    bits = [where, req.category]
    if req.critical:
        bits.append(f"red line {req.red_flag_type}")
    if req.violation_score is not None:
        bits.append(f"cap {req.violation_score}")
    if not req.observable_in_data:
        bits.append("not observable")
    return f"({', '.join(bits)}): {_show(req.text)}"


def diff_rubrics(before: EvalRubric, after: EvalRubric) -> RubricDiff:
    """Compare two packs (usually two versions of one key); pure."""
    changes: list[Change] = []
    old, new = _locations(before), _locations(after)
    for rid, (where, req) in new.items():
        if rid not in old:
            changes.append(Change("requirement", "added", rid, _requirement_summary(where, req)))
    for rid, (where, req) in old.items():
        if rid not in new:
            changes.append(Change("requirement", "removed", rid, _requirement_summary(where, req)))
    for rid, (where, req) in old.items():
        if rid not in new:
            continue
        new_where, new_req = new[rid]
        fields = list(_field_changes(_dump(req), _dump(new_req)))
        if where != new_where:
            fields.insert(0, FieldChange("location", where, new_where))
        if fields:
            changes.append(Change("requirement", "changed", rid, "", tuple(fields)))

    old_intents, new_intents = before.intents_by_key, after.intents_by_key
    for key, intent in new_intents.items():
        if key not in old_intents:
            changes.append(Change("intent", "added", key, f"({intent.name})"))
    for key, intent in old_intents.items():
        if key not in new_intents:
            changes.append(Change("intent", "removed", key, f"({intent.name})"))
        else:
            a, b = _dump(intent), _dump(new_intents[key])
            a.pop("requirements"), b.pop("requirements")
            intent_fields = _field_changes(a, b)
            if intent_fields:
                changes.append(Change("intent", "changed", key, "", intent_fields))

    old_flags = {f.type: f.text for f in before.red_flags}
    new_flags = {f.type: f.text for f in after.red_flags}
    for kind, text in new_flags.items():
        if kind not in old_flags:
            changes.append(Change("red-flag type", "added", kind, f": {_show(text)}"))
        elif old_flags[kind] != text:
            edit = FieldChange("text", old_flags[kind], text)
            changes.append(Change("red-flag type", "changed", kind, "", (edit,)))
    for kind, text in old_flags.items():
        if kind not in new_flags:
            changes.append(Change("red-flag type", "removed", kind, f": {_show(text)}"))

    pack_before, pack_after = _dump(before), _dump(after)
    for name in ("key", "version", "status", "commonRequirements", "intents", "redFlags"):
        pack_before.pop(name, None), pack_after.pop(name, None)
    for change in _field_changes(pack_before, pack_after):
        changes.append(Change("pack", "changed", change.field, "", (change,)))
    return RubricDiff(
        f"{before.key} v{before.version}", f"{after.key} v{after.version}", tuple(changes)
    )


def renormalize_blockers(diff: RubricDiff, after: EvalRubric) -> list[str]:
    """Changes that need new judge calls, so stored judge outputs cannot be re-applied.

    Re-applying is sound for caps, red-line and red-flag mapping, observable → unobservable,
    categories, removed requirements and added red-flag types: the judge's own decisions stay
    valid. It is not when the judge would have answered differently or was never asked: a new
    observable requirement, a changed rule text or location, an unobservable rule made
    observable, an added or removed intent, a changed intent description, a removed red-flag type
    or changed red-flag definition, changed scoring notes, language or output parsing, a new
    score scale — all of these change what the judge was told.
    """
    blockers: list[str] = []
    for change in diff.of("requirement", "added"):
        if after.requirements_by_id[change.subject].observable_in_data:
            blockers.append(f"requirement {change.subject} is new; the judge never assessed it")
    for change in diff.of("requirement", "changed"):
        for f in change.fields:
            if f.field in ("text", "location"):
                blockers.append(
                    f"requirement {change.subject}: {_FIELD_LABELS.get(f.field, f.field)} changed, "
                    "so the judge's verdict on it no longer applies"
                )
            if f.field == "observableInData" and f.after:
                blockers.append(
                    f"requirement {change.subject} became observable; the judge was told not to "
                    "judge it"
                )
    for change in diff.of("intent", "added") + diff.of("intent", "removed"):
        blockers.append(f"intent {change.subject} was {change.kind}; the judge chose among others")
    for change in diff.of("intent", "changed"):
        fields = ", ".join(_FIELD_LABELS.get(f.field, f.field) for f in change.fields)
        blockers.append(f"intent {change.subject}: {fields} changed; the judge chose by the old")
    for change in diff.of("red-flag type", "changed"):
        blockers.append(
            f"red-flag type {change.subject}: its definition changed; the judge reported by the old"
        )
    for change in diff.of("red-flag type", "removed"):
        blockers.append(
            f"red-flag type {change.subject} was removed; the judge may have reported it"
        )
    judge_facing = {
        "scoreScale": "the score scale changed; the judge scored on the old one",
        "scoringNotes": "the scoring notes changed; the judge scored by the old ones",
        "language": "the language changed; the judge wrote its explanation in the old one",
        "outputParsing": "output parsing changed; the judge saw the agent output parsed as before",
    }
    for change in diff.of("pack", "changed"):
        if change.subject in judge_facing:
            blockers.append(judge_facing[change.subject])
    return blockers
