"""Write a pack mapping as a commented YAML file (``rubric init``, ``rubric draft``).

The pack is written by hand, not by a YAML library, because the comments are the point: every
field says what it does, and what the tool proposed says "REVIEW". Strings are JSON-quoted
(a JSON string is a YAML double-quoted scalar), small values (a check, a keyword list) are
written as JSON flow; the caller loads the text back with the pack loader before anyone sees
it. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: what each field does, shown once per field (the first time it is written)
FIELD_HELP: dict[str, str] = {
    "key": "the pack's stable key: `score --rubric KEY` and every task name it",
    "name": "a title for people",
    "version": "a whole number; publish every change as a new version (old tasks keep theirs)",
    "status": "a file is always a DRAFT: `rubric-eval rubric publish FILE` freezes a version",
    "language": "the dialogues' language (BCP 47: zh, en); the judge is told it",
    "description": "what the agent does, for the judge",
    "scoreScale": "integer scores from min to max",
    "categories": "categories this pack adds to the built-in ones",
    "commonRequirements": "rules every dialogue is judged by",
    "intents": "the judge picks exactly one intent per dialogue; its rules apply too",
    "redFlags": "the enumerated red-line types: a red line raises one",
    "scoringNotes": "extra guidance the judge reads with the rules",
    "outputParsing": "how the agent's raw output is read before judging",
    "thinkingMarkers": "true: strip <think>…</think> sections (the user never saw them)",
    "questionsCard": "true: judge a <questions>…</questions> card of suggested questions apart",
    "id": "stable rule ID (reports count it): keep it when you edit the text",
    "category": "SAFETY, KNOWLEDGE, BRAND, PROCESS, TONE, ACCURACY, PRIVACY, FORMAT or the pack's",
    "text": "the rule as the judge reads it",
    "critical": "true: a red line (all or nothing; raises its redFlagType)",
    "redFlagType": "which red-line type a violation raises (one of redFlags)",
    "observableInData": "false: the transcript cannot show it, always NOT_APPLICABLE",
    "violationScore": "a violation caps the final score at this",
    "check": "a deterministic check that decides the rule without the judge",
    "source": "where the rule comes from",
    "triggerHints": "when the judge should pick this intent",
    "notes": "extra guidance for this intent",
    "requirements": "this intent's own rules",
    "type": "the red-line type's name",
    "min": "lowest score",
    "max": "highest score",
}


@dataclass
class Comments:
    """Comments to write: ``above[path]`` lines before a field, ``inline[path]`` after it.

    A path is the field's YAML path (``intents[0].requirements[1].category``); a list item's
    own path (``commonRequirements[2]``) puts lines above its first field.
    """

    above: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, str] = field(default_factory=dict)

    def add_above(self, path: str, *lines: str) -> None:
        self.above.setdefault(path, []).extend(lines)


def render_pack(data: Mapping[str, Any], comments: Comments, header: list[str]) -> str:
    """The pack as YAML text: ``header`` lines as comments, then every field with its help
    (once per field name) and the ``comments`` given."""
    out = ["# " + line if line else "#" for line in header]
    seen: set[str] = set()
    _mapping(data, "", 0, out, comments, seen, first_prefix=None)
    return "\n".join(out) + "\n"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def _mapping(
    data: Mapping[str, Any],
    path: str,
    indent: int,
    out: list[str],
    comments: Comments,
    seen: set[str],
    first_prefix: str | None,
) -> None:
    pad = " " * indent
    for n, (name, value) in enumerate(data.items()):
        if value is None:
            continue
        here = f"{path}.{name}" if path else name
        prefix = first_prefix if (n == 0 and first_prefix is not None) else pad
        notes = comments.above.get(here, [])
        help_text = FIELD_HELP.get(name) if name not in seen else None
        seen.add(name)
        inline = comments.inline.get(here)
        nested = isinstance(value, Mapping) and name in ("scoreScale", "outputParsing")
        items = isinstance(value, list) and bool(value)
        if nested or (items and (name == "scoringNotes" or isinstance(value[0], Mapping))):
            for line in notes + ([help_text] if help_text else []):
                out.append(f"{prefix}# {line}")
                prefix = pad
            out.append(f"{prefix}{name}:" + (f"  # {inline}" if inline else ""))
            if isinstance(value, Mapping):
                _mapping(value, here, indent + 2, out, comments, seen, None)
            elif name == "scoringNotes":
                out.extend(f"{pad}  - {_scalar(note)}" for note in value)
            else:
                for i, item in enumerate(value):
                    item_path = f"{here}[{i}]"
                    for line in comments.above.get(item_path, []):
                        out.append(f"{pad}  # {line}")
                    _mapping(item, item_path, indent + 4, out, comments, seen, f"{pad}  - ")
            continue
        for line in notes:
            out.append(f"{prefix}# {line}")
            prefix = pad
        text = _scalar(value) if not isinstance(value, Mapping | list) else _flow(value)
        said = inline or help_text  # an item's own comment replaces the field's help
        out.append(f"{prefix}{name}: {text}" + (f"  # {said}" if said else ""))


def _flow(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
