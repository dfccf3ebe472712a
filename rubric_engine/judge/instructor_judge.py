"""The judge: instructor's patch → re-ask → parse loop around a backend call (SPEC §4).

instructor (JSON mode) adds the verdict's JSON Schema to the system message, parses the reply
with the rubric's verdict model, and on a validation error re-asks with the error text (which
lists the valid choices) up to ``max_reasks`` times. Transport retries happen below it, in the
backend, under the one :class:`~rubric_engine.judge.retry.RetryPolicy`. When re-asks run out,
or transport fails for good, the row becomes a ``JUDGE_ERROR`` value; nothing is raised.
"""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any

from pydantic import ValidationError

from rubric_engine.errors import format_loc
from rubric_engine.judge.backends import Backend, CallContext, CassetteMiss
from rubric_engine.judge.protocol import JudgeOutcome, JudgeRequest
from rubric_engine.judge.secrets import redact
from rubric_engine.results import JudgeError, JudgeErrorKind
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.verdict import ROW_CONTEXT, verdict_model

_CALL: contextvars.ContextVar[CallContext] = contextvars.ContextVar("rubric_eval_call")

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 1024}


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
    for tool_call in reversed(message.tool_calls):
        arguments = getattr(getattr(tool_call, "function", None), "arguments", None)
        if isinstance(arguments, str) and arguments.strip():
            message.content = arguments
            return


#: A truncated answer is asked again with ``max_tokens`` multiplied by this, up to the cap.
TRUNCATION_GROWTH = 2
MAX_TOKENS_CAP = 16384


class InstructorJudge:
    """Judges rows with one rubric through instructor and a :class:`Backend`.

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

        # instructor logs every failed attempt at ERROR; a failed row is a value here
        logging.getLogger("instructor").setLevel(logging.CRITICAL)
        self.backend = backend
        self.model = model
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self.max_reasks = max_reasks
        # wrapped once: instructor would otherwise build a new wrapper class on every call
        self.verdict_model = instructor.response_schema(verdict_model(rubric))
        self._client: Any = instructor.from_litellm(self._complete, mode=instructor.Mode.JSON)
        self._client.on("parse:error", self._on_parse_error)

    async def _complete(self, *args: Any, **kwargs: Any) -> Any:
        call = _CALL.get()
        if call.max_tokens is not None:
            kwargs["max_tokens"] = call.max_tokens  # a re-ask after truncation gets more room
        response = await self.backend.complete(kwargs, call)
        _raise_if_refused(response)
        _verdict_from_tool_call(response)
        return response

    @staticmethod
    def _on_parse_error(error: Exception, *args: Any, **kwargs: Any) -> None:
        _CALL.get().reasks.append(_first_line(error))

    async def judge(self, request: JudgeRequest) -> JudgeOutcome:
        """Judge one row. Never raises for a per-row failure; see module docstring."""
        from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException

        call = CallContext(request=request)
        token = _CALL.set(call)
        row = ROW_CONTEXT.set(
            {"row_id": request.row_id, "case_requirement_ids": list(request.case_requirement_ids)}
        )
        error: JudgeError | None = None
        verdict = None
        room = int(self.params.get("max_tokens") or DEFAULT_PARAMS["max_tokens"])
        try:
            for truncations in range(self.max_reasks + 1):
                try:
                    verdict = await self._client.create(
                        response_model=self.verdict_model,
                        messages=[dict(m) for m in request.messages],
                        model=self.model,
                        max_retries=self.max_reasks,
                        **self.params,
                    )
                    break
                except IncompleteOutputException:
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
                    call.reasks.append(
                        f"output cut off at max_tokens={cut_at}; asked again with {room}"
                    )
                    call.max_tokens = room
        except InstructorRetryException as exc:
            error = self._classify(exc, call)
        finally:
            ROW_CONTEXT.reset(row)
            _CALL.reset(token)
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

    def _classify(self, exc: Exception, call: CallContext) -> JudgeError:
        cause = exc.__cause__ or exc
        attempts = len(call.responses)
        if isinstance(cause, CassetteMiss):
            return JudgeError(
                kind=JudgeErrorKind.CASSETTE_MISS,
                message=str(cause),
                attempts=attempts,
                cassette_key=cause.key,
            )
        if (
            isinstance(cause, ValidationError | json.JSONDecodeError)
            or type(cause).__name__ == "ResponseParsingError"
        ):
            return JudgeError(
                kind=JudgeErrorKind.INVALID_OUTPUT,
                attempts=attempts,
                message=f"no valid verdict after {attempts} answer(s): {_first_line(cause)}",
            )
        if isinstance(cause, JudgeRefusal):
            return JudgeError(
                kind=JudgeErrorKind.REFUSED, attempts=attempts, message=_first_line(cause)
            )
        failed = [a.error for a in call.attempts if a.error]
        detail = failed[-1] if failed else redact(_first_line(cause))
        return JudgeError(
            kind=JudgeErrorKind.TRANSPORT,
            attempts=len(call.attempts),
            message=f"provider call failed: {detail}",
        )
