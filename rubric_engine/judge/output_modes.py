"""How the verdict's shape is asked for: the output modes and their request forms.

=========  =====================================================  ============================
mode       what the request carries                               who enforces the shape
=========  =====================================================  ============================
``json``   the verdict's JSON Schema in the system message,       the judge (we validate)
           ``response_format: {"type": "json_object"}``
           (instructor's JSON mode; the demo cassettes' form)
``schema`` the *constrained* schema (below) in ``response_format``  the server's decoder
           — OpenAI's ``json_schema`` form first, then the
           ``json_object`` + ``schema`` form llama.cpp's server
           and vLLM accept
``tools``  one forced tool call whose parameters are the           the server (tool grammar)
           constrained schema (instructor's TOOLS mode)
=========  =====================================================  ============================

The constrained schema is the verdict model's schema with the pack's closed sets as enums:
intent keys, red-flag types, the score range as ``minimum``/``maximum`` (already in every
mode), and — only here — the requirement IDs the judge may list for the row: the pack's
observable requirements plus the row's case-level ones. Requirements marked
``observableInData: false`` are left out: the prompt tells the judge never to list them.

A server that answers a schema form with an error (HTTP 400, 422, 500 or 501; llama.cpp's
server answers OpenAI's ``json_schema`` with 500) is asked once more with the next form; the
judge does that on its first call and records the form used in the task.

Default mode per provider (:func:`default_output_mode`): ``schema`` for ``hosted_vllm/``
(vLLM always enforces a schema), ``json`` for everything else — the form every
OpenAI-compatible server accepts, and the one the shipped cassettes were recorded with.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, get_args

OutputMode = Literal["json", "schema", "tools"]
OUTPUT_MODE_NAMES: tuple[str, ...] = get_args(OutputMode)
#: provider prefix -> its default output mode (every other provider: ``json``)
PROVIDER_DEFAULT_MODES: dict[str, OutputMode] = {"hosted_vllm": "schema"}
#: the ``response_format`` forms of ``schema`` mode, in the order they are tried
SCHEMA_FORMS: tuple[str, ...] = ("json_schema", "json_object+schema")
#: HTTP statuses with which a server refuses a request form (not a transient fault there)
FORM_REJECTED_STATUS = frozenset({400, 422, 500, 501})


def default_output_mode(model: str) -> OutputMode:
    """The output mode used when ``--output-mode`` is not given, from the model's prefix."""
    return PROVIDER_DEFAULT_MODES.get(model.split("/", 1)[0], "json")


def constrained_schema(base: dict[str, Any], requirement_ids: list[str]) -> dict[str, Any]:
    """``base`` (the verdict model's JSON Schema) with ``requirement_ids`` as the enum of
    ``unmetRequirementIds`` and ``partialRequirementIds`` items; ``base`` is not changed.

    An empty ``requirement_ids`` makes both lists empty arrays (``maxItems: 0``): an
    enum must have at least one value.
    """
    schema = copy.deepcopy(base)
    props = schema.get("properties", {})
    for name in ("unmetRequirementIds", "partialRequirementIds"):
        if name not in props:
            continue
        if requirement_ids:
            props[name]["items"] = {"type": "string", "enum": list(requirement_ids)}
        else:
            props[name]["maxItems"] = 0
    return schema


def response_format(form: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` of one :data:`SCHEMA_FORMS` form.

    Raises:
        ValueError: an unknown form (names the valid ones).
    """
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if form == "json_object+schema":
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"schema form {form!r} is not known; use one of {', '.join(SCHEMA_FORMS)}")
