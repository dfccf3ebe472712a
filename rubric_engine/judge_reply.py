"""Find the judge's JSON verdict in what real judges send back (SPEC §4).

Judges wrap their verdict: in Markdown code fences, after prose, after a reasoning block
(``<think>…</think>``, sometimes with only the closing tag when the opening one was in the
chat template), or after quoting a JSON object that appeared in the dialogue. The rules:

1. A reply that is one JSON object as a whole is taken as is (tags inside its strings are
   harmless).
2. A leading reasoning block is dropped; text before a lone closing tag is reasoning too. An
   opening tag that is never closed means the verdict never came: no JSON is taken from
   inside unfinished reasoning.
3. Of the remaining text, the **last** fenced block that is a JSON object wins; else the last
   balanced ``{…}`` that parses as a JSON object. The last one is the judge's own final
   answer; earlier ones may be quotes from the dialogue.
4. Nothing is repaired: a reply cut off mid-object has no balanced object and is re-asked.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
NO_JSON = (
    "the reply holds no JSON object; answer with exactly one JSON object with the "
    "schema's fields, with no code fences, prose or reasoning around it"
)


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def _without_reasoning(text: str) -> str:
    opened, closed = _OPEN.search(text), _CLOSE.search(text)
    if closed and (opened is None or closed.start() < opened.start()):
        return text[closed.end() :]  # the opening tag was in the chat template
    if opened is None:
        return text
    before = text[: opened.start()]
    close_after = _CLOSE.search(text, opened.end())
    if close_after is None:
        if before.strip():
            return before  # the verdict came first, then unfinished musing
        raise json.JSONDecodeError(
            f"the reasoning block opened with {opened.group(0)} was "
            "never closed, so no verdict followed it",
            text,
            opened.start(),
        )
    return text[close_after.end() :] if not before.strip() else text


def _balanced_objects(text: str) -> list[str]:
    """Every top-level ``{…}`` span, respecting JSON strings and escapes."""
    spans: list[str] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def reply_text(message: Mapping[str, Any]) -> str | None:
    """The judge's reply in one wire-format (OpenAI) message: its content, or, when that is
    empty, the arguments of its last tool call that has any (judges that answer by tool call)."""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return content
    for call in reversed(message.get("tool_calls") or []):
        arguments = (call.get("function") or {}).get("arguments")
        if isinstance(arguments, str) and arguments.strip():
            return arguments
    return content if isinstance(content, str) else None


def extract_verdict_json(reply: str) -> str:
    """The JSON text of the verdict in ``reply``.

    Raises:
        json.JSONDecodeError: no JSON object can be found (instructor re-asks with the message).
    """
    text = reply.strip()
    if _is_object(text):
        return text
    text = _without_reasoning(text)
    fenced: list[str] = [block.strip() for block in _FENCE.findall(text)]
    for block in reversed(fenced):
        if _is_object(block):
            return block
    for candidate in reversed(_balanced_objects(text)):
        if _is_object(candidate):
            return candidate
    raise json.JSONDecodeError(NO_JSON, reply, 0)
