"""The direct transport sends what litellm sends, and reads answers and errors as it does.

Each test sends the same judge request twice to the loopback stub, once through litellm
(``transport="litellm"``) and once directly, and compares what the stub received (URL with
its query, the body byte for byte, the headers that matter) and what the backend made of the
answer (the recorded response, token counts, price, the error kind and status).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.judge.backends import Answer, CallKey, LiveBackend, LiveSettings
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.prompt import load_prompt
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.judge.transport import (
    plain_messages,
    request_body,
    route_for,
    transport_choice,
)
from rubric_engine.rubric.loader import load_rubric
from rubric_engine.testing.openai_stub import StubReply, StubServer
from tests.conftest import CASES, RUBRICS

pytestmark = pytest.mark.live

#: the headers that decide the call (User-Agent and the SDK's telemetry headers may differ)
HEADERS = ("content-type", "api-key", "x-team")
ONE_TRY = RetryPolicy(max_attempts=1)


def judge_request(
    model: str, mode: str, params: dict[str, Any], reask: bool = False
) -> tuple[dict[str, Any], Any]:
    """The first request of a health row (Chinese: non-ASCII on the wire), or with ``reask``
    its re-ask after an answer without a verdict (in ``tools`` mode: a tool call answered)."""
    rubric = load_rubric(RUBRICS / "health_cs.yaml")
    source = DialogueSource(CASES / "health_consult_zh.jsonl")
    source.validate()
    prepared = RequestBuilder(rubric, load_prompt()).prepare(0, next(iter(source)))
    judge = InstructorJudge(None, rubric, model, output_mode=mode, params=params)  # type: ignore[arg-type]
    kwargs = judge.request_kwargs(prepared.request)
    if reask:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "JudgeVerdict", "arguments": '{"score": 9}'}}  # fmt: skip
        message = {"role": "assistant", "content": '{"score": 9}'}
        if mode == "tools":
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        response = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [choice]}  # fmt: skip
        kwargs = judge.adapter.reask(kwargs, response, "score: 9 is not one of 1, 2, 3, 4, 5")
    return kwargs, prepared.request


def send(
    transport: str,
    replies: list[StubReply],
    model: str,
    mode: str = "json",
    params: dict[str, Any] | None = None,
    azure: bool = False,
    extra: dict[str, Any] | None = None,
    retry: RetryPolicy = ONE_TRY,
    reask: bool = False,
) -> tuple[Answer, list[dict[str, Any]], LiveBackend]:
    """One judge request through ``transport``; the answer and the requests the stub saw."""
    kwargs, request = judge_request(model, mode, params or {}, reask)
    queue = list(replies)

    def respond(body: dict[str, Any]) -> StubReply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    with StubServer(respond) as server:
        base = server.base_url.removesuffix("/v1") if azure else server.base_url
        settings = LiveSettings(
            api_base=base, timeout_s=10, retry=retry, extra=extra or {}, transport=transport
        )
        backend = LiveBackend(settings)
        answer = asyncio.run(backend.complete(kwargs, request, CallKey.of(kwargs, request), 0))
    return answer, server.requests, backend


def wire(request: dict[str, Any]) -> dict[str, Any]:
    """What must be the same on the wire."""
    return {
        "path": request["path"],
        "raw": request["raw"],
        "auth": request["authSha256"],
        **{h: request["headers"].get(h) for h in HEADERS},
    }


OK = StubReply(content='{"score": 4}', usage={"prompt_tokens": 6000, "completion_tokens": 200})
CASES_ON_THE_WIRE = [
    ("openai/gpt-4o-mini", "json", {}, False, None),
    ("openai/gpt-4o-mini", "schema", {"seed": 7, "top_p": 0.5}, False, None),
    ("openai/gpt-4o-mini", "tools", {"seed": 7, "stop": ["\n\n"]}, False, None),
    ("openai/stub-judge", "json", {}, False, {"extra_headers": {"X-Team": "qa"}}),
    ("hosted_vllm/qwen", "schema", {"seed": 3}, False, None),
    ("hosted_vllm/qwen", "json", {}, False, None),
    ("azure/judge-deploy", "json", {"seed": 7}, True, {"api_version": "2024-10-21"}),
    ("azure/judge-deploy", "tools", {}, True, {"api_version": "2024-10-21"}),
    ("azure/judge-deploy", "schema", {}, True, {"api_version": "2024-10-21"}),
]


@pytest.mark.parametrize(("model", "mode", "params", "azure", "extra"), CASES_ON_THE_WIRE)
def test_the_direct_request_is_litellms_byte_for_byte(
    model: str,
    mode: str,
    params: dict[str, Any],
    azure: bool,
    extra: dict[str, Any] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_API_KEY", "azure-test-key-123")
    for reask in (False, True):
        _, via_litellm, _ = send("litellm", [OK], model, mode, params, azure, extra, reask=reask)
        _, direct, _ = send("direct", [OK], model, mode, params, azure, extra, reask=reask)
        assert len(via_litellm) == len(direct) == 1
        assert wire(direct[0]) == wire(via_litellm[0])
        assert direct[0]["headers"]["user-agent"] == "rubric-eval"  # it did go the direct way
        assert via_litellm[0]["headers"]["user-agent"] != "rubric-eval"
        assert len(direct[0]["body"]["messages"]) == (4 if reask else 2)


def test_messages_litellm_rewrites_go_through_litellm() -> None:
    """Content parts (``cache_control`` markers, images) are litellm's to translate."""
    parts = [{"role": "system", "content": [{"type": "text", "text": "rubric",
                                             "cache_control": {"type": "ephemeral"}}]}]  # fmt: skip
    assert not plain_messages(parts)
    assert not plain_messages([{"role": "user", "content": "hi", "cache_control": {}}])
    assert plain_messages(
        [{"role": "system", "content": "rubric"}, {"role": "user", "content": "x"}]
    )


def test_a_shape_litellm_rewrites_goes_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Azure API version older than ``response_format`` (litellm drops it) and vLLM tools
    (litellm rewrites their schemas) are sent by litellm itself."""
    monkeypatch.setenv("AZURE_API_KEY", "azure-test-key-123")
    old = {"api_version": "2024-06-01"}
    _, sent, _ = send("direct", [OK], "azure/judge-deploy", "json", {}, True, old)
    assert sent[0]["headers"]["user-agent"] != "rubric-eval"
    assert "response_format" not in sent[0]["body"]  # litellm's own rule, kept
    _, sent, _ = send("direct", [OK], "hosted_vllm/qwen", "tools")
    assert sent[0]["headers"]["user-agent"] != "rubric-eval"


def test_which_calls_are_sent_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_ORG_ID", "OPENAI_BASE_URL", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    local = "http://127.0.0.1:8000/v1"
    openai = route_for("openai/gpt-4o-mini", None, "sk-x", {})
    assert openai is not None and openai.url == "https://api.openai.com/v1/chat/completions"
    assert openai.headers["Authorization"] == "Bearer sk-x"
    azure = route_for("azure/dep", "https://r.openai.azure.com", "k", {"api_version": "2024-10-21"})
    assert azure is not None and azure.headers["api-key"] == "k"
    assert azure.url == (
        "https://r.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
    )
    # litellm's: other providers, options this module does not imitate
    assert route_for("anthropic/claude-3-5-haiku", None, "k", {}) is None
    assert route_for("gpt-4o-mini", None, "k", {}) is None
    assert route_for("hosted_vllm/qwen", None, "k", {}) is None  # no --api-base
    assert route_for("openai/m", local, "k", {"organization": "o"}) is None
    # a base URL's user:password@ is HTTP Basic, its query follows the path
    basic = route_for("openai/m", "http://u:p@127.0.0.1:8000/v1", "k", {})
    assert basic is not None and basic.url == f"{local}/chat/completions"
    assert basic.headers["Authorization"] == "Basic dTpw"
    query = route_for("openai/m", local + "?code=abc&x=1", "k", {})
    assert query is not None and query.url == f"{local}/chat/completions?code=abc&x=1"
    assert route_for("azure/dep", "https://r.openai.azure.com?code=abc", "k", {}) is None
    assert route_for("azure/dep", "https://r.openai.azure.com", None, {}) is None  # no key
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")  # the SDK would add its header
    assert route_for("openai/gpt-4o-mini", None, "sk-x", {}) is None


REPLIES = {
    "content": StubReply(content='{"score": 4}'),
    "tool call": StubReply(
        content=None,
        finish_reason="tool_calls",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "JudgeVerdict", "arguments": '{"score": 4}'},
            }
        ],
    ),
    "refusal": StubReply(content=None, refusal="I can't help with that."),
    "truncated": StubReply(content='{"score": ', finish_reason="length"),
    "filtered": StubReply(content="", finish_reason="content_filter"),
    "eos": StubReply(content='{"score": 4}', finish_reason="eos"),
    "cached and reasoning tokens": StubReply(
        content='{"score": 4}',
        usage={
            "prompt_tokens": 6000,
            "completion_tokens": 300,
            "total_tokens": 6300,
            "prompt_tokens_details": {"cached_tokens": 5000},
            "completion_tokens_details": {"reasoning_tokens": 100},
        },
    ),
    "plain usage": OK,
}


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "azure/gpt-4o-mini", "openai/stub"])
@pytest.mark.parametrize("reply", list(REPLIES))
def test_answers_are_recorded_counted_and_priced_as_litellm_does(
    reply: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_API_KEY", "azure-test-key-123")
    azure = model.startswith("azure/")
    extra = {"api_version": "2024-10-21"} if azure else None
    got = {}
    for transport in ("litellm", "direct"):
        answer, _, _ = send(transport, [REPLIES[reply]], model, azure=azure, extra=extra)
        assert answer.failure is None
        (attempt,) = answer.attempts
        assert attempt.response is not None
        response = {k: v for k, v in attempt.response.items() if k not in ("id", "created")}
        got[transport] = (response, attempt.prompt_tokens, attempt.completion_tokens)
        got[transport + " cost"] = attempt.cost_usd  # type: ignore[assignment]
    assert got["direct"] == got["litellm"]
    if model == "openai/stub":  # a model litellm has no price for
        assert got["direct cost"] is None and got["litellm cost"] is None
    else:  # priced: the USD are litellm's
        assert got["direct cost"] is not None and got["direct cost"] > 0
        assert got["direct cost"] == pytest.approx(got["litellm cost"], rel=1e-12, abs=0)


FAILURES = {
    "401": (StubReply(status=401, content="Invalid API key: key revoked"), 401, "TRANSPORT"),
    "403": (StubReply(status=403, content="forbidden"), 403, "TRANSPORT"),
    "429": (
        StubReply(status=429, content="slow down", headers={"Retry-After": "7"}),
        429,
        "TRANSPORT",
    ),
    "500": (StubReply(status=500, content="boom"), 500, "TRANSPORT"),
    "400 param": (
        StubReply(status=400, content="Unsupported parameter: 'seed' is not supported"),
        400,
        "TRANSPORT",
    ),
    "400 context": (
        StubReply(
            status=400,
            content="This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens.",
            error_code="context_length_exceeded",
        ),
        400,
        "CONTEXT_EXCEEDED",
    ),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_errors_map_to_the_same_status_kind_and_retry_hint(case: str) -> None:
    reply, status, kind = FAILURES[case]
    seen = {}
    for transport in ("litellm", "direct"):
        answer, _, backend = send(transport, [reply], "openai/stub-judge", params={"seed": 1})
        assert answer.failure is not None and answer.status == status
        assert answer.failure[0].value == kind
        assert reply.content is not None and reply.content.split(":")[0] in answer.failure[1]
        error = answer.attempts[0].error or ""
        assert f"(HTTP {status})" in error
        seen[transport] = (answer.failure[0], answer.status, len(answer.attempts))
        if case == "400 param":  # learned and sent again without it
            assert "seed" in backend.dropped
        if case == "429":
            assert backend.limiter.rate_limited == 1
    assert seen["direct"] == seen["litellm"]


def test_retry_after_is_read_from_a_direct_answer() -> None:
    slow = StubReply(status=429, content="slow down", headers={"Retry-After": "0.3"})
    retry = RetryPolicy(max_attempts=2, base_s=0.01)
    answer, sent, _ = send("direct", [slow, OK], "openai/stub-judge", retry=retry)
    assert answer.failure is None and len(answer.attempts) == 2
    assert sent[1]["at"] - sent[0]["at"] >= 0.3


def test_a_refused_connection_says_so_and_names_the_url() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    kwargs, request = judge_request("openai/stub-judge", "json", {})
    for transport in ("litellm", "direct"):
        settings = LiveSettings(api_base=base, retry=ONE_TRY, transport=transport)
        answer = asyncio.run(
            LiveBackend(settings).complete(kwargs, request, CallKey.of(kwargs, request), 0)
        )
        assert answer.failure is not None and answer.status is None
        message = answer.failure[1]
        assert "connection refused" in message and f"127.0.0.1:{port}" in message, message
        assert "HTTP 500" not in message


def test_a_timeout_is_a_client_side_failure_retried_by_the_policy() -> None:
    late = StubReply(content='{"score": 4}', delay_s=1.0)
    settings_retry = RetryPolicy(max_attempts=2, base_s=0.01)
    kwargs, request = judge_request("openai/stub-judge", "json", {})
    with StubServer(lambda body: late) as server:
        settings = LiveSettings(
            api_base=server.base_url, timeout_s=0.3, retry=settings_retry, transport="direct"
        )
        answer = asyncio.run(
            LiveBackend(settings).complete(kwargs, request, CallKey.of(kwargs, request), 0)
        )
    assert answer.failure is not None and answer.status is None
    assert [a.error.split(":")[0] for a in answer.attempts if a.error] == ["Timeout", "Timeout"]


def test_keys_never_reach_an_error_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-test-secret-abcdef123456")
    echo = StubReply(status=401, content="Incorrect API key", echo_request=True)
    kwargs, request = judge_request("openai/stub-judge", "json", {})
    with StubServer(lambda body: echo) as server:
        settings = LiveSettings(
            api_base=server.base_url, api_key_env="JUDGE_KEY", retry=ONE_TRY, transport="direct"
        )
        answer = asyncio.run(
            LiveBackend(settings).complete(kwargs, request, CallKey.of(kwargs, request), 0)
        )
    assert answer.failure is not None
    assert "'Authorization': 'Bearer [redacted]'" in answer.failure[1]
    assert "abcdef123456" not in answer.failure[1]


def test_the_transport_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUBRIC_EVAL_TRANSPORT", raising=False)
    assert transport_choice() == "direct" and transport_choice("litellm") == "litellm"
    monkeypatch.setenv("RUBRIC_EVAL_TRANSPORT", "litellm")
    assert transport_choice() == "litellm" and transport_choice("direct") == "direct"
    with pytest.raises(ValueError, match="direct, litellm"):
        transport_choice("httpx")


@pytest.mark.parametrize("model", ["openai/m", "hosted_vllm/m"])
def test_the_body_is_json_dumps_of_the_request_in_the_given_order(model: str) -> None:
    """Built from pieces (a long message is encoded once and reused), the body is the bytes
    ``json.dumps`` gives for the whole request."""
    route = route_for(model, "http://127.0.0.1:1/v1", "k", {})
    assert route is not None
    system = {"role": "system", "content": "règle — " * 500}
    for n in range(2):
        messages = [system, {"role": "user", "content": f"é {n}"}]
        kwargs = {"messages": messages, "model": model, "seed": 1, "temperature": 0.0,
                  "response_format": {"type": "json_object"}}  # fmt: skip
        whole = {"model": "m", "messages": messages, "temperature": 0.0, "seed": 1,
                 "response_format": {"type": "json_object"}}  # fmt: skip
        body = request_body(route, kwargs, ("temperature", "seed", "response_format"))
        if route.compact:
            assert body == json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()
        else:
            assert body == json.dumps(whole).encode()


def test_the_paths_that_import_litellm_late_keep_it_offline() -> None:
    """Newcomer finding: a live run whose server answered HTTP 400 imported litellm to read
    the error (and an unusual finish_reason likewise), without the offline price map, so
    litellm tried to download one from the web (two retries, seconds of waiting) from a run
    meant to reach its loopback server alone. Both paths now import it as every other does."""
    script = (
        "import os, sys\n"
        "from rubric_engine.judge.transport import DirectTransport, status_error\n"
        'error = status_error(400, b\'{"error": {"message": "This model\\\'s maximum '
        "context length is 8192 tokens\"}}', {})\n"
        "print(type(error).__name__)\n"
        "print(DirectTransport().normalize({'choices': [{'finish_reason': 'eos'}]}))\n"
        "print(os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP'), 'litellm' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ContextWindowExceededError",
        "{'choices': [{'finish_reason': 'stop'}]}",
        "True True",
    ]
    assert "cost map" not in done.stderr, done.stderr
