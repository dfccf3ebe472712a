"""The one module that imports instructor: how a verdict request and a re-ask are worded.

instructor (docs/protocol.md §4: the allowed values are enforced) supplies, through its public
API only:

- ``instructor.response_schema`` and the handlers of its mode registry
  (``instructor.v2.mode_registry.get_handlers(instructor.v2.Provider.OPENAI, mode)``, the
  registry API instructor documents): the request preparation of its JSON mode (the verdict's
  JSON Schema appended to the system message, ``response_format: json_object``, message
  conversion) — byte for byte the requests the cassettes were recorded with, so their keys do
  not change — and the wording of a re-ask (the judge's reply, then "Correct your JSON ONLY
  RESPONSE, based on the following errors: …" with our reason).
- Nothing else. Parsing and validating the reply is :func:`rubric_engine.verdict.parse.parse_reply`
  (instructor's parser would call back into the model and cannot tell an ambiguous reply from
  a clear one); the bounded re-ask loop is the judge's; transport retries are the backend's.

instructor (and the openai SDK under it, ~1 CPU-s of imports) is imported only when a request
needs it (a replay imports neither). The engine's own requests — a system message
and a user message, both text — are prepared by :meth:`InstructorAdapter.prepare_pair`, which
words them as instructor's handlers do (``tests/test_instructor_wording.py`` compares both,
byte for byte, in every output mode); any other message list, and every re-ask, goes through
instructor itself.

Output modes (:mod:`rubric_engine.judge.output_modes`): ``json`` is instructor's JSON mode
unchanged; ``schema`` and ``tools`` are prepared by instructor's ``JSON_SCHEMA`` / ``TOOLS``
handlers, and then :meth:`InstructorAdapter.constrain` puts the row's constrained schema (with
requirement-ID enums) in place of instructor's and picks the ``response_format`` form.
``parse_reply`` reads a verdict from content and from a tool call alike.

Re-ask text is instructor's wording around our reason, which is plain words (the validation
problems with the valid choices; no pydantic help URL: we pass our own reason, never a
``ValidationError``'s text); :meth:`InstructorAdapter.reask` drops any URL a reason might
still carry.
"""

from __future__ import annotations

import json
import logging
import re
from functools import cached_property
from textwrap import dedent
from typing import Any

from rubric_engine.formats.jsonl import lone_surrogate_at
from rubric_engine.judge.output_modes import OutputMode, constrained_schema, response_format
from rubric_engine.verdict.model import VerdictBase

#: our output mode name -> instructor.Mode member name
OUTPUT_MODES: dict[str, str] = {"json": "JSON", "schema": "JSON_SCHEMA", "tools": "TOOLS"}
_URL = re.compile(r"\s*\(?(?:For further information visit )?https?://\S+\)?")


def json_mode_instructions(schema: dict[str, Any]) -> str:
    """What instructor's JSON mode appends to the system message (after a blank line) for a
    verdict model's JSON Schema: its wording, in its layout (``textwrap.dedent`` of the same
    f-string as ``OpenAIJSONHandler.prepare_request``, instructor 1.17)."""
    return dedent(
        f"""
            As a genius expert, your task is to understand the content and provide
            the parsed objects in json that match the following json_schema:\n

            {json.dumps(schema, indent=2, ensure_ascii=False)}

            Make sure to return an instance of the JSON, not the schema itself
            """
    )


class InstructorAdapter:
    """Prepares verdict requests and re-asks for one verdict model in one output mode.

    Args:
        verdict_model: the rubric's :func:`~rubric_engine.verdict.model.verdict_model`.
        mode: one of :data:`OUTPUT_MODES`.

    Raises:
        ValueError: an unknown ``mode`` (names the valid ones).
    """

    def __init__(self, verdict_model: type[VerdictBase], mode: OutputMode = "json") -> None:
        if mode not in OUTPUT_MODES:
            raise ValueError(f"output mode {mode!r} is not supported; use one of {OUTPUT_MODES}")
        self.verdict_model = verdict_model
        self.mode = mode
        # instructor's wrapper (response_schema) of a verdict model has the model's own schema
        self._base_schema = verdict_model.model_json_schema()
        self._instructions = json_mode_instructions(self._base_schema) if mode == "json" else ""

    @cached_property
    def response_model(self) -> type[VerdictBase]:
        """instructor's wrapper of the verdict model (the model whose schema the judge is
        shown); imports instructor."""
        import instructor

        # instructor logs at ERROR what it considers failures; a failed row is a value here
        logging.getLogger("instructor").setLevel(logging.CRITICAL)
        return instructor.response_schema(self.verdict_model)

    @cached_property
    def _handlers(self) -> Any:
        import instructor
        import instructor.v2

        return instructor.v2.mode_registry.get_handlers(
            instructor.v2.Provider.OPENAI, getattr(instructor.Mode, OUTPUT_MODES[self.mode])
        )

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request instructor's ``create`` would send for ``kwargs`` (messages, model,
        sampling parameters): schema instructions added, messages converted. ``kwargs`` is
        not changed. A system and a user message of text are prepared by
        :meth:`prepare_pair`; anything else by instructor."""
        pair = self.prepare_pair(kwargs)
        if pair is not None:
            return pair
        return self.instructor_prepare(kwargs)

    def instructor_prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """:meth:`prepare` by instructor's own handlers, whatever the messages (imports
        instructor)."""
        _, prepared = self._handlers.request_handler(
            response_model=self.response_model,
            kwargs={**kwargs, "messages": [dict(m) for m in kwargs["messages"]]},
        )
        prepared.pop("autodetect_images", None)
        if self._handlers.message_converter is not None:
            prepared["messages"] = self._handlers.message_converter(
                prepared["messages"], autodetect_images=False
            )
        return {**prepared, "messages": list(prepared["messages"])}

    def prepare_pair(self, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`prepare` without instructor, for the engine's own requests: exactly a
        ``system`` and a ``user`` message, each ``{role, content}`` with non-empty text, and no
        ``strict`` parameter. ``None`` for any other request (instructor then prepares it).

        The result is what instructor's handler gives, key order included: ``json`` appends
        :func:`json_mode_instructions` to the system text and adds ``response_format:
        json_object``; ``schema`` adds instructor's ``json_schema`` ``response_format``
        (replaced by :meth:`constrain`); ``tools`` adds one function tool named by the
        schema's title with instructor's default description (its parameters are replaced by
        :meth:`constrain`) and forces it with ``tool_choice``.
        """
        messages = kwargs.get("messages")
        if (
            not isinstance(messages, list | tuple)
            or len(messages) != 2
            or "strict" in kwargs
            or self.verdict_model.__doc__
        ):
            return None
        system, user = messages
        for message, role in ((system, "system"), (user, "user")):
            if not (
                isinstance(message, dict)
                and list(message) == ["role", "content"]
                and message["role"] == role
                and isinstance(message["content"], str)
                and message["content"]  # instructor turns empty content into a list
            ):
                return None
        prepared = dict(kwargs)
        name = str(self._base_schema.get("title") or self.verdict_model.__name__)
        if self.mode == "json":
            prepared["response_format"] = {"type": "json_object"}
            content = f"{system['content']}\n\n{self._instructions}"
            system = {"role": "system", "content": content}
        elif self.mode == "schema":
            prepared["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": self.verdict_model.__name__, "schema": self._base_schema},
            }
        else:
            parameters = {
                k: v for k, v in self._base_schema.items() if k not in ("title", "description")
            }
            parameters["required"] = sorted(self._base_schema.get("required", []))
            description = self._base_schema.get("description") or (
                f"Correctly extracted `{self.verdict_model.__name__}` with all "
                "the required parameters with correct types"
            )
            function = {"name": name, "description": description, "parameters": parameters}
            prepared["tools"] = [{"type": "function", "function": function}]
            prepared["tool_choice"] = {"type": "function", "function": {"name": name}}
        prepared["messages"] = [
            {"role": "system", "content": system["content"]},
            {"role": "user", "content": user["content"]},
        ]
        return prepared

    def constrain(
        self, prepared: dict[str, Any], requirement_ids: list[str], form: str | None
    ) -> dict[str, Any]:
        """``prepared`` with the constrained schema for ``requirement_ids`` (``schema`` mode:
        as ``response_format`` in ``form``; ``tools`` mode: as the tool's parameters).
        ``json`` mode returns ``prepared`` itself: its requests stay instructor's, byte for
        byte."""
        if self.mode == "json":
            return prepared
        schema = constrained_schema(self._base_schema, requirement_ids)
        name = str(self._base_schema.get("title") or "JudgeVerdict")
        if self.mode == "schema":
            return {
                **prepared,
                "response_format": response_format(form or "json_schema", name, schema),
            }
        tools = [dict(t) for t in prepared["tools"]]
        tools[0] = {**tools[0], "function": {**tools[0]["function"], "parameters": schema}}
        return {**prepared, "tools": tools}

    def reask(
        self, kwargs: dict[str, Any], response: dict[str, Any], reason: str
    ) -> dict[str, Any]:
        """``kwargs`` followed by the judge's reply and a request to correct it for ``reason``
        (instructor's re-ask handler of the mode; imports instructor and the openai SDK).

        Args:
            kwargs: the request that got ``response``; not changed.
            response: the raw wire response (as stored).
            reason: :attr:`~rubric_engine.verdict.parse.ParseFailure.reason`.
        """
        from openai.types.chat import ChatCompletion

        return dict(
            self._handlers.reask_handler(
                kwargs={**kwargs, "messages": list(kwargs["messages"])},
                response=ChatCompletion.model_validate(_whole_characters(response)),
                exception=ValueError(_URL.sub("", reason)),
            )
        )


#: half of a UTF-16 pair, alone (what a ``\\ud800`` escape decodes to)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole_characters(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` with each lone surrogate replaced by U+FFFD, the replacement character,
    for the re-ask that shows the judge its reply: a request must be UTF-8, which cannot
    hold one (the reply itself is stored as it came; its verdict is refused as not text,
    :func:`rubric_engine.verdict.reply_scan.scan_reply`)."""
    text = json.dumps(response, ensure_ascii=False)
    if lone_surrogate_at(text) is None:
        return response
    return dict(json.loads(_LONE_SURROGATE.sub("\ufffd", text)))
