"""Render the judge's messages from a versioned template in ``prompts/`` (docs/protocol.md §5).

The prompt is two messages. The **system** message holds only the static rubric (intents with
trigger hints, common and per-intent requirements, red-flag enumeration, scoring notes, scale)
so it is byte-identical for every row of a task and a provider's prefix cache applies. The
**user** message holds the row: its case-level requirements, then the dialogue, questions
cards and reference output, each inside a delimited data block.

A data block's markers carry a tag derived from the block's own content, re-derived until the
content does not contain it, so nothing inside the dialogue can close the block early.

``promptVersion`` is the template's folder name; ``promptHash`` hashes its files' bytes.

``judge_v3`` (listed in :data:`EVIDENCE_PROMPTS`) builds on ``judge_v2`` and asks the judge for
evidence turns (:mod:`rubric_engine.verdict.evidence`); its dialogue is numbered from 0, the
row's message index, as the review page and reviewers' labels number it. The older prompts
number from 1 and are rendered exactly as before.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.errors import ConfigurationError
from rubric_engine.results.agent_output import parse_agent_output
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.verdict.evidence import EVIDENCE_FIRST_TURN

DEFAULT_PROMPT = "judge_v1"
#: prompt versions whose judge names evidence turns (the ``evidence`` verdict field) and whose
#: dialogue is numbered from :data:`~rubric_engine.verdict.evidence.EVIDENCE_FIRST_TURN`
EVIDENCE_PROMPTS = frozenset({"judge_v3"})
_FILES = ("system.j2", "user.j2")
LANGUAGE_NAMES = {"zh": "Chinese (简体中文)", "en": "English"}


def prompts_root() -> Path:
    """The prompts folder: the wheel's bundled copy, else the repository's ``prompts/``."""
    bundled = resources.files("rubric_engine") / "_data" / "prompts"
    if bundled.is_dir():
        return Path(str(bundled))
    return Path(__file__).resolve().parents[2] / "prompts"


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template pair. ``version`` is its name; ``hash`` covers both files."""

    version: str
    system_source: str
    user_source: str

    @cached_property
    def hash(self) -> str:
        digest = hashlib.sha256()
        for text in (self.system_source, self.user_source):
            digest.update(text.encode("utf-8"))
            digest.update(b"\0")
        return "sha256:" + digest.hexdigest()

    @property
    def asks_evidence(self) -> bool:
        """The judge names evidence turns (:data:`EVIDENCE_PROMPTS`); the verdict has them."""
        return self.version in EVIDENCE_PROMPTS

    @property
    def first_turn(self) -> int:
        """The number of a dialogue's first turn in this prompt (0 with evidence, else 1)."""
        return EVIDENCE_FIRST_TURN if self.asks_evidence else 1

    @cached_property
    def _env(self) -> jinja2.Environment:
        return jinja2.Environment(
            undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False
        )

    @cached_property
    def system(self) -> jinja2.Template:
        return self._env.from_string(self.system_source)

    @cached_property
    def user(self) -> jinja2.Template:
        return self._env.from_string(self.user_source)

    @cached_property
    def user_fill(self) -> UserFill | None:
        """The user template as fixed text around the row's values (see :class:`UserFill`),
        or ``None`` when the template does more with a row value than print or test it."""
        return UserFill.of(self._env, self.user_source)


#: the row values the user template is rendered with; ``case_requirements`` is a list
_USER_VALUES = (
    "row_id",
    "tag",
    "transcript",
    "cards",
    "card_enabled",
    "reference",
    "language",
    "reasoning_removed",
    "user_actions",
    "first_turn",
    "last_turn",
)


#: the row values in :data:`_USER_VALUES` order, from the keyword arguments of a render
_shown = operator.itemgetter(*_USER_VALUES)


class UserFill:
    """A user template rendered without Jinja for the part that is the same on many rows.

    Jinja renders the template once per *layout* — which values are empty (and so which
    ``{% if %}`` branches are taken) and the row's case-level requirements — with a marker in
    place of each non-empty value; the result is cut at the markers, and each row's message
    is the fixed pieces joined with its own values: the very text ``template.render`` gives
    (``tests/test_prompt.py`` renders both ways). This holds only when the template prints a
    row value as it is (``{{ transcript }}``, ``{{ cards if cards else "…" }}``) or tests it
    (``{% if reference %}``); :meth:`of` reads the template's syntax tree and returns ``None``
    for any other use (a filter, an attribute, a comparison), and the row is then rendered by
    Jinja. ``case_requirements`` is part of the layout, so it may be used freely.
    """

    #: layouts kept (rows whose case-level requirements all differ would otherwise add one
    #: each); a layout past it is rendered by Jinja
    MAX_LAYOUTS = 256

    def __init__(self, template: jinja2.Template) -> None:
        self._template = template
        #: layout -> the text before the first value, then ``(value name, text after it)``
        self._layouts: dict[tuple[Any, ...], tuple[str, tuple[tuple[str, str], ...]] | None] = {}

    @classmethod
    def of(cls, env: jinja2.Environment, source: str) -> UserFill | None:
        from jinja2 import nodes

        def plain(node: nodes.Node, parent: nodes.Node | None, grand: nodes.Node | None) -> bool:
            if isinstance(parent, nodes.Output):
                return True
            if isinstance(parent, nodes.If | nodes.CondExpr) and node is parent.test:
                return True
            return (
                isinstance(parent, nodes.CondExpr)
                and isinstance(grand, nodes.Output)
                and (node is parent.expr1 or node is parent.expr2)
            )

        def walk(node: nodes.Node, parent: nodes.Node | None, grand: nodes.Node | None) -> bool:
            if (
                isinstance(node, nodes.Name)
                and node.name in _USER_VALUES
                and (node.ctx != "load" or not plain(node, parent, grand))
            ):
                return False
            return all(walk(child, node, parent) for child in node.iter_child_nodes())

        if "\0" in source or not walk(env.parse(source), None, None):
            return None
        return cls(env.from_string(source))

    def render(self, case_requirements: list[dict[str, Any]], **values: Any) -> str:
        """``template.render(case_requirements=…, **values)``, from the layout's pieces."""
        shown = _shown(values)
        layout = (
            tuple(tuple(r.items()) for r in case_requirements) if case_requirements else (),
            *[True if value else (type(value), value) for value in shown],
        )
        try:
            found = self._layouts[layout]
        except KeyError:
            found = self._pieces(case_requirements, values)
            if len(self._layouts) < self.MAX_LAYOUTS:
                self._layouts[layout] = found
        if found is None:
            return self._template.render(case_requirements=case_requirements, **values)
        first, slots = found
        parts = [first]
        for name, after in slots:
            parts.append(str(values[name]))
            parts.append(after)
        return "".join(parts)

    def _pieces(
        self, case_requirements: list[dict[str, Any]], values: dict[str, Any]
    ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        """The layout's fixed text before the first printed value, then each printed value's
        name with the fixed text after it; ``None`` when a NUL in the fixed text (a case
        requirement's) would make the markers unclear."""
        if any("\0" in str(v) for r in case_requirements for v in r.values()):
            return None
        markers = {
            name: f"\0{i}\0" if values[name] else values[name]
            for i, name in enumerate(_USER_VALUES)
        }
        pieces = self._template.render(case_requirements=case_requirements, **markers).split("\0")
        slots = pieces[1::2]  # between two NULs: a marker's number
        if len(pieces) % 2 == 0 or not all(n.isdigit() for n in slots):
            return None
        fixed = pieces[0::2]
        names = [_USER_VALUES[int(n)] for n in slots]
        return fixed[0], tuple(zip(names, fixed[1:], strict=True))


def load_prompt(version: str = DEFAULT_PROMPT, root: Path | None = None) -> PromptTemplate:
    """Load ``prompts/<version>/{system,user}.j2``.

    Raises:
        ConfigurationError: the folder or a file is missing; lists the versions available.
    """
    root = root or prompts_root()
    folder = root / version
    try:
        system, user = ((folder / name).read_text(encoding="utf-8") for name in _FILES)
    except FileNotFoundError as exc:
        available = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise ConfigurationError(
            f"prompt template {version!r} not found under {root} (needs {', '.join(_FILES)}); "
            f"available: {', '.join(available) or 'none'}"
        ) from exc
    return PromptTemplate(version=version, system_source=system, user_source=user)


def _requirement_line(req: HardRequirement) -> dict[str, Any]:
    tags = [req.category]
    if req.critical:
        tags.append(f"RED LINE → {req.red_flag_type}")
    if req.violation_score is not None:
        tags.append(f"if violated, score ≤ {req.violation_score}")
    if not req.observable_in_data:
        tags.append("UNOBSERVABLE: never list it")
    return {"id": req.id, "tags": "; ".join(tags), "text": req.text}


def render_system(template: PromptTemplate, rubric: EvalRubric) -> str:
    """The static system message for a rubric (identical for every row of a task)."""
    return template.system.render(
        rubric=rubric,
        language=LANGUAGE_NAMES.get(rubric.language, rubric.language),
        common=[_requirement_line(r) for r in rubric.common_requirements],
        intents=[
            {"intent": i, "requirements": [_requirement_line(r) for r in i.requirements]}
            for i in rubric.intents
        ],
        card_enabled=rubric.output_parsing.questions_card.enabled,
    ).strip()


@dataclass(slots=True)
class RenderedDialogue:
    """The dialogue as the judge reads it, and the questions cards cut out of it."""

    transcript: str
    cards: tuple[tuple[int, str], ...]
    thinking_sections: int = 0
    user_actions: int = 0


def render_dialogue(row: DialogueRow, rubric: EvalRubric, first_turn: int = 1) -> RenderedDialogue:
    """Number the turns, strip thinking, cut cards out, and show tool calls and results.

    Turn ``[N]`` is message ``N - first_turn`` of the row: every message has one number, shown
    on each of its lines (``first_turn`` is the template's :attr:`PromptTemplate.first_turn`).

    A tool call on a *user* turn (the user acting on their own device, tau2's ``requestor:
    user``) is a ``USER ACTION`` line, and the tool result answering it a ``RESULT OF USER
    ACTION``; the agent's calls and results keep their own labels.
    """
    lines: list[str] = []
    cards: list[tuple[int, str]] = []
    calls_by_id: dict[str, tuple[str, str]] = {}  # call id → (tool name, who called it)
    removed = user_actions = 0
    for turn, message in enumerate(row.messages, start=first_turn):
        if message.role == "assistant":
            parsed = parse_agent_output(message.content or "", rubric.output_parsing)
            removed += parsed.thinking_sections
            if parsed.text:
                lines.append(f"[{turn}] ASSISTANT:\n{parsed.text}")
            elif not message.tool_calls:
                hidden = " (only reasoning the user never saw)" if parsed.thinking_sections else ""
                lines.append(f"[{turn}] ASSISTANT:\n(empty reply{hidden})")
            cards.extend((turn, card) for card in parsed.cards)
            for call in message.tool_calls:
                if call.id:
                    calls_by_id[call.id] = (call.name, "assistant")
                lines.append(f"[{turn}] ASSISTANT TOOL CALL {call.name} {call.arguments_text()}")
        elif message.role == "tool":
            default = (message.name or "tool", "assistant")
            name, caller = calls_by_id.get(message.tool_call_id or "", default)
            label = "RESULT OF USER ACTION" if caller == "user" else "TOOL RESULT"
            lines.append(f"[{turn}] {label} ({name}):\n{message.content or ''}")
        elif message.role == "user" and message.tool_calls:
            # the user acting on their own device (tau2 telecom `requestor: user`): shown as
            # the user's, never as the agent's, and their results likewise
            if message.content:
                lines.append(f"[{turn}] USER:\n{message.content}")
            for call in message.tool_calls:
                if call.id:
                    calls_by_id[call.id] = (call.name, "user")
                user_actions += 1
                lines.append(f"[{turn}] USER ACTION {call.name} {call.arguments_text()}")
        else:
            lines.append(f"[{turn}] {message.role.upper()}:\n{message.content or ''}")
    return RenderedDialogue(
        transcript="\n\n".join(lines),
        cards=tuple(cards),
        thinking_sections=removed,
        user_actions=user_actions,
    )


def block_tag(*contents: str) -> str:
    """A 12-hex tag from the contents' hash that none of the contents contains.

    The hash is SHA-256 of each content's UTF-8 followed by a NUL byte, then the salt's digits
    (the contents are hashed once; each salt continues a copy)."""
    joined = "\0".join((*contents, ""))
    fed = hashlib.sha256(joined.encode("utf-8"))
    salt = 0
    while True:
        digest = fed.copy()
        digest.update(str(salt).encode())
        tag = digest.hexdigest()[:12]
        if tag not in joined:  # in no content: a hex tag cannot span the NUL between two
            return tag
        salt += 1


#: a rowId the prompt shows as it is: a plain identifier, where JSON quotes would add nothing
_PLAIN_ROW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/#@+-]{0,63}")


def shown_row_id(row_id: str) -> str:
    """The rowId as the prompt shows it (outside the data block): a plain identifier (ASCII
    letters, digits and ``._:/#@+-``, at most 64 characters) as it is, anything else JSON-quoted,
    so words in a rowId read as one quoted value, never as instructions. Plain ids, which every
    shipped cassette has, keep their prompts and cassette keys (docs/security.md)."""
    if _PLAIN_ROW_ID.fullmatch(row_id):
        return row_id
    return json.dumps(row_id, ensure_ascii=False)


def render_user(
    template: PromptTemplate,
    rubric: EvalRubric,
    row: DialogueRow,
    case_requirements: Sequence[HardRequirement],
) -> str:
    """The per-row user message: case-level requirements and the delimited data blocks.

    ``reasoning_removed`` tells the template whether any thinking section was cut from the agent's
    replies (docs/protocol.md §12: the judge is told so only then). ``judge_v1`` predates it and
    always says reasoning was removed; ``judge_v2`` says it only when true. ``user_actions``: the
    dialogue has ``USER ACTION`` lines (tool calls the user made); ``judge_v2`` says that they are
    not the agent's. ``judge_v3`` is ``judge_v2`` asking for evidence turns, with ``first_turn`` and
    ``last_turn`` (the dialogue's numbering) to say so.
    """
    first_turn = template.first_turn
    dialogue = render_dialogue(row, rubric, first_turn)
    card_text = (
        "\n\n".join(f"(turn {turn})\n{card}" for turn, card in dialogue.cards)
        if dialogue.cards
        else ""
    )
    reference = _reference_text(row.reference_output)
    tag = block_tag(dialogue.transcript, card_text, reference)
    fill = template.user_fill
    return (fill.render if fill is not None else template.user.render)(
        row_id=shown_row_id(row.row_id),
        tag=tag,
        transcript=dialogue.transcript,
        cards=card_text,
        card_enabled=rubric.output_parsing.questions_card.enabled,
        reference=reference,
        case_requirements=[_requirement_line(r) for r in case_requirements],
        language=LANGUAGE_NAMES.get(rubric.language, rubric.language),
        reasoning_removed=dialogue.thinking_sections > 0,
        user_actions=dialogue.user_actions > 0,
        first_turn=first_turn,
        last_turn=first_turn + len(row.messages) - 1,
    ).strip()


def _reference_text(reference: Any) -> str:
    if reference is None or reference == "" or reference == {}:
        return ""
    if isinstance(reference, str):
        return reference
    return json.dumps(reference, ensure_ascii=False, indent=1)
