"""The judge: instructor's prepare → parse → re-ask cycle around a backend call (SPEC §4).

instructor's JSON-mode handler adds the verdict's JSON Schema to the system message, parses the
reply with the rubric's verdict model, and on a validation error builds the re-ask (the reply
plus the error text, which lists the valid choices); up to ``max_reasks`` re-asks. Transport
retries happen below, in the backend, under the one
:class:`~rubric_engine.judge.retry.RetryPolicy`. When re-asks run out, or transport fails for
good, the row becomes a ``JUDGE_ERROR`` value; nothing is raised.

The three steps are instructor's own handler functions; only the bounded loop around them is
here, for speed: instructor's ``create`` re-derives everything per call (it walks the response
model for async validators five times, dumps the schema into the system text, copies the model),
which cost more than the rest of a replayed row together. Here the system message with the
schema is prepared once per task (by the same handler, on a probe row) and reused for every row;
``tests/test_judge_equivalence.py`` checks that the requests, re-asks, verdicts and errors are
the ones instructor's ``create`` produces.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from rubric_engine.errors import format_loc
from rubric_engine.judge.backends import Backend, CallContext, CassetteMiss
from rubric_engine.judge.protocol import JudgeOutcome, JudgeRequest
from rubric_engine.judge.secrets import redact
from rubric_engine.judge_reply import reply_text
from rubric_engine.results import JudgeError, JudgeErrorKind
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.verdict import verdict_model

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 1024}
_PROBE = "\0rubric-eval probe row\0"


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{format_loc(e['loc']) or 'verdict'}: {e['msg']}" for e in exc.errors())
    if isinstance(exc, json.JSONDecodeError):
        return f"reply is not a JSON object ({exc.msg})"
    return (str(exc).splitlines() or [type(exc).__name__])[0]


class JudgeRefusal(Exception):
    """The provider refused or filtered the answer; re-asking the same request will not help."""


def _raise_if_refused(response: Any) -> None:
    choice = (getattr(response, "choices", None) or [None])[0]
    if choice is None:
        return
    refusal = getattr(choice.message, "refusal", None)
    if refusal:
        raise JudgeRefusal(f"the judge refused: {str(refusal)[:300]}")
    if choice.finish_reason == "content_filter":
        raise JudgeRefusal(
            "the provider's content filter stopped the answer (finish_reason content_filter)"
        )


def _verdict_from_tool_call(response: Any) -> None:
    """A judge that answers with a tool call and empty content: its arguments are the reply.

    The stored raw response is untouched; only the object instructor parses is filled in.
    """
    choice = (getattr(response, "choices", None) or [None])[0]
    message = getattr(choice, "message", None)
    if message is None or (message.content or "").strip() or not message.tool_calls:
        return
    text = reply_text(message.model_dump())  # the same rule renormalize applies to stored replies
    if text:
        message.content = text


#: A truncated answer is asked again with ``max_tokens`` multiplied by this, up to the cap.
TRUNCATION_GROWTH = 2
MAX_TOKENS_CAP = 16384


class InstructorJudge:
    """Judges rows with one rubric through instructor's JSON mode and a :class:`Backend`.

    Args:
        backend: where responses come from (live, record, replay).
        rubric: the task's snapshot; fixes the verdict model.
        model: litellm model name, e.g. ``openai/gpt-4o-mini``.
        params: sampling parameters (temperature, max_tokens …); part of the cassette key.
        max_reasks: re-asks after the first answer when it fails validation (SPEC §4: bounded).
    """

    def __init__(
        self,
        backend: Backend,
        rubric: EvalRubric,
        model: str,
        params: dict[str, Any] | None = None,
        max_reasks: int = 2,
    ) -> None:
        import instructor
        from instructor.v2.core.providers import Provider
        from instructor.v2.core.registry import mode_registry
        from instructor.v2.core.retry import _RETRYABLE_PARSE_ERRORS

        # instructor logs failed parses at ERROR; a failed row is a value here
        logging.getLogger("instructor").setLevel(logging.CRITICAL)
        self.backend = backend
        self.model = model
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self.max_reasks = max_reasks
        # wrapped once: instructor would otherwise build a new wrapper class on every call
        self.verdict_model = instructor.response_schema(verdict_model(rubric))
        # what instructor.from_litellm(..., mode=JSON) uses for an OpenAI-compatible reply
        self._handlers = mode_registry.get_handlers(Provider.OPENAI, instructor.Mode.JSON)
        self._parse_errors: tuple[type[Exception], ...] = _RETRYABLE_PARSE_ERRORS
        self._prepared: dict[str, dict[str, Any] | None] = {}  # system text -> prepared kwargs

    def instructor_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request exactly as instructor's ``create`` (JSON mode) hands it to the backend:
        the handler's request preparation, message conversion and retry isolation."""
        from instructor.v2.core.messages import isolate_retry_kwargs

        kwargs = {"messages": messages, "model": self.model, **self.params}
        _, prepared = self._handlers.request_handler(
            response_model=self.verdict_model, kwargs=kwargs
        )
        prepared.pop("autodetect_images", None)
        if self._handlers.message_converter is not None:
            prepared["messages"] = self._handlers.message_converter(
                prepared["messages"], autodetect_images=False
            )
        return isolate_retry_kwargs(prepared)

    def request_kwargs(self, request: JudgeRequest) -> dict[str, Any]:
        """:meth:`instructor_kwargs` of the row's messages, with the system part prepared once.

        A task's system message is the same for every row, so instructor prepares it once, on
        a probe user message; each row then gets a copy with its own user message. If the probe
        shows that instructor touched the user message, every row takes the full path.
        """
        messages = [dict(m) for m in request.messages]
        if len(messages) != 2 or [m.get("role") for m in messages] != ["system", "user"]:
            return self.instructor_kwargs(messages)
        system = messages[0]["content"]
        if system not in self._prepared:
            probe = self.instructor_kwargs([dict(messages[0]), {"role": "user", "content": _PROBE}])
            plain = probe["messages"][1:] == [{"role": "user", "content": _PROBE}]
            self._prepared[system] = probe if plain else None
        template = self._prepared[system]
        if template is None:
            return self.instructor_kwargs(messages)
        return {**template, "messages": [dict(template["messages"][0]), messages[1]]}

    async def judge(self, request: JudgeRequest) -> JudgeOutcome:
        """Judge one row. Never raises for a per-row failure; see module docstring.

        A reply cut off at ``max_tokens`` starts the row again (fresh messages, fresh re-ask
        count) with ``max_tokens`` times :data:`TRUNCATION_GROWTH`, at most ``max_reasks``
        times and up to :data:`MAX_TOKENS_CAP`; then the row is ``TRUNCATED``.
        """
        call = CallContext(request=request)
        error: JudgeError | None = None
        verdict = None
        room = int(self.params.get("max_tokens") or DEFAULT_PARAMS["max_tokens"])
        for truncations in range(self.max_reasks + 1):
            verdict, error = await self._ask(request, call)
            if error is None or error.kind != JudgeErrorKind.TRUNCATED:
                break
            cut_at = room
            room = min(MAX_TOKENS_CAP, room * TRUNCATION_GROWTH)
            if truncations == self.max_reasks or cut_at >= MAX_TOKENS_CAP:
                error = JudgeError(
                    kind=JudgeErrorKind.TRUNCATED,
                    attempts=len(call.responses),
                    message=f"the judge's output was cut off at max_tokens={cut_at} "
                    f"{truncations + 1} time(s); raise --max-tokens",
                )
                break
            call.reasks.append(f"output cut off at max_tokens={cut_at}; asked again with {room}")
            call.max_tokens = room
        # the last parse error is the final failure, not a re-ask
        reasks = (
            call.reasks[:-1]
            if error is not None and error.kind == "INVALID_OUTPUT"
            else call.reasks
        )
        outcome = JudgeOutcome(
            verdict=verdict,
            error=error,
            attempts=call.attempts,
            reasks=reasks,
            cassette_key=call.key,
        )
        self.backend.finish(call, outcome)
        return outcome

    async def _ask(self, request: JudgeRequest, call: CallContext) -> tuple[Any, JudgeError | None]:
        """One round of what instructor's ``create`` does: ask, parse, re-ask on invalid output.

        Returns the verdict, or the error that ended the round (a ``TRUNCATED`` one without a
        message: :meth:`judge` decides whether to ask again with more room).
        """
        from instructor.core.exceptions import IncompleteOutputException

        context = {
            "row_id": request.row_id,
            "case_requirement_ids": list(request.case_requirement_ids),
        }
        kwargs = self.request_kwargs(request)
        for attempt in range(self.max_reasks + 1):
            sent = kwargs
            if call.max_tokens is not None:  # a round after truncation gets more room
                sent = {**kwargs, "max_tokens": call.max_tokens}
            try:
                response = await self.backend.complete(sent, call)
                _raise_if_refused(response)
                _verdict_from_tool_call(response)
                verdict = self._handlers.response_parser(
                    response=response,
                    response_model=self.verdict_model,
                    validation_context=context,
                    strict=True,
                    stream=False,
                    is_async=True,
                )
                return verdict, None
            except IncompleteOutputException:
                return None, JudgeError(
                    kind=JudgeErrorKind.TRUNCATED, attempts=len(call.responses), message=""
                )
            except self._parse_errors as exc:
                call.reasks.append(_first_line(exc))
                if attempt == self.max_reasks:
                    return None, JudgeError(
                        kind=JudgeErrorKind.INVALID_OUTPUT,
                        attempts=len(call.responses),
                        message=f"no valid verdict after {len(call.responses)} answer(s): "
                        f"{_first_line(exc)}",
                    )
                kwargs = self._handlers.reask_handler(
                    kwargs=kwargs, response=response, exception=exc
                )
            except Exception as exc:  # transport, cassette miss, refusal: classified below
                return None, self._classify(exc, call)
        raise AssertionError("unreachable: the last attempt returns")

    def _classify(self, exc: Exception, call: CallContext) -> JudgeError:
        """A row's non-parse failure: a cassette miss, a refusal, or transport for good."""
        attempts = len(call.responses)
        if isinstance(exc, CassetteMiss):
            return JudgeError(
                kind=JudgeErrorKind.CASSETTE_MISS,
                message=str(exc),
                attempts=attempts,
                cassette_key=exc.key,
            )
        if isinstance(exc, JudgeRefusal):
            return JudgeError(
                kind=JudgeErrorKind.REFUSED, attempts=attempts, message=_first_line(exc)
            )
        failed = [a.error for a in call.attempts if a.error]
        detail = failed[-1] if failed else redact(_first_line(exc))
        return JudgeError(
            kind=JudgeErrorKind.TRANSPORT,
            attempts=len(call.attempts),
            message=f"provider call failed: {detail}",
        )
