"""OpenTelemetry GenAI messages as dialogue rows (semantic conventions ``gen_ai.*``).

A row is one LLM-call span's attributes, flat or under ``attributes``::

    {"rowId": "…", "gen_ai.system_instructions": [parts…],
     "gen_ai.input.messages": [{role, parts}…], "gen_ai.output.messages": [{role, parts,
     finish_reason}…]}

Attribute values may be JSON strings, as OTel exporters write them. A message is ``{role,
parts}``; parts map as follows: ``text`` → the message text; ``tool_call`` {id, name,
arguments} → a tool call; ``tool_call_response`` {id, response} → a ``tool`` turn answering
that call; ``server_tool_call`` / ``server_tool_call_response`` (built-in tools such as
``code_interpreter``) → the same, named after the built-in tool; ``reasoning`` → dropped (the
user never saw it, docs/protocol.md §12); any other part (``blob``, ``uri``, ``file``, …) → a
``[<type> part]`` placeholder in the text.

``gen_ai.output.messages`` lists the model's *choices* (one message each); the user saw one,
so the first is kept and ``metadata.otelChoices`` records how many there were. Messages with
``parts`` inside a plain ``messages`` list are read the same way. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from rubric_engine.dialogue.errors import RowShapeError
from rubric_engine.dialogue.storable import MAX_ROW_DEPTH, storable_problem
from rubric_engine.formats import jsonl

INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
OTEL_KEYS = (INPUT, OUTPUT, SYSTEM)


def otel_attributes(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ``gen_ai.*`` attributes of a row (flat or under ``attributes``), else ``None``."""
    attributes = obj.get("attributes")
    source = attributes if isinstance(attributes, dict) else obj
    found = {k: source[k] for k in OTEL_KEYS if k in source}
    return found or None


def _decoded(value: Any, field: str) -> Any:
    if isinstance(value, str):
        try:
            value = jsonl.loads(value)
        except json.JSONDecodeError as exc:
            raise RowShapeError(
                field, f"not JSON ({exc.msg}); expected a list of messages"
            ) from exc
        except RecursionError as exc:  # the decoder recurses: ~1000 levels exhaust it
            raise RowShapeError(
                field, f"JSON nested far deeper than the {MAX_ROW_DEPTH} levels a row may have"
            ) from exc
        if (problem := storable_problem(value)) is not None:  # as for the row itself
            path, message = problem
            raise RowShapeError(f"{field} (JSON text){path and ' ' + path}", message)
    return value


def _text_of(parts: list[Any]) -> str:
    return "\n".join(
        str(p.get("content", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def otel_message(raw: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """One OTel message as one or more canonical messages (tool responses split out)."""
    role, parts = raw.get("role"), raw.get("parts")
    if not isinstance(parts, list):
        raise RowShapeError(f"{field}.parts", "must be a list of parts ({type, …})")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise RowShapeError(f"{field}.parts[{i}]", "a part is an object with a `type`")
        kind = part["type"]
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "reasoning":
            continue
        elif kind in ("tool_call", "server_tool_call"):
            arguments = part.get("arguments", part.get("server_tool_call"))
            calls.append({"id": part.get("id"), "name": part.get("name"), "arguments": arguments})
        elif kind in ("tool_call_response", "server_tool_call_response"):
            response = part.get("response", part.get("server_tool_call_response"))
            content = (
                response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
            )
            responses.append({"role": "tool", "content": content, "tool_call_id": part.get("id")})
        else:
            texts.append(f"[{kind} part]")
    text = "\n".join(texts) if texts else None
    if role == "tool":
        return responses or [{"role": "tool", "content": text or ""}]
    if not responses:
        return [{"role": role, "content": text, "tool_calls": calls}]
    # a built-in tool ran inside the model's own message: call, result, then the answer
    split = [{"role": role, "content": None, "tool_calls": calls}, *responses]
    return [*split, {"role": role, "content": text}] if text is not None else split


def otel_row(obj: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """A row object (``messages`` + metadata) from a span's ``gen_ai.*`` attributes.

    Raises:
        RowShapeError: an attribute is not a list (or JSON list) of messages / parts.
    """
    messages: list[dict[str, Any]] = []
    system = _decoded(attributes.get(SYSTEM), SYSTEM)
    if system:
        if not isinstance(system, list):
            raise RowShapeError(SYSTEM, "must be a list of parts")
        messages.append({"role": "system", "content": _text_of(system)})
    metadata = dict(obj.get("metadata") or {})
    for key in (INPUT, OUTPUT):
        value = _decoded(attributes.get(key), key) or []
        if not isinstance(value, list):
            raise RowShapeError(key, "must be a list of messages {role, parts}")
        if key == OUTPUT and len(value) > 1:
            metadata["otelChoices"] = len(value)
            value = value[:1]
        for i, raw in enumerate(value):
            if not isinstance(raw, dict):
                raise RowShapeError(f"{key}[{i}]", "a message is an object {role, parts}")
            messages.extend(otel_message(raw, f"{key}[{i}]"))
    rest = {k: v for k, v in obj.items() if k not in (*OTEL_KEYS, "attributes", "metadata")}
    return {**rest, "messages": messages, "metadata": metadata}
