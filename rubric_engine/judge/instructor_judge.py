"""The judge: prepare → ask → parse → re-ask, around a backend call (docs/protocol.md §5).

Each row's request is prepared by instructor's JSON mode (through
:class:`~rubric_engine.judge.instructor_adapter.InstructorAdapter`: the verdict's JSON Schema in
the system message); each answer is read by :func:`~rubric_engine.verdict.parse.parse_reply`;
an answer that gives no valid verdict is re-asked with its reason (which lists the valid
choices, or says where the JSON broke, or that the reply was ambiguous), up to ``max_reasks``
times. Transport retries happen below, in the backend, under the one
:class:`~rubric_engine.judge.retry.RetryPolicy`. When re-asks run out, or transport fails for
good, the row becomes a ``JUDGE_ERROR`` value; nothing is raised.

A task's system message (rubric + schema) is the same for every row, so it is prepared once
per task (on a probe row) and reused; ``tests/test_judge_equivalence.py`` checks that the
requests are the ones instructor's own ``create`` sends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.judge.backends import Answer, Backend, CallKey
from rubric_engine.judge.cassettes.cassette import static_key_parts
from rubric_engine.judge.instructor_adapter import InstructorAdapter
from rubric_engine.judge.output_modes import FORM_REJECTED_STATUS, SCHEMA_FORMS, OutputMode
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.judge.server_checks import (
    DeliveryCheck,
    context_message,
    looping_unit,
    reply_text,
    system_as_user,
)
from rubric_engine.results.model import JudgeError, JudgeErrorKind, ProtocolWarning, WarningCode
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.verdict.model import VerdictBase, verdict_model
from rubric_engine.verdict.parse import ParsedVerdict, ParseFailureKind, RowContext, parse_reply

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 1024}
_PROBE = "\0rubric-eval probe row\0"

#: A truncated answer is asked again with ``max_tokens`` multiplied by this, up to the cap.
TRUNCATION_GROWTH = 2
MAX_TOKENS_CAP = 16384


@dataclass(slots=True)
class _Row:
    """What one row's calls have come to so far (the judge's own, never a backend's)."""

    request: JudgeRequest
    key: CallKey
    attempts: list[Attempt] = field(default_factory=list)
    reasks: list[str] = field(default_factory=list)
    warnings: list[ProtocolWarning] = field(default_factory=list)
    #: the first request as sent when the schema form changed on it (``schema`` mode)
    first: dict[str, Any] | None = None

    @property
    def answers(self) -> int:
        return sum(a.response is not None for a in self.attempts)


class InstructorJudge:
    """Judges rows with one rubric through instructor's JSON mode and a :class:`Backend`.

    Args:
        backend: where responses come from (live, record, replay).
        rubric: the task's snapshot; fixes the verdict model.
        model: litellm model name, e.g. ``openai/gpt-4o-mini``.
        params: sampling parameters (temperature, max_tokens …); part of the cassette key.
        max_reasks: re-asks after the first answer when it fails validation (bounded,
            docs/protocol.md §5).
        evidence: the prompt asks for evidence turns (``judge_v3``,
            :attr:`~rubric_engine.judge.prompt.PromptTemplate.asks_evidence`): the verdict model has
            the ``evidence`` field. Off, the model and its schema are the older prompts' own.
        output_mode: see :mod:`rubric_engine.judge.output_modes`; ``json`` sends exactly the
            requests the cassettes were recorded with.
        system_as_user: send the system message inside the first user message.
        delivery: compares reported prompt tokens with an estimate (live and record only).
        max_context: the model's context in tokens, when known (``--max-context``).
        settled_form: ``schema`` mode's form as a task recorded it (``outputForm``): a resumed
            run uses it without probing the server again.
    """

    def __init__(
        self,
        backend: Backend,
        rubric: EvalRubric,
        model: str,
        params: dict[str, Any] | None = None,
        max_reasks: int = 2,
        evidence: bool = False,
        output_mode: OutputMode = "json",
        system_as_user: bool = False,
        delivery: DeliveryCheck | None = None,
        max_context: int | None = None,
        settled_form: dict[str, Any] | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self.max_reasks = max_reasks
        self.rubric_model: type[VerdictBase] = verdict_model(rubric, evidence)
        self.adapter = InstructorAdapter(self.rubric_model, output_mode)
        self.output_mode = output_mode
        self.system_as_user = system_as_user
        self.delivery = delivery
        self.max_context = max_context
        #: the request forms still to try (``schema`` mode: both; else one, ``None``)
        self._forms: list[str | None] = list(SCHEMA_FORMS) if output_mode == "schema" else [None]
        self._settled = output_mode != "schema"
        self._settle_lock = asyncio.Lock()
        #: what the task records of the output mode: the form used, and forms refused
        self.form_record: dict[str, Any] = {"mode": output_mode, "form": self._forms[0]}
        if settled_form and settled_form.get("form") in self._forms and output_mode == "schema":
            # a resumed task: the form an earlier run found by probing, without probing again
            self._forms = self._forms[self._forms.index(settled_form["form"]) :]
            self._settled = True
            self.form_record = dict(settled_form)
        #: system text -> the prepared kwargs of a probe row and their static key parts
        self._prepared: dict[str, tuple[dict[str, Any], dict[str, str]] | None] = {}

    @property
    def verdict_model(self) -> type[VerdictBase]:
        """The model whose JSON Schema the judge is shown (instructor's wrapper; imports
        instructor)."""
        return self.adapter.response_model

    def instructor_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request exactly as instructor's ``create`` (JSON mode) hands it to the backend,
        prepared by instructor itself (imports it)."""
        return self.adapter.instructor_prepare(
            {"messages": messages, "model": self.model, **self.params}
        )

    def prepared_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """:meth:`instructor_kwargs`, without importing instructor for the engine's own
        system + user requests (:meth:`InstructorAdapter.prepare`)."""
        return self.adapter.prepare({"messages": messages, "model": self.model, **self.params})

    def request_kwargs(self, request: JudgeRequest) -> dict[str, Any]:
        """The row's first request: :meth:`instructor_request` constrained by the output mode
        (the row's requirement-ID enum, the current schema form) and, with
        ``system_as_user``, the system message folded into the user message."""
        return self._first_request(request)[0]

    def _first_request(self, request: JudgeRequest) -> tuple[dict[str, Any], dict[str, str] | None]:
        """:meth:`request_kwargs`, and its
        :func:`~rubric_engine.judge.cassettes.cassette.static_key_parts`
        when they are known: those of the task's prepared template, when the request is that
        template with the row's messages (``json`` mode leaves the rest as it is;
        ``system_as_user`` changes only the messages). ``None`` otherwise."""
        prepared, static = self._prepared_request(request)
        kwargs = prepared  # ``json`` mode: its requests are instructor's, byte for byte
        if self.adapter.mode != "json":
            kwargs = self.adapter.constrain(
                prepared,
                [*self.rubric_model.listable_requirement_ids(), *request.case_requirement_ids],
                self._forms[0],
            )
        if kwargs is not prepared:  # the schema was constrained for this row
            static = None
        if self.system_as_user:
            kwargs = {**kwargs, "messages": system_as_user(kwargs["messages"])}
        return kwargs, static

    def instructor_request(self, request: JudgeRequest) -> dict[str, Any]:
        """:meth:`prepared_kwargs` of the row's messages, with the system part prepared once.

        A task's system message is the same for every row, so it is prepared once, on a probe
        user message; each row then gets a copy with its own user message. If the probe shows
        that the preparation touched the user message, every row takes the full path.
        """
        return self._prepared_request(request)[0]

    def _prepared_request(
        self, request: JudgeRequest
    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """:meth:`instructor_request`, and the static key parts of its template (worked out
        once per template), or ``None`` when it took the full path."""
        messages = request.messages
        if (
            len(messages) != 2
            or messages[0].get("role") != "system"
            or messages[1].get("role") != "user"
        ):
            return self.prepared_kwargs([dict(m) for m in messages]), None
        system = messages[0]["content"]
        if system not in self._prepared:
            probe = self.prepared_kwargs([dict(messages[0]), {"role": "user", "content": _PROBE}])
            plain = probe["messages"][1:] == [{"role": "user", "content": _PROBE}]
            self._prepared[system] = (probe, static_key_parts(probe)) if plain else None
        found = self._prepared[system]
        if found is None:
            return self.prepared_kwargs([dict(m) for m in messages]), None
        template, static = found
        return {**template, "messages": [dict(template["messages"][0]), dict(messages[1])]}, static

    async def judge(self, request: JudgeRequest) -> JudgeOutcome:
        """Judge one row. Never raises for a per-row failure; see module docstring.

        A reply cut off at ``max_tokens`` starts the row again (fresh messages, fresh re-ask
        count) with ``max_tokens`` times :data:`TRUNCATION_GROWTH`, at most ``max_reasks``
        times and up to :data:`MAX_TOKENS_CAP`; then the row is ``TRUNCATED``, and the error
        names every budget tried.

        In ``schema`` mode the first row is judged alone: when the server refuses the schema
        form (:data:`~rubric_engine.judge.output_modes.FORM_REJECTED_STATUS`, or replay has
        no entry for it) the row is asked once with the next form, which every later row
        uses; :attr:`form_record` says which form was used and why one was dropped.
        """
        if not self._settled:
            async with self._settle_lock:
                if not self._settled:
                    try:
                        return await self._judge(request)
                    finally:
                        self._settled = True
        return await self._judge(request)

    async def _judge(self, request: JudgeRequest) -> JudgeOutcome:
        kwargs, static = self._first_request(request)
        row = _Row(request, CallKey.of(kwargs, request, static))
        room = int(self.params.get("max_tokens") or DEFAULT_PARAMS["max_tokens"])
        tried: list[int] = []
        parsed: ParsedVerdict | JudgeError | None = None
        asked = row.first or kwargs  # the request a truncated answer is asked again
        reasks_left = self.max_reasks
        cut_reasks = 0  # re-asks whose answer was cut off
        for truncations in range(self.max_reasks + 1):
            tried.append(room)
            parsed, asked, reasks_left = await self._round(
                row, asked, room if truncations else None, reasks_left
            )
            if parsed is not None:
                break
            cut_at = room
            room = min(MAX_TOKENS_CAP, room * TRUNCATION_GROWTH)
            cut_reasks += asked is not (row.first or kwargs)
            if truncations == self.max_reasks or cut_at >= MAX_TOKENS_CAP or cut_reasks == 2:
                budgets = ", ".join(map(str, tried))
                which = "a re-ask" if cut_reasks == 2 else "the judge's output"
                parsed = JudgeError(
                    kind=JudgeErrorKind.TRUNCATED,
                    attempts=row.answers,
                    message=f"{which} was cut off at max_tokens={budgets} "
                    f"({len(tried)} time(s)); raise --max-tokens",
                )
                break
            # the request that was cut off goes again alone, with more room: a truncated
            # re-ask is not preceded by the first request again
            row.reasks.append(f"output cut off at max_tokens={cut_at}; asked again with {room}")
        assert parsed is not None
        if isinstance(parsed, ParsedVerdict):
            outcome = JudgeOutcome(
                verdict=parsed.verdict,
                error=None,
                attempts=row.attempts,
                reasks=row.reasks,
                cassette_key=row.key.key,
                parse_warnings=[*row.warnings, *parsed.cleanups],
            )
        else:
            # the last parse error is the final failure, not a re-ask
            final = parsed.kind == JudgeErrorKind.INVALID_OUTPUT
            outcome = JudgeOutcome(
                verdict=None,
                error=parsed,
                attempts=row.attempts,
                reasks=row.reasks[:-1] if final else row.reasks,
                cassette_key=row.key.key,
                parse_warnings=list(row.warnings),
            )
        self.backend.finish(request, row.key, outcome)
        return outcome

    async def _round(
        self, row: _Row, kwargs: dict[str, Any], room: int | None, reasks_left: int
    ) -> tuple[ParsedVerdict | JudgeError | None, dict[str, Any], int]:
        """Ask ``kwargs``, parse, re-ask on an unusable answer while re-asks are left.

        Returns:
            The verdict, the error that ended the row, or ``None`` for a truncated answer
            (:meth:`judge` decides whether to ask again with more room, ``room``); the request
            last asked (without its ``max_tokens``: the one a truncated answer goes again);
            the re-asks left.
        """
        context = RowContext(
            row.request.row_id, row.request.case_requirement_ids, row.request.turn_count
        )
        while True:
            sent = kwargs if room is None else {**kwargs, "max_tokens": room}
            if not self._settled and not row.attempts:
                answer, kwargs = await self._settle(row, sent)
            else:
                answer = await self.backend.complete(sent, row.request, row.key, row.answers)
            row.attempts.extend(answer.attempts)
            if answer.failure is not None or answer.response is None:
                return self._failed(row, answer, sent), kwargs, reasks_left
            if self.delivery is not None:
                self.delivery.check(
                    row.request.row_id, sent["messages"], row.attempts[-1].prompt_tokens
                )
            parsed = parse_reply(answer.response, self.rubric_model, context)
            if isinstance(parsed, ParsedVerdict):
                return parsed, kwargs, reasks_left
            if parsed.kind is ParseFailureKind.TRUNCATED:
                unit = looping_unit(reply_text(answer.response))
                if unit is not None:
                    looped = JudgeError(
                        kind=JudgeErrorKind.LOOPING,
                        attempts=row.answers,
                        message=f"the judge's reply repeated {unit[:40]!r} until "
                        f"max_tokens={sent.get('max_tokens')}: a loop, not asked again with a "
                        "larger budget. Use --output-mode schema (the server then enforces "
                        "the verdict's shape) or a larger model",
                    )
                    return looped, kwargs, reasks_left
                return None, kwargs, reasks_left
            if parsed.kind is ParseFailureKind.REFUSED:
                refused = JudgeError(
                    kind=JudgeErrorKind.REFUSED, attempts=row.answers, message=parsed.reason
                )
                return refused, kwargs, reasks_left
            row.reasks.append(parsed.reason)
            if parsed.kind.ambiguous:
                row.warnings.append(
                    ProtocolWarning(code=WarningCode.AMBIGUOUS_REPLY, detail=parsed.reason[:500])
                )
            if reasks_left == 0:
                invalid = JudgeError(
                    kind=JudgeErrorKind.INVALID_OUTPUT,
                    attempts=row.answers,
                    message=f"no valid verdict after {row.answers} answer(s): {parsed.reason}",
                )
                return invalid, kwargs, reasks_left
            reasks_left -= 1
            kwargs = self.adapter.reask(kwargs, answer.response, parsed.reason)

    async def _settle(self, row: _Row, sent: dict[str, Any]) -> tuple[Answer, dict[str, Any]]:
        """The first call of ``schema`` mode: each form in turn until one is not refused.

        Returns the answer and the request it answered (the row's key follows the form). In
        replay a form "refused" is one with no cassette entry; when the next form has none
        either, the row is simply missing, so the first form stays (and its miss is reported).
        """
        first_sent, first_key = sent, row.key
        first: Answer | None = None
        while True:
            last = len(self._forms) == 1
            final = frozenset() if last else FORM_REJECTED_STATUS
            answer = await self.backend.complete(sent, row.request, row.key, 0, final)
            missed = (
                answer.failure is not None and answer.failure[0] is JudgeErrorKind.CASSETTE_MISS
            )
            if (
                missed
                and first is not None
                and first.failure is not None
                and (
                    first.failure[0] is JudgeErrorKind.CASSETTE_MISS  # no entry in any form
                )
            ):
                self._forms = list(SCHEMA_FORMS)
                self.form_record = {"mode": self.output_mode, "form": self._forms[0]}
                row.key, row.first = first_key, None
                return first, first_sent
            refused = answer.failure is not None and (
                answer.status in FORM_REJECTED_STATUS or missed
            )
            if last or not refused:
                return answer, sent
            assert answer.failure is not None
            first = first or answer
            dropped = self._forms.pop(0)
            self.form_record = {
                "mode": self.output_mode,
                "form": self._forms[0],
                "refused": {"form": dropped, "error": answer.failure[1][:300]},
            }
            row.attempts.extend(answer.attempts)
            sent = {**sent, **self.request_kwargs(row.request)}
            row.key, row.first = CallKey.of(sent, row.request), sent

    def _failed(self, row: _Row, answer: Answer, sent: dict[str, Any]) -> JudgeError:
        """A row's non-parse failure: a cassette miss, a prompt over the context, or
        transport for good."""
        kind, message = answer.failure or (JudgeErrorKind.TRANSPORT, "no response")
        if kind is JudgeErrorKind.CASSETTE_MISS:
            return JudgeError(
                kind=kind, message=message, attempts=row.answers, cassette_key=row.key.key
            )
        if kind is JudgeErrorKind.CONTEXT_EXCEEDED:
            tokens = self.delivery.estimate(sent["messages"]) if self.delivery else None
            message = context_message(message, tokens, self.max_context)
        return JudgeError(kind=kind, attempts=len(row.attempts), message=message)
