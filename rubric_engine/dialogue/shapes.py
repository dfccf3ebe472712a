"""Row shapes: map one input object, in any supported shape, to a :class:`DialogueRow`.

Shapes of the conversation:

* ``messages`` — OpenAI chat messages (``tool_calls`` with ``function.arguments`` as a JSON
  string, ``tool`` turns with ``tool_call_id``), or tau2-style tool calls ``{id, name,
  arguments}``; content may be a string, ``null`` or a list of text parts.
* ``conversations`` — ShareGPT turns ``{from, value}`` with ``human``/``gpt``/``system`` and
  ``function_call``/``observation`` tool turns.
* ``traj`` — a tau-bench (v1) trajectory: OpenAI messages whose ``system`` message (the policy
  the agent was given) is dropped, since the rubric carries the rules.
* ``gen_ai.input.messages`` / ``gen_ai.output.messages`` — OpenTelemetry GenAI span
  attributes (:mod:`rubric_engine.dialogue.otel`); messages with ``parts`` are read the same
  way inside ``messages``.
* ``messages_display`` — a flattened transcript, lines prefixed ``user:``/``assistant:``/``tool:``;
  ``assistant: None`` is a tool call whose name and arguments were not recorded.

The case shapes of docs/cases.md (:mod:`rubric_engine.cases`) are mapped first: an eval case
(``case_id`` + ``case_version``) or a RAG/agent row (``id``, ``input``, an ``expected``
mapping), each with the agent's run beside it. ``expected`` as a list holds rule checks
(docs/rule-checks.md). Other top-level fields besides the row fields are kept in ``metadata``. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from rubric_engine.cases.eval_case import MARKER_KEYS, eval_case_row, is_eval_case
from rubric_engine.cases.rag_agent import is_rag_agent_row, rag_agent_row
from rubric_engine.dialogue.errors import RowShapeError
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.otel import otel_attributes, otel_message, otel_row
from rubric_engine.dialogue.storable import storable_problem
from rubric_engine.formats import jsonl
from rubric_engine.rules.evidence import trace_problems

__all__ = ["RowShapeError", "row_from_object"]

ID_KEYS = ("rowId", "row_id", "id", "case_id", "caseId")
_ROW_KEYS = {
    *ID_KEYS,
    "messages",
    "conversations",
    "traj",
    "messages_display",
    "referenceOutput",
    "reference_output",
    "trace",
    "expectedBehavior",
    "expected_behavior",
    "negativeBehavior",
    "negative_behavior",
    "expected",
    "metadata",
}
_BEHAVIOUR_KEYS = ("expectedBehavior", "expected_behavior", "negativeBehavior", "negative_behavior")
#: ``DialogueRow.model_validate`` without its wrapper (every input row)
_VALIDATE_ROW: Callable[[Any], DialogueRow] = DialogueRow.__pydantic_validator__.validate_python
_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
}
_DISPLAY_LINE = re.compile(r"^(user|assistant|tool|system): ?(.*)$")
UNRECORDED_TOOL = "(unrecorded tool call)"
ROLES = ("system", "user", "assistant", "tool")
#: a row longer than this (characters of message text) is refused: no judge context holds it
MAX_ROW_CHARS = 400_000


def _text(content: Any, field: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    raise RowShapeError(
        field,
        f"content must be a string, a list of text parts or null, not {type(content).__name__}",
    )


def _tool_call(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RowShapeError(field, "a tool call must be an object with a name and arguments")
    function = raw.get("function")
    if isinstance(function, dict):  # OpenAI: {id, type, function: {name, arguments}}
        return {
            "id": raw.get("id"),
            "name": function.get("name"),
            "arguments": function.get("arguments"),
        }
    return {"id": raw.get("id"), "name": raw.get("name"), "arguments": raw.get("arguments")}


def _message(raw: Any, turns: str, i: int) -> dict[str, Any]:
    """Turn ``i`` of the list ``turns`` (``messages``, ``traj``) as a canonical message; its
    field (``messages[3]``) is spelled out only for an error (every turn of every row)."""
    if not isinstance(raw, dict):
        raise RowShapeError(f"{turns}[{i}]", "each message must be an object with role and content")
    calls = raw.get("tool_calls") or raw.get("toolCalls")
    if calls and not isinstance(calls, list):
        raise RowShapeError(f"{turns}[{i}].tool_calls", "tool_calls must be a list")
    role = raw.get("role")
    if role not in ROLES:
        raise RowShapeError(
            f"{turns}[{i}].role", f"unknown role {role!r}; valid: {', '.join(ROLES)}"
        )
    if "content" not in raw and not calls:  # a misspelt key read as an empty turn
        raise RowShapeError(
            f"{turns}[{i}]",
            "no content: a message needs `content` (text, a list of text parts, or null when "
            f"empty) or `tool_calls`; this one has {_keys_of(raw)}",
        )
    call_id = raw.get("tool_call_id") or raw.get("toolCallId")
    if role == "tool" and call_id is None:
        call_id = raw.get("id")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        content = _text(content, f"{turns}[{i}].content")
    return {
        "role": role,
        "content": content,
        "tool_calls": [_tool_call(c, f"{turns}[{i}].tool_calls[{n}]") for n, c in enumerate(calls)]
        if calls
        else [],
        "tool_call_id": call_id,
        "name": raw.get("name"),
    }


def _sharegpt_message(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or "from" not in raw:
        raise RowShapeError(field, "a ShareGPT turn is an object {from, value}")
    if "value" not in raw:  # a misspelt key read as an empty turn
        raise RowShapeError(
            field, f"no value: a ShareGPT turn is {{from, value}}; this one has {_keys_of(raw)}"
        )
    speaker, value = raw["from"], raw.get("value")
    role = _SHAREGPT_ROLES.get(speaker)
    if role is None:
        raise RowShapeError(
            f"{field}.from", f"unknown speaker {speaker!r}; valid: {', '.join(_SHAREGPT_ROLES)}"
        )
    if speaker == "function_call":
        try:
            call = jsonl.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError as exc:
            raise RowShapeError(
                f"{field}.value", f"function_call value is not JSON: {exc}"
            ) from exc
        if not isinstance(call, dict):
            raise RowShapeError(f"{field}.value", "function_call value must be {name, arguments}")
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"name": call.get("name"), "arguments": call.get("arguments")}],
        }
    return {"role": role, "content": _text(value, f"{field}.value")}


def _sharegpt_messages(turns: list[Any]) -> list[dict[str, Any]]:
    """ShareGPT turns in order; each ``observation`` answers the oldest unanswered call.

    ShareGPT carries no call IDs, so each ``function_call`` gets ``sharegpt-call-<turn>`` and
    the next ``observation`` is linked to it: the judge then reads which tool a result came
    from, and rule checks see the calls in order.
    """
    messages: list[dict[str, Any]] = []
    waiting: list[tuple[str, str | None]] = []
    for i, turn in enumerate(turns):
        message = _sharegpt_message(turn, f"conversations[{i}]")
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            call["id"] = f"sharegpt-call-{i}"
            waiting.append((call["id"], call.get("name")))
        elif message["role"] == "tool" and waiting:
            message["tool_call_id"], message["name"] = waiting.pop(0)
        messages.append(message)
    return messages


def _display_messages(text: Any) -> list[dict[str, Any]]:
    if not isinstance(text, str):
        raise RowShapeError("messages_display", "must be the transcript as one string")
    messages: list[dict[str, Any]] = []
    for line in text.splitlines():
        found = _DISPLAY_LINE.match(line)
        if found:
            role, content = found.groups()
            if role == "assistant" and content.strip() == "None":
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"name": UNRECORDED_TOOL}],
                    }
                )
            else:
                messages.append({"role": role, "content": content})
        elif messages and messages[-1]["content"] is not None:
            messages[-1]["content"] += "\n" + line
        elif line.strip():
            raise RowShapeError(
                "messages_display",
                f"line {line[:40]!r} has no role prefix (user:, assistant:, tool:, system:)",
            )
    return messages


def _conversation(obj: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("messages", "conversations", "traj"):
        if key in obj and not isinstance(obj[key], list):
            raise RowShapeError(key, f"must be a list of turns, not {type(obj[key]).__name__}")
    if isinstance(obj.get("messages"), list):
        found: list[dict[str, Any]] = []
        for i, m in enumerate(obj["messages"]):
            # {role, content}: the canonical message already (its other fields the defaults)
            plain = type(m) is dict and len(m) == 2 and type(m.get("content")) is str
            if plain and m.get("role") in ROLES:
                found.append(m)
                continue
            if isinstance(m, dict) and "parts" in m and "content" not in m:  # OTel GenAI
                found.extend(_message(p, "messages", i) for p in otel_message(m, f"messages[{i}]"))
            else:
                found.append(_message(m, "messages", i))
        return found
    if isinstance(obj.get("conversations"), list):
        return _sharegpt_messages(obj["conversations"])
    if isinstance(obj.get("traj"), list):
        return [
            _message(m, "traj", i)
            for i, m in enumerate(obj["traj"])
            if not (isinstance(m, dict) and m.get("role") == "system")
        ]
    if "messages_display" in obj:
        return _display_messages(obj["messages_display"])
    raise RowShapeError(
        "messages",
        "missing: a row needs `messages` (OpenAI chat format), "
        "`conversations` (ShareGPT), `traj` (tau-bench) or "
        f"`messages_display` (flattened transcript); this row has {_keys_of(obj) or 'no keys'}. "
        'A file in another shape needs converting first: docs/inputs.md "Other shapes"',
    )


#: the keys a problem of a row or turn without its text lists of it
MAX_KEYS_SHOWN = 12


def _keys_of(obj: dict[Any, Any]) -> str:
    """The keys a row or turn has, sorted, the first :data:`MAX_KEYS_SHOWN` (``…`` for more):
    what a problem names when the key it needs is not among them."""
    more = ", …" if len(obj) > MAX_KEYS_SHOWN else ""
    return ", ".join(sorted(map(str, obj))[:MAX_KEYS_SHOWN]) + more


def row_from_object(obj: Any, default_id: str) -> DialogueRow:
    """Map one input object (any supported shape) to a :class:`DialogueRow`.

    Args:
        obj: the decoded JSON object.
        default_id: the rowId when the object has none (``<file stem>-<line>``).

    Raises:
        RowShapeError: the object's shape is not a dialogue, or it holds something the store
            cannot keep (:func:`rubric_engine.dialogue.storable.storable_problem`: nesting
            deeper than 100 levels, ``NaN``/``Infinity``, a lone surrogate).
        pydantic.ValidationError: a field has the wrong type or value.
    """
    if not isinstance(obj, dict):
        raise RowShapeError("", "each row must be a JSON object with `messages` or `conversations`")
    # the store keeps the row as JSON: what it cannot keep is refused now, before the judge
    # is paid, and before any adapter walks it (adapters add a few levels, far below the
    # serializer's limit; the OTel adapter checks the JSON strings it decodes the same way)
    if (problem := storable_problem(obj)) is not None:
        raise RowShapeError(*problem)
    # each test asks first for a key its shape cannot lack (this runs for every input row)
    if MARKER_KEYS[-1] in obj and is_eval_case(obj):
        obj = eval_case_row(obj)
    elif "expected" in obj and is_rag_agent_row(obj):
        obj = rag_agent_row(obj)
    elif "messages" not in obj and (attributes := otel_attributes(obj)) is not None:
        obj = otel_row(obj, attributes)
    if "expected" in obj and not isinstance(obj["expected"], list | None):
        raise RowShapeError(
            "expected",
            "must be a list of rule checks ({type: …}, see docs/rule-checks.md), or a RAG/agent "
            "row's mapping (docs/cases.md) on a row that also has `id` and `input`",
        )
    messages = _conversation(obj)
    assistant, size = False, 0
    for m in messages:  # plain loops here, not generators: this runs for every input row
        if m["role"] == "assistant":
            assistant = True
        content = m.get("content")
        if content:
            size += len(content)
    if not assistant:
        raise RowShapeError("messages", "no assistant turn: there is nothing to evaluate")
    if size > MAX_ROW_CHARS:
        raise RowShapeError(
            "messages",
            f"{size:,} characters of text: longer than any judge "
            f"context holds (limit {MAX_ROW_CHARS:,}); trim the "
            "dialogue or split it",
        )
    row_id = default_id
    for k in ID_KEYS:
        given = obj.get(k)
        if given is not None and str(given).strip():
            row_id = given
            break
    if isinstance(row_id, str):
        row_id = row_id.strip()
    elif isinstance(row_id, bool) or not isinstance(row_id, int):  # true is no row's id
        shown = (
            json.dumps(row_id)
            if isinstance(row_id, bool | float)
            else {list: "an array", dict: "an object"}.get(type(row_id), type(row_id).__name__)
        )
        if isinstance(row_id, float):  # 1e3 and 17.0 are read as 1000.0 and 17.0
            shown += (
                ": a number written with a fraction or an exponent (17.0, 1e3) is not a whole "
                f'number here; write it without one, or as a string ("{row_id:g}")'
            )
        raise RowShapeError(
            "rowId", f'must be a string or a whole number (e.g. "row-17" or 17), not {shown}'
        )
    given_metadata = obj.get("metadata")
    if given_metadata is not None and not isinstance(given_metadata, dict):
        raise RowShapeError("metadata", "must be a mapping of names to values")
    for key in _BEHAVIOUR_KEYS:
        if isinstance(obj.get(key), str):
            raise RowShapeError(key, "must be a list of strings (one behaviour each)")
    # the model copies the mapping it validates: copied here only to add fields to it
    metadata = given_metadata if given_metadata is not None else {}
    if not obj.keys() <= _ROW_KEYS:  # other top-level fields join the metadata
        metadata = dict(metadata)
        for key, value in obj.items():
            if key not in _ROW_KEYS:
                metadata.setdefault(key, value)
    trace = obj.get("trace")
    if trace is not None:
        for field, message in trace_problems(trace)[:1]:
            raise RowShapeError(field, message)
    return _VALIDATE_ROW(
        {
            "rowId": str(row_id),  # by alias, so a refused rowId is named `rowId`
            "messages": messages,
            "reference_output": obj.get("referenceOutput", obj.get("reference_output")),
            "trace": trace,
            "expected_behavior": obj.get("expectedBehavior", obj.get("expected_behavior")) or (),
            "negative_behavior": obj.get("negativeBehavior", obj.get("negative_behavior")) or (),
            "expected": obj.get("expected") or (),
            "metadata": metadata,
        }
    )
