"""Parse the *agent's* raw output before the judge sees it (SPEC §6, seed 003 §二 outputParsing).

* Thinking sections (``<think>…</think>`` or the pack's markers) are removed: the user never
  saw them, so they are not part of what is judged. An unclosed start marker hides the rest
  of that message, as a chat UI would; an end marker with no start before it (reasoning
  models whose template holds the opening tag) hides everything before it.
* A questions card (suggested follow-up questions between the pack's card markers) is cut out
  of the message and handed to the judge separately, so ``questionsCheck`` can judge it.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from rubric_engine.rubric.model import OutputParsing


@dataclass(frozen=True)
class ParsedAgentOutput:
    """What the user saw, and the card cut out of it.

    Attributes:
        text: the visible message with thinking sections and cards removed, trimmed.
        cards: the card bodies in order of appearance, trimmed; empty if none.
        thinking_sections: how many thinking sections were removed.
    """

    text: str
    cards: tuple[str, ...] = ()
    thinking_sections: int = 0


def _cut(text: str, start: str, end: str) -> tuple[str, list[str]]:
    """Remove every ``start…end`` section; an unclosed start cuts to the end, and an end with
    no start before it (the start was in the chat template) cuts from the beginning."""
    kept: list[str] = []
    cut: list[str] = []
    position = 0
    first_end, first_start = text.find(end), text.find(start)
    if first_end >= 0 and (first_start < 0 or first_end < first_start):
        cut.append(text[:first_end])
        position = first_end + len(end)
    while True:
        begin = text.find(start, position)
        if begin < 0:
            kept.append(text[position:])
            break
        kept.append(text[position:begin])
        finish = text.find(end, begin + len(start))
        if finish < 0:
            cut.append(text[begin + len(start) :])
            break
        cut.append(text[begin + len(start) : finish])
        position = finish + len(end)
    return "".join(kept), cut


def parse_agent_output(content: str, parsing: OutputParsing) -> ParsedAgentOutput:
    """Strip thinking sections, then cut out questions cards, per the pack's settings.

    Args:
        content: one assistant message as the agent produced it.
        parsing: the pack's ``outputParsing``.

    Returns:
        The visible text and the cards; ``content`` unchanged (trimmed) when both are off.
    """
    text = content
    removed = 0
    for marker in parsing.thinking_markers:
        text, sections = _cut(text, marker.start, marker.end)
        removed += len(sections)
    cards: list[str] = []
    card = parsing.questions_card
    if card.enabled:
        text, found = _cut(text, card.start, card.end)
        cards = [c.strip() for c in found if c.strip()]
    return ParsedAgentOutput(text=text.strip(), cards=tuple(cards), thinking_sections=removed)
