"""A judge model's pack proposal from policy prose (``rubric-eval rubric draft``;
docs/authoring.md "From prose to a draft"): its shape, its checks, and the pack it becomes.

The model answers one JSON object, :class:`DraftProposal`: a pack whose every requirement
carries ``sources``, quotes of the policy text it comes from. :func:`proposal_problems` checks
the answer — the shape, every quote found in its file, and the pack's own validation — and
lists every problem, which the caller sends back as a re-ask. :func:`pack_of` turns a clean
proposal into the pack mapping with each rule's source lines (``retail_policy.md:88``) and
:class:`~rubric_engine.rubric.pack_text.Comments` quoting them. Pure.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError

from rubric_engine.rubric.checks import rubric_problems
from rubric_engine.rubric.model import ID_PATTERN, KEY_PATTERN, CamelModel, EvalRubric
from rubric_engine.rubric.pack_text import Comments

SCALE = (1, 5)


class SourceQuote(CamelModel):
    """Where a rule comes from: a policy file's name and text copied from it."""

    file: str = Field(min_length=1)
    quote: str = Field(min_length=8)


class ProposedRequirement(CamelModel):
    id: str = Field(pattern=ID_PATTERN)
    category: str = Field(min_length=1)
    text: str = Field(min_length=1)
    critical: bool = False
    red_flag_type: str | None = None
    observable_in_data: bool = True
    violation_score: int | None = None
    sources: tuple[SourceQuote, ...] = Field(min_length=1)


class ProposedIntent(CamelModel):
    key: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    trigger_hints: str = Field(min_length=1)
    notes: str | None = None
    requirements: tuple[ProposedRequirement, ...] = ()


class ProposedRedFlag(CamelModel):
    type: str = Field(pattern=ID_PATTERN)
    text: str = Field(min_length=1)


class DraftProposal(CamelModel):
    """The model's answer: a pack without version, status, scale or output parsing (those
    are the engine's), whose requirements each quote their sources."""

    key: str = Field(pattern=KEY_PATTERN)
    name: str = Field(min_length=1)
    language: str = Field(min_length=2)
    description: str | None = None
    categories: tuple[str, ...] = ()
    common_requirements: tuple[ProposedRequirement, ...] = ()
    intents: tuple[ProposedIntent, ...] = Field(min_length=1)
    red_flags: tuple[ProposedRedFlag, ...] = ()
    scoring_notes: tuple[str, ...] = ()


def proposal_schema() -> str:
    """The JSON Schema the model is shown (sorted keys, so the prompt's bytes are stable)."""
    return json.dumps(
        DraftProposal.model_json_schema(by_alias=True), sort_keys=True, ensure_ascii=False
    )


@dataclass(frozen=True)
class Located:
    """A quote found in a policy: the file and its 1-based first and last line."""

    file: str
    first: int
    last: int

    def __str__(self) -> str:
        lines = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        return f"{self.file}:{lines}"


class PolicyText:
    """A policy document, searchable for quotes whatever their spacing and Markdown markers.

    The text is normalised as quotes are (NFKC; ``*``, ``_`` runs of two and backticks
    dropped; every run of whitespace one space), keeping for each kept character its line,
    so a quote found maps back to the lines it spans.
    """

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        chars: list[str] = []
        self._lines: list[int] = []
        line = 1
        for raw in _strip_markup(unicodedata.normalize("NFKC", text)):
            if raw.isspace():
                if chars and chars[-1] != " ":
                    chars.append(" ")
                    self._lines.append(line)
                if raw == "\n":
                    line += 1
                continue
            chars.append(raw)
            self._lines.append(line)
        self._flat = "".join(chars)

    def find(self, quote: str) -> Located | None:
        """The lines ``quote`` spans, or ``None`` when the text does not hold it."""
        wanted = _flatten(quote)
        at = self._flat.find(wanted) if wanted else -1
        if at < 0:
            return None
        return Located(self.name, self._lines[at], self._lines[at + len(wanted) - 1])


def _strip_markup(text: str) -> str:
    # keeps newlines (they count lines); bold/italic markers and code ticks go
    return re.sub(r"\*+|`+|(?<!\w)__|__(?!\w)", "", text)


def _flatten(text: str) -> str:
    one = " ".join(_strip_markup(unicodedata.normalize("NFKC", text)).split())
    return one.strip(" -")


def read_reply(content: str) -> tuple[DraftProposal | None, list[str]]:
    """The proposal in a reply's text, or the problems that stop reading it (a ```json fence
    around the object is allowed; anything else around it is not)."""
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    try:
        return DraftProposal.model_validate_json(text), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(the reply)"
            problems.append(f"{where}: {err['msg']}")
        return None, problems


def proposal_problems(
    proposal: DraftProposal, policies: dict[str, PolicyText]
) -> tuple[list[str], dict[str, list[Located]]]:
    """Every problem of a proposal, and where each requirement's quotes are.

    Problems: a source naming a file that is not one of ``policies``; a quote the file does
    not hold; whatever the pack's own checks say of the pack it becomes (unique IDs, declared
    red-flag types, caps inside the scale, …).
    """
    problems: list[str] = []
    found: dict[str, list[Located]] = {}
    for req in _requirements(proposal):
        for source in req.sources:
            policy = policies.get(source.file)
            if policy is None:
                problems.append(
                    f"{req.id}: source file {source.file!r} is not one of the policies given "
                    f"({', '.join(policies)})"
                )
                continue
            located = policy.find(source.quote)
            if located is None:
                problems.append(
                    f"{req.id}: the quote {_short(source.quote)!r} is not in {source.file}; "
                    "copy the policy's words exactly"
                )
            else:
                found.setdefault(req.id, []).append(located)
    data, _ = pack_of(proposal, found)
    problems += [f"{path}: {message}" for path, message in rubric_problems(data)]
    try:
        EvalRubric.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}")
    return problems, found


def source_lines(found: list[Located]) -> str | None:
    """``retail_policy.md:10,12-14``: the lines of each file, in file order, once each."""
    spans: dict[str, list[str]] = {}
    for where in sorted(set(found), key=lambda w: (w.file, w.first, w.last)):
        span = str(where).split(":", 1)[1]
        if span not in spans.setdefault(where.file, []):
            spans[where.file].append(span)
    return "; ".join(f"{name}:{','.join(lines)}" for name, lines in spans.items()) or None


def _requirements(proposal: DraftProposal) -> list[ProposedRequirement]:
    return [*proposal.common_requirements, *(r for i in proposal.intents for r in i.requirements)]


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def pack_of(
    proposal: DraftProposal, found: dict[str, list[Located]]
) -> tuple[dict[str, Any], Comments]:
    """The pack mapping a proposal becomes (version 1, DRAFT, scale 1–5) and its comments:
    above each requirement, each source quote with its lines; ``source`` holds the lines."""
    comments = Comments()

    def requirement(path: str, req: ProposedRequirement) -> dict[str, Any]:
        for quote, where in zip(req.sources, found.get(req.id, []), strict=False):
            comments.add_above(path, f'from {where}: "{_short(quote.quote, 150)}"')
        comments.inline[f"{path}.id"] = "proposed: review it against the source lines above"
        data: dict[str, Any] = {
            "id": req.id,
            "category": req.category,
            "text": req.text,
            "critical": req.critical or None,
            "redFlagType": req.red_flag_type,
            "observableInData": None if req.observable_in_data else False,
            "violationScore": req.violation_score,
            "source": source_lines(found.get(req.id, [])),
        }
        return {k: v for k, v in data.items() if v is not None}

    common = [
        requirement(f"commonRequirements[{i}]", r)
        for i, r in enumerate(proposal.common_requirements)
    ]
    intents = []
    for j, intent in enumerate(proposal.intents):
        reqs = [
            requirement(f"intents[{j}].requirements[{i}]", r)
            for i, r in enumerate(intent.requirements)
        ]
        entry = {
            "key": intent.key,
            "name": intent.name,
            "triggerHints": intent.trigger_hints,
            "notes": intent.notes,
            "requirements": reqs or None,
        }
        intents.append({k: v for k, v in entry.items() if v is not None})
    data: dict[str, Any] = {
        "key": proposal.key,
        "name": proposal.name,
        "version": 1,
        "status": "DRAFT",
        "language": proposal.language,
        "description": proposal.description,
        "scoreScale": {"min": SCALE[0], "max": SCALE[1]},
        "categories": list(proposal.categories) or None,
        "commonRequirements": common or None,
        "intents": intents,
        "redFlags": [{"type": f.type, "text": f.text} for f in proposal.red_flags] or None,
        "scoringNotes": list(proposal.scoring_notes) or None,
    }
    return {k: v for k, v in data.items() if v is not None}, comments
