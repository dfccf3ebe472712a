"""The judge: prepare → ask → parse → re-ask, around a backend call (SPEC §4).

Each row's request is prepared by instructor's JSON mode (through
:class:`~rubric_engine.judge.instructor_adapter.InstructorAdapter`: the verdict's JSON Schema in
the system message); each answer is read by :func:`~rubric_engine.judge.parse.parse_reply`;
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

from dataclasses import dataclass, field
from typing import Any

from rubric_engine.judge.backends import Answer, Backend, CallKey
from rubric_engine.judge.instructor_adapter import InstructorAdapter
from rubric_engine.judge.parse import ParsedVerdict, ParseFailureKind, RowContext, parse_reply
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.results import JudgeError, JudgeErrorKind, ProtocolWarning, WarningCode
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.verdict import VerdictBase, verdict_model

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 1024}
_PROBE = "\0rubric-eval probe row\0"

#: A truncated answer is asked again with ``max_tokens`` multiplied by this, up to the cap.
TRUNCATION_GROWTH = 2
MAX_TOKENS_CAP = 16384


@dataclass
class _Row:
    """What one row's calls have come to so far (the judge's own, never a backend's)."""

    request: JudgeRequest
    key: CallKey
    attempts: list[Attempt] = field(default_factory=list)
    reasks: list[str] = field(default_factory=list)
    warnings: list[ProtocolWarning] = field(default_factory=list)

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
        max_reasks: re-asks after the first answer when it fails validation (SPEC §4: bounded).
        evidence: the prompt asks for evidence turns (``judge_v3``,
            :attr:`~rubric_engine.prompt.PromptTemplate.asks_evidence`): the verdict model has
            the ``evidence`` field. Off, the model and its schema are the older prompts' own.
    """

    def __init__(
        self,
        backend: Backend,
        rubric: EvalRubric,
        model: str,
        params: dict[str, Any] | None = None,
        max_reasks: int = 2,
        evidence: bool = False,
    ) -> None:
        self.backend = backend
        self.model = model
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self.max_reasks = max_reasks
        self.rubric_model: type[VerdictBase] = verdict_model(rubric, evidence)
        self.adapter = InstructorAdapter(self.rubric_model)
        #: the model whose JSON Schema the judge is shown (instructor's wrapper)
        self.verdict_model = self.adapter.response_model
        self._prepared: dict[str, dict[str, Any] | None] = {}  # system text -> prepared kwargs

    def instructor_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request exactly as instructor's ``create`` (JSON mode) hands it to the backend."""
        return self.adapter.prepare({"messages": messages, "model": self.model, **self.params})

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
        times and up to :data:`MAX_TOKENS_CAP`; then the row is ``TRUNCATED``, and the error
        names every budget tried.
        """
        kwargs = self.request_kwargs(request)
        row = _Row(request, CallKey.of(kwargs, request))
        room = int(self.params.get("max_tokens") or DEFAULT_PARAMS["max_tokens"])
        tried: list[int] = []
        parsed: ParsedVerdict | JudgeError | None = None
        for truncations in range(self.max_reasks + 1):
            tried.append(room)
            parsed = await self._round(row, kwargs, room if truncations else None)
            if parsed is not None:
                break
            cut_at = room
            room = min(MAX_TOKENS_CAP, room * TRUNCATION_GROWTH)
            if truncations == self.max_reasks or cut_at >= MAX_TOKENS_CAP:
                budgets = ", ".join(map(str, tried))
                parsed = JudgeError(
                    kind=JudgeErrorKind.TRUNCATED,
                    attempts=row.answers,
                    message=f"the judge's output was cut off at max_tokens={budgets} "
                    f"({len(tried)} time(s)); raise --max-tokens",
                )
                break
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
        self, row: _Row, kwargs: dict[str, Any], room: int | None
    ) -> ParsedVerdict | JudgeError | None:
        """Ask, parse, re-ask on an unusable answer, up to ``max_reasks`` times.

        Returns:
            The verdict; the error that ended the row; or ``None`` for a truncated answer
            (:meth:`judge` decides whether to ask again with more room, ``room``).
        """
        context = RowContext(
            row.request.row_id, row.request.case_requirement_ids, row.request.turn_count
        )
        for attempt in range(self.max_reasks + 1):
            sent = kwargs if room is None else {**kwargs, "max_tokens": room}
            answer: Answer = await self.backend.complete(sent, row.request, row.key, row.answers)
            row.attempts.extend(answer.attempts)
            if answer.failure is not None or answer.response is None:
                return self._failed(row, answer)
            parsed = parse_reply(answer.response, self.rubric_model, context)
            if isinstance(parsed, ParsedVerdict):
                return parsed
            if parsed.kind is ParseFailureKind.TRUNCATED:
                return None
            if parsed.kind is ParseFailureKind.REFUSED:
                return JudgeError(
                    kind=JudgeErrorKind.REFUSED, attempts=row.answers, message=parsed.reason
                )
            row.reasks.append(parsed.reason)
            if parsed.kind.ambiguous:
                row.warnings.append(
                    ProtocolWarning(code=WarningCode.AMBIGUOUS_REPLY, detail=parsed.reason[:500])
                )
            if attempt == self.max_reasks:
                return JudgeError(
                    kind=JudgeErrorKind.INVALID_OUTPUT,
                    attempts=row.answers,
                    message=f"no valid verdict after {row.answers} answer(s): {parsed.reason}",
                )
            kwargs = self.adapter.reask(kwargs, answer.response, parsed.reason)
        raise AssertionError("unreachable: the last attempt returns")

    @staticmethod
    def _failed(row: _Row, answer: Answer) -> JudgeError:
        """A row's non-parse failure: a cassette miss, or transport for good."""
        kind, message = answer.failure or (JudgeErrorKind.TRANSPORT, "no response")
        if kind is JudgeErrorKind.CASSETTE_MISS:
            return JudgeError(
                kind=kind, message=message, attempts=row.answers, cassette_key=row.key.key
            )
        return JudgeError(kind=kind, attempts=len(row.attempts), message=message)
