"""Parse the *agent's* raw output before the judge sees it (docs/protocol.md §12).

* Thinking sections are removed only when well formed: an opening marker (``<think>`` or the
  pack's) and the closing marker after it. The user never saw such a section, so it is not
  judged and no rule check reads it. A closing marker with no opening one before it, or an
  opening one never closed, is *kept* with the text around it (the user may have read that
  text: cutting it let ``must_not_contain`` pass on words the user saw) and reported, so the
  row carries a warning (:func:`thinking_warnings`).
* Only a pack that says so (``outputParsing.thinkingOpensInPrompt: true``: the agent's chat
  template writes the opening marker into the prompt, so replies carry only the closing one)
  has everything before a reply's first closing marker removed.
* A questions card (suggested follow-up questions between the pack's card markers) is cut out
  of the message and handed to the judge separately, so ``questionsCheck`` can judge it.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.results.model import ProtocolWarning, WarningCode
from rubric_engine.rubric.model import OutputParsing


@dataclass(frozen=True, slots=True)
class ParsedAgentOutput:
    """What the user saw, and the card cut out of it.

    Attributes:
        text: the visible message with thinking sections and cards removed, trimmed.
        cards: the card bodies in order of appearance, trimmed; empty if none.
        thinking_sections: how many thinking sections were removed.
        stray_thinking_ends: closing markers with no opening one before them (kept in
            ``text``), over all marker pairs.
        unclosed_thinking_starts: opening markers never closed (kept in ``text``, with all
            that follows them); at most one per marker pair.
    """

    text: str
    cards: tuple[str, ...] = ()
    thinking_sections: int = 0
    stray_thinking_ends: int = 0
    unclosed_thinking_starts: int = 0


@dataclass(slots=True)
class _Stripped:
    text: str
    removed: int
    stray_ends: int
    unclosed: bool


def _strip_thinking(text: str, start: str, end: str, opens_in_prompt: bool) -> _Stripped:
    """Remove every well-formed ``start…end`` section of ``text``; keep anything else.

    With ``opens_in_prompt``, a first ``end`` that comes before any ``start`` closes a section
    opened in the prompt: everything before it is removed too.
    """
    first_end, first_start = text.find(end), text.find(start)
    if first_end < 0 and first_start < 0:
        return _Stripped(text, 0, 0, unclosed=False)  # no marker at all: the usual reply
    kept: list[str] = []
    removed = stray = 0
    position = 0
    if opens_in_prompt and first_end >= 0 and (first_start < 0 or first_end < first_start):
        position, removed = first_end + len(end), 1
    while True:
        begin = text.find(start, position)
        stray += text.count(end, position, begin if begin >= 0 else len(text))
        if begin < 0:
            kept.append(text[position:])
            return _Stripped("".join(kept), removed, stray, unclosed=False)
        finish = text.find(end, begin + len(start))
        if finish < 0:  # never closed: the user may have seen all of it
            kept.append(text[position:])
            return _Stripped("".join(kept), removed, stray, unclosed=True)
        kept.append(text[position:begin])
        removed += 1
        position = finish + len(end)


def _cut_cards(text: str, start: str, end: str) -> tuple[str, list[str]]:
    """Remove every ``start…end`` card; an unclosed start cuts to the end, and an end with
    no start before it cuts from the beginning (a card cut off by the UI's layout)."""
    first_end, first_start = text.find(end), text.find(start)
    if first_end < 0 and first_start < 0:
        return text, []  # no card
    kept: list[str] = []
    cut: list[str] = []
    position = 0
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
        Malformed thinking markers are counted, and the text around them kept.
    """
    text = content
    removed = stray = unclosed = 0
    for marker in parsing.thinking_markers:
        stripped = _strip_thinking(text, marker.start, marker.end, parsing.thinking_opens_in_prompt)
        text = stripped.text
        removed += stripped.removed
        stray += stripped.stray_ends
        unclosed += stripped.unclosed
    cards: list[str] = []
    card = parsing.questions_card
    if card.enabled:
        text, found = _cut_cards(text, card.start, card.end)
        cards = [c.strip() for c in found if c.strip()]
    return ParsedAgentOutput(
        text=text.strip(),
        cards=tuple(cards),
        thinking_sections=removed,
        stray_thinking_ends=stray,
        unclosed_thinking_starts=unclosed,
    )


def thinking_warnings(row: DialogueRow, parsing: OutputParsing) -> tuple[ProtocolWarning, ...]:
    """One warning per assistant turn whose thinking markers are malformed (docs/protocol.md §12).

    Returns:
        In turn order: ``STRAY_THINKING_END`` (a closing marker with no opening one before it)
        and/or ``UNCLOSED_THINKING_START`` (an opening marker never closed), each with the
        1-based turn number in ``detail``; empty when the pack has no thinking markers.
    """
    if not parsing.thinking_markers:
        return ()
    found: list[ProtocolWarning] = []
    for turn, message in enumerate(row.messages, start=1):
        if message.role != "assistant" or not message.content:
            continue
        parsed = parse_agent_output(message.content, parsing)
        if parsed.stray_thinking_ends:
            found.append(
                ProtocolWarning(
                    code=WarningCode.STRAY_THINKING_END,
                    detail=f"turn {turn}: {parsed.stray_thinking_ends} closing marker(s) with "
                    "no opening one; the text was kept (if the agent's template opens the "
                    "section in the prompt, set outputParsing.thinkingOpensInPrompt: true)",
                )
            )
        if parsed.unclosed_thinking_starts:
            found.append(
                ProtocolWarning(
                    code=WarningCode.UNCLOSED_THINKING_START,
                    detail=f"turn {turn}: an opening marker is never closed; the text from it "
                    "on was kept",
                )
            )
    return tuple(found)
