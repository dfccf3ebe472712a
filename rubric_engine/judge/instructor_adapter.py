"""The one module that imports instructor: how a verdict request and a re-ask are worded.

instructor (SPEC §4, "enforced through instructor") supplies, through its public API only:

- ``instructor.response_schema`` and the handlers of its mode registry
  (``instructor.v2.mode_registry.get_handlers(instructor.v2.Provider.OPENAI, mode)``, the
  registry API instructor documents): the request preparation of its JSON mode (the verdict's
  JSON Schema appended to the system message, ``response_format: json_object``, message
  conversion) — byte for byte the requests the cassettes were recorded with, so their keys do
  not change — and the wording of a re-ask (the judge's reply, then "Correct your JSON ONLY
  RESPONSE, based on the following errors: …" with our reason).
- Nothing else. Parsing and validating the reply is :func:`rubric_engine.judge.parse.parse_reply`
  (instructor's parser would call back into the model and cannot tell an ambiguous reply from
  a clear one); the bounded re-ask loop is the judge's; transport retries are the backend's.

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

import logging
import re
from typing import Any

from rubric_engine.judge.output_modes import OutputMode, constrained_schema, response_format
from rubric_engine.verdict import VerdictBase

#: our output mode name -> instructor.Mode member name
OUTPUT_MODES: dict[str, str] = {"json": "JSON", "schema": "JSON_SCHEMA", "tools": "TOOLS"}
_URL = re.compile(r"\s*\(?(?:For further information visit )?https?://\S+\)?")


class InstructorAdapter:
    """Prepares verdict requests and re-asks for one verdict model in one output mode.

    Args:
        verdict_model: the rubric's :func:`~rubric_engine.verdict.verdict_model`.
        mode: one of :data:`OUTPUT_MODES`.

    Raises:
        ValueError: an unknown ``mode`` (names the valid ones).
    """

    def __init__(self, verdict_model: type[VerdictBase], mode: OutputMode = "json") -> None:
        import instructor
        import instructor.v2

        if mode not in OUTPUT_MODES:
            raise ValueError(f"output mode {mode!r} is not supported; use one of {OUTPUT_MODES}")
        # instructor logs at ERROR what it considers failures; a failed row is a value here
        logging.getLogger("instructor").setLevel(logging.CRITICAL)
        #: the model whose schema the judge is shown (instructor's wrapper of the verdict model)
        self.response_model = instructor.response_schema(verdict_model)
        self.mode = mode
        self._base_schema = self.response_model.model_json_schema()
        self._handlers = instructor.v2.mode_registry.get_handlers(
            instructor.v2.Provider.OPENAI, getattr(instructor.Mode, OUTPUT_MODES[mode])
        )

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request instructor's ``create`` would send for ``kwargs`` (messages, model,
        sampling parameters): schema instructions added, messages converted. ``kwargs`` is
        not changed."""
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
        """``kwargs`` followed by the judge's reply and a request to correct it for ``reason``.

        Args:
            kwargs: the request that got ``response``; not changed.
            response: the raw wire response (as stored).
            reason: :attr:`~rubric_engine.judge.parse.ParseFailure.reason`.
        """
        from openai.types.chat import ChatCompletion

        return dict(
            self._handlers.reask_handler(
                kwargs={**kwargs, "messages": list(kwargs["messages"])},
                response=ChatCompletion.model_validate(response),
                exception=ValueError(_URL.sub("", reason)),
            )
        )
