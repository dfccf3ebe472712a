"""Where a judge call's answer comes from: the provider (live, record) or a cassette (replay).

A backend answers one chat-completion request at a time and returns an :class:`Answer`
value: every attempt it made on the wire (failed ones included) and the raw response, or why
there is none. It keeps no per-row state; the judge passes what a backend needs to know (the
row's canonical key, how many responses the row has had) and collects the answers. Replay
returns exactly the raw response a live call returned when it was recorded, so replay and live
differ only in where bytes come from, and both go through the same
:func:`~rubric_engine.verdict.parse.parse_reply`.

litellm is imported only by the live backends, and only when first used. OpenAI-protocol
providers are called directly (:mod:`rubric_engine.judge.transport`, one aiohttp session per
run) with the requests litellm would send; every other call goes through litellm.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from rubric_engine.errors import ConfigurationError
from rubric_engine.judge.cache_markers import PrefixWarmup, mark_static_prefix, needs_markers
from rubric_engine.judge.cassettes.cassette import (
    CassetteChanged,
    CassetteEntry,
    CassetteWriter,
    key_parts,
    request_key,
    response_problem,
    sanitize_response,
)
from rubric_engine.judge.cassettes.index import CassetteIndex
from rubric_engine.judge.endpoints import endpoint_kind, is_context_exceeded, sends_provider_key
from rubric_engine.judge.limiter import AdaptiveLimit
from rubric_engine.judge.protocol import (
    Attempt,
    BudgetSpent,
    CallBudget,
    JudgeOutcome,
    JudgeRequest,
)
from rubric_engine.judge.retry import RetryPolicy, status_of
from rubric_engine.judge.secrets import credential_values, redact, scrub
from rubric_engine.judge.transport import (
    DIRECT_PARAMS,
    APIConnectionError,
    BadRequestError,
    DirectTransport,
    Route,
    plain_messages,
    refused_message,
    request_body,
    route_for,
    split_base,
    transport_choice,
)
from rubric_engine.judge.usage import usage_of
from rubric_engine.results.model import JudgeErrorKind


@dataclass(slots=True)
class CallKey:
    """The canonical cassette key of a row's *first* request, and its named parts.

    Re-asks and larger-budget rounds of the row reuse it (docs/judges.md).
    """

    key: str
    parts: dict[str, str]

    @classmethod
    def of(
        cls, kwargs: dict[str, Any], request: JudgeRequest, static: dict[str, str] | None = None
    ) -> CallKey:
        """The key of ``kwargs``; ``static``: its
        :func:`~rubric_engine.judge.cassettes.cassette.static_key_parts`
        when the caller knows them (see
        :func:`~rubric_engine.judge.cassettes.cassette.key_parts`)."""
        parts = key_parts(kwargs, request.rubric_hash, request.prompt_hash, static)
        if request.sample > 1:  # sample 1 keeps a single ask's key (docs/stability.md)
            parts["sample"] = str(request.sample)
        return cls(request_key(parts), parts)


@dataclass(slots=True)
class Answer:
    """What one request to a backend came to.

    Attributes:
        attempts: every try on the wire, in order; transport failures first, the answered
            one (with ``response``) last. Empty for a cassette miss.
        failure: ``(kind, message)`` when there is no response: ``CASSETTE_MISS``,
            ``TRANSPORT`` (the retry policy gave up) or ``CONTEXT_EXCEEDED`` (the server said
            the prompt is over the model's context; never retried).
        status: the HTTP status of the last failed try, when a server sent one.
    """

    attempts: tuple[Attempt, ...] = ()
    failure: tuple[JudgeErrorKind, str] | None = None
    status: int | None = None
    #: the request keys the last try carried (live: after dropped parameters were left out)
    sent: frozenset[str] = frozenset()

    @property
    def response(self) -> dict[str, Any] | None:
        """The raw wire response (sanitized), or ``None`` when there is a failure."""
        return None if self.failure or not self.attempts else self.attempts[-1].response


def chat_completion(raw: dict[str, Any]) -> Any:
    """A wire-format dict as the object a live OpenAI-compatible call returns."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(raw)


@dataclass(slots=True)
class Tally:
    """What the answered calls of one run used, cut-off rows' calls included (a row stores its
    attempts only when it ends; the task records the difference, docs/judge-replies.md)."""

    answered: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, attempt: Attempt) -> None:
        """Count one answered attempt (its ``response`` is the raw wire response)."""
        self.answered += 1
        self.prompt_tokens += attempt.prompt_tokens
        self.completion_tokens += attempt.completion_tokens
        self.cost_usd += attempt.cost_usd or 0.0
        usage = (attempt.response or {}).get("usage") or {}
        details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
        reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(reasoning, int) and not isinstance(reasoning, bool) and reasoning > 0:
            self.reasoning_tokens += reasoning


class Backend(Protocol):
    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        """Answer ``kwargs``; ``served`` = responses the row already had (its re-asks);
        ``final_status``: HTTP statuses not retried for this request (a request form the
        server may refuse, see :mod:`rubric_engine.judge.output_modes`)."""
        ...

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        """Called once per row with its outcome (record mode writes the cassette entry)."""
        ...


class ReplayBackend:
    """Answers from cassettes; never touches the network (docs/judges.md)."""

    def __init__(self, index: CassetteIndex, model_flag: str = "--model") -> None:
        self.index = index
        #: the flag a miss's advice names the judge's model with (``--judge`` for a panel)
        self.model_flag = model_flag
        #: the answers replayed, as the recorded run's usage
        self.tally = Tally()
        #: the run's ``--max-calls`` / ``--max-cost``: asked before each answer is given
        self.budget: CallBudget | None = None

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        """The recorded response; its latency is the recorded one (``latencyMs`` of the
        entry's attempt), so a latency gate means the same in replay as live. An entry
        without one (authored) has latency 0."""
        try:
            found = self.index.replayed(key.key)
        except CassetteChanged as exc:  # this row's error, as a miss is; the batch goes on
            return Answer(failure=(JudgeErrorKind.CASSETTE_MISS, str(exc)))
        if found is None:
            return Answer(
                failure=(
                    JudgeErrorKind.CASSETTE_MISS,
                    f"cassette miss for row {request.row_id!r}, key {key.key}: "
                    f"{self.index.explain_miss(request.row_id, key.parts, self.model_flag)}",
                )
            )
        attempts, where = found
        if served >= len(attempts):
            return Answer(
                failure=(
                    JudgeErrorKind.CASSETTE_MISS,
                    f"cassette {where} holds {len(attempts)} "
                    f"response(s) for row {request.row_id!r} but the judge asked "
                    f"for response {served + 1} (a re-ask)",
                )
            )
        raw = attempts[served]["response"]
        problem = response_problem(raw)
        if problem is not None:  # this row's error; the batch goes on
            return Answer(
                failure=(
                    JudgeErrorKind.CASSETTE_MISS,
                    f"cassette {where}: response {served + 1} for row "
                    f"{request.row_id!r} cannot be replayed: {problem}; record the row again "
                    "with --mode record",
                )
            )
        if self.budget is not None:
            if not self.budget.take_call():
                raise BudgetSpent(f"no room in the budget for row {request.row_id!r}'s call")
            self.budget.settle_call(None)  # a replayed answer costs nothing
        recorded = attempts[served].get("latencyMs")
        usage = usage_of(raw)
        attempt = Attempt(
            response=raw,
            latency_ms=float(recorded) if isinstance(recorded, (int, float)) else 0.0,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
        )
        self.tally.add(attempt)
        return Answer(attempts=(attempt,))

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        return None


@dataclass
class LiveSettings:
    """Transport settings of a live call; none of them enter cassettes or the store.

    Attributes:
        api_base: e.g. ``http://127.0.0.1:8000/v1`` for an OpenAI-compatible server.
        api_key_env: the environment variable that holds the key; ``None`` lets litellm read
            the provider's usual one.
        timeout_s: per-request timeout in seconds.
    """

    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: provider-specific transport options (``api_version``, ``extra_headers`` …) from
    #: ``--judge-param``; passed to litellm, never stored or keyed
    extra: dict[str, Any] = field(default_factory=dict)
    #: mark the static rubric prefix cacheable for providers that need explicit markers
    #: (:mod:`rubric_engine.judge.cache_markers`; ``--no-prompt-cache`` turns it off)
    prompt_cache: bool = True
    #: ``direct`` (OpenAI-protocol providers without litellm, see
    #: :mod:`rubric_engine.judge.transport`) or ``litellm`` (every call through litellm);
    #: ``None``: ``$RUBRIC_EVAL_TRANSPORT``, else ``direct``
    transport: str | None = None

    def transport_kwargs(self, model: str = "") -> dict[str, Any]:
        """litellm's transport arguments for a call to ``model``.

        The key (never stored) goes to an ``--api-base`` only when the user names it
        (``--api-key-env``) or the provider needs one (:func:`sends_provider_key`): an
        ``OPENAI_API_KEY`` set for OpenAI is not sent to a self-hosted ``openai/`` server.
        Such a server gets the placeholder ``no-key`` (the OpenAI client needs some value).
        """
        out: dict[str, Any] = {
            **self.extra,
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if self.api_base:
            out["api_base"] = self.api_base
            if key is None and not sends_provider_key(model, self.api_base, self.api_key_env):
                key = NO_KEY  # OpenAI-compatible local servers need none
            base, query, basic = split_base(self.api_base)
            if basic is not None:  # user:password@ is HTTP Basic; litellm would send it as is
                out["api_base"] = f"{base}?{query}" if query else base
                out["extra_headers"] = {**(out.get("extra_headers") or {}), "Authorization": basic}
        if key is not None:
            out["api_key"] = key
        return out


#: the key sent to a self-hosted server that needs none (the OpenAI client needs some value)
NO_KEY = "no-key"


def import_litellm() -> Any:
    """Import litellm on first need, with its offline price map (no download at import).

    The first import also freezes the garbage collector's view of every object alive then
    (:func:`gc.freeze`): litellm's import leaves ~350,000 objects that live as long as the
    process, and each full collection walked them all (about 0.3 CPU-s on the shared 2-core
    machine, several times per 1,000 live calls). Frozen objects are never freed (the few
    cycles of import-time garbage among them included; collecting them first would cost the
    0.3 s once more).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    first = "litellm" not in sys.modules
    import litellm

    litellm.suppress_debug_info = True
    if first:
        gc.freeze()
    return litellm


class LiveBackend:
    """Calls the provider, retrying transport errors by :class:`RetryPolicy`.

    OpenAI-protocol providers are sent the request directly (:mod:`~rubric_engine.judge.
    transport`), anything else through litellm; both take the same retry, limiter, redaction
    and recording path here. Each attempt holds a slot of ``limiter`` (adaptive concurrency)
    only while it is on the wire; a 429 shrinks the limit, a success grows it back.
    """

    def __init__(self, settings: LiveSettings, limiter: AdaptiveLimit | None = None) -> None:
        self.settings = settings
        self.limiter = limiter or AdaptiveLimit(64)
        self._litellm: Any = None
        self._unpriced: set[str] = set()
        #: sampling parameters the provider rejected, with its message; never sent again
        self.dropped: dict[str, str] = {}
        #: requests put on the wire, every attempt (those of rows cut off midway included)
        self.sent = 0
        #: what the answered calls used (those of rows cut off midway included)
        self.tally = Tally()
        #: the run's ``--max-calls`` / ``--max-cost``: asked before each call goes out (a
        #: re-ask and a transport retry too); a call it refuses raises :class:`BudgetSpent`
        self.budget: CallBudget | None = None
        self._warmup = PrefixWarmup()
        try:
            choice = transport_choice(settings.transport)
        except ValueError as exc:  # e.g. a resumed live task with a bad $RUBRIC_EVAL_TRANSPORT
            raise ConfigurationError(str(exc)) from None
        self._direct = DirectTransport(self.limiter.maximum) if choice == "direct" else None
        #: per model: litellm's transport arguments, the secrets an error may echo, the route
        self._calls: dict[str, tuple[dict[str, Any], tuple[str, ...], Route | None]] = {}

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        """One request; a parameter the provider rejects is learned and the request is sent
        again without it (:func:`rejected_param`), for this and every later row. With cache
        markers, the first request of a prefix goes alone (:class:`PrefixWarmup`)."""
        if self.settings.prompt_cache and needs_markers(str(kwargs.get("model") or "")):
            kwargs = mark_static_prefix(kwargs)  # on the wire only: the key is the judge's
        async with self._warmup.turn(kwargs):
            answer = await self._send(kwargs, final_status)
        # a rejection names a parameter this request carried; another row in flight may have
        # learned it first (then it is dropped already): either way the request goes again
        while (learned := rejected_param(answer, answer.sent)) is not None:
            name, message = learned
            self.dropped.setdefault(name, message)
            again = await self._send(kwargs, final_status)
            answer = Answer(
                answer.attempts + again.attempts, again.failure, again.status, again.sent
            )
        return answer

    def _call_settings(self, model: str) -> tuple[dict[str, Any], tuple[str, ...], Route | None]:
        """What every call to ``model`` shares, worked out on its first call."""
        known = self._calls.get(model)
        if known is None:
            transport = self.settings.transport_kwargs(model)
            # what a provider's error or reply may echo: the key it was sent, the run's other
            # credentials (docs/security.md)
            key = transport.get("api_key")
            secrets = tuple(credential_values(None if key == NO_KEY else key))
            route = None
            if self._direct is not None:
                route = route_for(
                    model, self.settings.api_base, transport.get("api_key"), self.settings.extra
                )
            known = self._calls[model] = (transport, secrets, route)
        return known

    def _direct_body(self, route: Route | None, kwargs: dict[str, Any]) -> bytes | None:
        """The direct request's body, or ``None`` when this request goes through litellm."""
        if route is None or self._direct is None:
            return None
        params = {k: v for k, v in kwargs.items() if k != "model" and k != "messages"}
        if not params.keys() <= DIRECT_PARAMS or not plain_messages(kwargs["messages"]):
            return None
        order = self._direct.shapes.order(route, params)
        return None if order is None else request_body(route, kwargs, order)

    @property
    def litellm(self) -> Any:
        """litellm, imported on the first call that needs it (a call it sends, a price the
        model table cannot give): a direct call to an OpenAI-protocol judge needs none."""
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    async def _send(self, kwargs: dict[str, Any], final_status: frozenset[int]) -> Answer:
        if self.dropped:
            kwargs = {k: v for k, v in kwargs.items() if k not in self.dropped}
        sent = frozenset(kwargs)
        model = str(kwargs.get("model") or "")
        transport, secrets, route = self._call_settings(model)
        body = self._direct_body(route, kwargs)
        tries: list[Attempt] = []
        last: list[BaseException] = []
        budget = self.budget

        def tried(made: Attempt) -> None:
            tries.append(made)
            if budget is not None:
                budget.settle_call(made.cost_usd)

        try:
            async for attempt in self.settings.retry.retrying(final_status):
                with attempt:
                    started = time.perf_counter()
                    async with self.limiter.slot() as ticket:
                        if budget is not None and not budget.take_call():
                            raise BudgetSpent("no room in the budget for another call")
                        try:
                            self.sent += 1
                            if body is not None:
                                assert self._direct is not None and route is not None
                                dumped = await self._direct.post(
                                    route, body, self.settings.timeout_s
                                )
                                response = None
                            else:
                                response = await self._litellm_call(kwargs, transport, route)
                        except Exception as exc:  # every transport failure is logged, then judged
                            last[:] = [exc]
                            if status_of(exc) == 429:
                                self.limiter.on_rate_limited(ticket)
                            # the hint is for this client: no row's attempt starts before it
                            self.limiter.hold_off(self.settings.retry.hint_s(exc))
                            tried(
                                Attempt(
                                    response=None,
                                    error=redact(describe_error(exc), *secrets),
                                    latency_ms=(time.perf_counter() - started) * 1e3,
                                    status=status_of(exc),
                                )
                            )
                            raise
                    await self.limiter.on_success()
                    latency = (time.perf_counter() - started) * 1e3
                    if response is not None:
                        dumped = response.model_dump(mode="json")
                    problem = response_problem(dumped)
                    if problem is not None:  # refused here, so it is never recorded
                        problem = redact(problem, *secrets)
                        tried(Attempt(response=None, error=problem, latency_ms=latency))
                        return Answer(
                            tuple(tries),
                            (
                                JudgeErrorKind.TRANSPORT,
                                f"the provider's response cannot be read: {problem}",
                            ),
                            sent=sent,
                        )
                    # a reply may quote the key it was sent: never recorded or stored
                    raw = scrub(sanitize_response(dumped), secrets)
                    usage = usage_of(raw)
                    tried(
                        Attempt(
                            response=raw,
                            latency_ms=latency,
                            prompt_tokens=usage.prompt_tokens,
                            completion_tokens=usage.completion_tokens,
                            cost_usd=self._cost(response)
                            if response is not None
                            else self._price(model, raw),
                            cache_read_tokens=usage.cache_read_tokens,
                            cache_creation_tokens=usage.cache_creation_tokens,
                        )
                    )
                    self.tally.add(tries[-1])
                    return Answer(attempts=tuple(tries), sent=sent)
        except BudgetSpent:
            raise  # not a failure of the row: it stays unjudged
        except Exception as exc:  # the retry policy gave up: a TRANSPORT value for the row
            failed = [a.error for a in tries if a.error]
            detail = (
                failed[-1]
                if failed
                else redact((str(exc).splitlines() or [type(exc).__name__])[0], *secrets)
            )
            status = status_of(last[0]) if last else None
            if last and is_context_exceeded(last[0]):
                return Answer(tuple(tries), (JudgeErrorKind.CONTEXT_EXCEEDED, detail), status, sent)
            return Answer(
                tuple(tries),
                (JudgeErrorKind.TRANSPORT, f"provider call failed: {detail}"),
                status,
                sent,
            )
        raise AssertionError("unreachable: tenacity re-raises the last error")

    async def _litellm_call(
        self, kwargs: dict[str, Any], transport: dict[str, Any], route: Route | None
    ) -> Any:
        """``litellm.acompletion``; a refused connection is raised as one, naming the URL."""
        if urlsplit(str(transport.get("api_base") or "")).query:
            raise BadRequestError(
                "this request goes through litellm (its parameters or messages differ from "
                "what the direct transport sends), which cannot send --api-base's query "
                "string: it appends /chat/completions after it. Send the query's secret as "
                "--api-key-env or a header (--judge-param extra_headers)"
            )
        try:
            return await self.litellm.acompletion(**kwargs, **transport)
        except Exception as exc:
            if not connection_refused(exc):
                raise
            url = route.url.split("?", 1)[0] if route else transport.get("api_base")
            raise APIConnectionError(
                refused_message(str(url or "the provider's endpoint"))
            ) from exc

    def _cost(self, response: Any) -> float | None:
        """The call's cost in USD as litellm priced it, or ``None`` for an unpriced model.

        litellm prices every response as it returns it (``_hidden_params.response_cost``);
        pricing it again cost more CPU than the rest of the call for a model litellm does not
        know (it searches every pricing rule before giving up), so that is done only when
        litellm left no price, and once per model that turns out to have none.
        """
        hidden = getattr(response, "_hidden_params", None) or {}
        if hidden.get("response_cost") is not None:
            return float(hidden["response_cost"])
        model = str(getattr(response, "model", ""))
        if model in self._unpriced:
            return None
        try:
            return float(self.litellm.completion_cost(completion_response=response))
        except Exception:  # litellm raises many kinds for a model without a known price
            self._unpriced.add(model)
            return None

    def _price(self, model: str, raw: dict[str, Any]) -> float | None:
        """A direct call's cost in USD from litellm's price map, as litellm prices the same
        response (``response_cost``), or ``None`` for a model it has no price for (tried once
        per model).

        Plain token counts are priced at the model's per-token rates, read from litellm's
        table without importing litellm (:func:`~rubric_engine.judge.model_table.
        linear_rates`); a model the table does not know has no price. A usage with token
        breakdowns (cached prompt tokens, reasoning tokens), a model priced by tiers, or an
        Azure deployment (priced by the model the server names) go through
        ``completion_cost`` on the response, which prices them as litellm's own call does.
        """
        from rubric_engine.judge.model_table import linear_rates, model_entry

        if model in self._unpriced:
            return None
        usage = raw.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        plain = not model.startswith("azure/") and not any(
            isinstance(d, dict) and any(d.values())
            for k, d in usage.items()
            if k.endswith("_details")
        )
        if plain and model_entry(model) is None:
            self._unpriced.add(model)  # litellm has no entry to price it by either
            return None
        rates = linear_rates(model) if plain else None
        if rates is not None:
            return float(prompt * rates[0] + completion * rates[1])
        try:
            return float(self.litellm.completion_cost(completion_response=raw, model=model))
        except Exception:  # litellm raises many kinds for a model without a known price
            self._unpriced.add(model)
            return None

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        return None


class RecordBackend(LiveBackend):
    """Live calls whose responses are appended to a cassette as ``recorded``."""

    def __init__(
        self,
        settings: LiveSettings,
        writer: CassetteWriter,
        provider: str,
        limiter: AdaptiveLimit | None = None,
    ) -> None:
        super().__init__(settings, limiter)
        self.writer = writer
        self.provider = provider

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        answered = [a for a in outcome.attempts if a.response is not None]
        if not answered:
            return  # transport failed throughout: nothing worth replaying
        if outcome.error is not None and outcome.error.kind == "TRANSPORT":
            return
        assert answered[-1].response is not None
        model = str(answered[-1].response.get("model") or key.parts["model"])
        self.writer.write(
            CassetteEntry(
                key=key.key,
                row_id=request.row_id,
                key_parts=key.parts,
                provenance={
                    "kind": "recorded",
                    "provider": _provider(key.parts["model"], self.provider),
                    "model": model,  # as the server reported it
                    "requestedModel": key.parts["model"],
                    "endpoint": endpoint_kind(key.parts["model"], self.settings.api_base),
                    "recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                },
                attempts=[
                    {"response": a.response, "latencyMs": round(a.latency_ms, 1)} for a in answered
                ],
            )
        )


def _provider(model: str, default: str) -> str:
    """The provider a recorded call went to: its model's prefix (a panel's judges may each
    have another, docs/panels.md), else the run's."""
    return model.split("/")[0] if "/" in model else default


#: sampling parameters a judge run can do without when a model refuses them (reasoning
#: models refuse ``temperature`` and ``top_p``; some servers refuse ``seed``)
DROPPABLE_PARAMS = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
_REJECTION_WORDS = ("unsupported", "not support", "unrecognized", "unknown", "not allowed",
                    "only the default", "invalid", "not permitted")  # fmt: skip


def rejected_param(answer: Answer, sent: Collection[str]) -> tuple[str, str] | None:
    """The parameter a failed answer says the model rejects, with the provider's message.

    The rule (documented in docs/judge-replies.md): the last attempt failed with HTTP 400 or
    422, its message names one of :data:`DROPPABLE_PARAMS` that the request carried (``sent``),
    together with a word of rejection ("unsupported", "not supported", "only the default" …).
    Anything else (a bad request for another reason) is left as the row's error.
    """
    if answer.failure is None or not answer.attempts:
        return None
    last = answer.attempts[-1]
    if last.status not in (400, 422) or not last.error:
        return None
    text = last.error.lower()
    if not any(word in text for word in _REJECTION_WORDS):
        return None
    for name in DROPPABLE_PARAMS:
        if name in sent and name in text:
            return name, last.error[:300]
    return None


def describe_error(exc: BaseException) -> str:
    """One line: the error type, the HTTP status a server sent (not a client-side stand-in
    for a refused connection or a timeout), and the first line of the message.

    A refused connection reaches here as the transport's ``APIConnectionError``, whose
    message names the URL (:meth:`LiveBackend._send` turns litellm's into one).
    """
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if name in _CLIENT_SIDE:
        status = None
    text = str(exc).splitlines()[0] if str(exc) else ""
    return name + (f" (HTTP {status})" if status else "") + (f": {text[:300]}" if text else "")


_CLIENT_SIDE = {"APIConnectionError", "Timeout", "APITimeoutError"}


def connection_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a refused TCP connection; litellm
    reports one as an ``InternalServerError`` with HTTP 500, which no server sent."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if (
            isinstance(current, ConnectionRefusedError)
            or "connection refused" in str(current).lower()
            or "connect call failed" in str(current).lower()
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
