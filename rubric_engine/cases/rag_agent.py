"""RAG/agent rows ``{id, category, input, expected, metadata}`` (docs/cases.md).

The row describes the test; the agent's run sits next to it: ``output`` (the answer, or
``{answer, retrieved_docs}``) or ``messages``, and an optional ``trace`` (tool calls,
``total_cost_usd``, ``final_state``). ``expected`` (a mapping) becomes rule checks:

=======================  ==================================================================
``expected`` key         check
=======================  ==================================================================
``must_contain_keywords``  ``must_contain`` (every keyword must appear)
``must_not_contain``       ``must_not_contain``
``reference_doc_id``       ``reference_document``
``tool_calls``             ``tool_sequence`` mode ``subset``: each ``{tool,
                           params_must_include}`` is matched by a call whose arguments hold
                           those values (``must_appear`` is implied)
``tool_calls_must_not``    ``forbidden_tools``
``max_steps``              ``max_steps``
``max_cost_usd``           ``max_cost``
``max_duration_ms``        ``max_duration``
``final_state``            ``final_state`` (inclusion)
``checks``                 any further check objects, as written in ``docs/rule-checks.md``
=======================  ==================================================================

``reference_answer``, ``reference_section`` and ``task_completed`` are not checks: they go to
the row's ``referenceOutput`` for the judge (never a standard answer). Any other key is an
error naming the valid ones. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from rubric_engine.cases.run import run_fields
from rubric_engine.dialogue.errors import RowShapeError

_REFERENCE_KEYS = ("reference_answer", "reference_section", "task_completed")
_CHECK_KEYS = (
    "must_contain_keywords",
    "must_not_contain",
    "reference_doc_id",
    "tool_calls",
    "tool_calls_must_not",
    "max_steps",
    "max_cost_usd",
    "max_duration_ms",
    "final_state",
    "checks",
)


def is_rag_agent_row(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("expected"), dict)
        and "input" in obj
        and "id" in obj
    )


def _tool_call(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str):
        raise RowShapeError(field, "each tool call is {tool, params_must_include?, must_appear?}")
    unknown = set(raw) - {"tool", "params_must_include", "must_appear"}
    if unknown:
        raise RowShapeError(
            field,
            f"unknown key(s) {', '.join(sorted(unknown))}; valid: tool, params_must_include, "
            "must_appear",
        )
    if raw.get("must_appear") is False:
        raise RowShapeError(
            f"{field}.must_appear",
            "must_appear: false is a forbidden tool; list it under tool_calls_must_not instead",
        )
    call: dict[str, Any] = {"tool": raw["tool"]}
    values = raw.get("params_must_include")
    if values is not None and not (
        isinstance(values, list) and all(isinstance(v, str | int | float) for v in values)
    ):
        raise RowShapeError(
            f"{field}.params_must_include",
            f'must be a list of values the call\'s arguments contain, e.g. ["P-OPD-001"]; got '
            f"{type(values).__name__} {json.dumps(values, ensure_ascii=False)[:80]}",
        )
    if values:
        call["valuesInclude"] = list(values)
    return call


def _checks(expected: dict[str, Any]) -> list[Any]:
    unknown = set(expected) - set(_CHECK_KEYS) - set(_REFERENCE_KEYS)
    if unknown:
        raise RowShapeError(
            "expected",
            f"unknown key(s) {', '.join(sorted(unknown))}; valid: "
            f"{', '.join((*_CHECK_KEYS, *_REFERENCE_KEYS))}",
        )
    checks: list[Any] = []
    simple = (
        ("must_contain_keywords", "must_contain", "keywords"),
        ("must_not_contain", "must_not_contain", "keywords"),
        ("reference_doc_id", "reference_document", "docId"),
        ("tool_calls_must_not", "forbidden_tools", "tools"),
        ("max_steps", "max_steps", "maxSteps"),
        ("max_cost_usd", "max_cost", "maxCostUsd"),
        ("max_duration_ms", "max_duration", "maxDurationMs"),
        ("final_state", "final_state", "state"),
    )
    for key, check_type, field in simple:
        if expected.get(key) not in (None, [], ""):
            checks.append({"type": check_type, "name": key, field: expected[key]})
    calls = expected.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise RowShapeError("expected.tool_calls", "must be a list of {tool, …}")
        checks.append(
            {
                "type": "tool_sequence",
                "name": "tool_calls",
                "mode": "subset",
                "calls": [_tool_call(c, f"expected.tool_calls[{i}]") for i, c in enumerate(calls)],
            }
        )
    extra = expected.get("checks") or []
    if not isinstance(extra, list):
        raise RowShapeError("expected.checks", "must be a list of check objects")
    return checks + extra


def rag_agent_row(obj: dict[str, Any]) -> dict[str, Any]:
    """Map a RAG/agent row plus its run to a row object.

    Raises:
        RowShapeError: an unknown ``expected`` key, a malformed tool call, or no run.
    """
    expected: dict[str, Any] = obj["expected"]
    fields = run_fields(obj, obj["input"], "RAG/agent row")
    reference = {k: expected[k] for k in _REFERENCE_KEYS if k in expected}
    metadata = dict(obj.get("metadata") or {})
    metadata.setdefault("category", obj.get("category"))
    if isinstance(obj["input"], dict):
        metadata.setdefault("input", obj["input"])
    return {
        "rowId": obj["id"],
        **fields,
        "trace": fields.get("trace", obj.get("trace")),
        "referenceOutput": reference or None,
        "expected": _checks(expected),
        "metadata": metadata,
    }
