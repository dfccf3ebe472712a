"""The agent's run next to a case: its messages, or an input/output pair. Pure."""

from __future__ import annotations

import json
from typing import Any

from rubric_engine.dialogue.errors import RowShapeError

CONVERSATION_KEYS = ("messages", "conversations", "traj", "messages_display")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def user_text(case_input: Any) -> str:
    """The user's words in a case ``input``: the string, or a known text field of a mapping."""
    if isinstance(case_input, dict):
        for key in ("question", "user_message", "userMessage", "query", "message", "content"):
            if isinstance(case_input.get(key), str):
                return str(case_input[key])
    return _text(case_input)


def run_fields(obj: dict[str, Any], case_input: Any, what: str) -> dict[str, Any]:
    """The conversation of a case row: its own conversation field, else ``input`` + ``output``.

    ``output`` is the agent's answer as a string, or ``{answer, retrieved_docs?, …}`` whose
    other fields (retrieved documents, cost, duration) are added to the trace.

    Raises:
        RowShapeError: neither a conversation nor an ``output`` is given.
    """
    found = {k: obj[k] for k in CONVERSATION_KEYS if k in obj}
    if found:
        return found
    output = obj.get("output")
    if output is None:
        raise RowShapeError(
            "output",
            f"a {what} describes the test; scoring also needs the agent's run: add `output` "
            "(the answer, or {answer, retrieved_docs}) or `messages` (the whole dialogue)",
        )
    extra_trace: dict[str, Any] = {}
    if isinstance(output, dict):
        answer = output.get("answer")
        if not isinstance(answer, str):
            raise RowShapeError("output.answer", "must be the agent's answer as a string")
        extra_trace = {k: v for k, v in output.items() if k != "answer"}
    elif isinstance(output, str):
        answer = output
    else:
        raise RowShapeError("output", "must be the answer (string) or {answer, …}")
    fields: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": user_text(case_input)},
            {"role": "assistant", "content": answer},
        ]
    }
    if extra_trace:
        fields["trace"] = {**extra_trace, **(obj.get("trace") or {})}
    return fields
