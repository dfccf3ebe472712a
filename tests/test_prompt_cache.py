"""Prompt caching: the static rubric prefix is marked cacheable for providers
that need explicit markers, cached-token counts are read from usage and priced at the
provider's cached rates, and the report shows cached vs uncached prompt tokens.

The loopback tests run real litellm over real sockets: ``anthropic/`` reaches the Anthropic
Messages stub (``/v1/messages``), ``openai/`` the OpenAI stub with its automatic caching on.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.judge.cache_markers import EPHEMERAL, mark_static_prefix, needs_markers
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.judge.usage import TokenUsage, price, read_usage, usage_of
from rubric_engine.report.render.console import print_summary
from rubric_engine.testing.anthropic_stub import AnthropicStubServer
from rubric_engine.testing.openai_stub import StubServer, load_verdicts, verdicts_responder
from tests.conftest import CASES, RUBRICS

CLAUDE = "anthropic/claude-haiku-4-5"
VERDICTS = CASES / "verdicts" / "health_cs.jsonl"


# --- usage: every shape a response's usage comes in ---------------------------------------


def test_openai_usage_reads_cached_tokens_inside_the_prompt() -> None:
    usage = {
        "prompt_tokens": 6481,
        "completion_tokens": 120,
        "total_tokens": 6601,
        "prompt_tokens_details": {"cached_tokens": 6016, "audio_tokens": 0},
    }
    got = read_usage(usage)
    assert got == TokenUsage(6481, 120, 6016, 0)
    assert got.uncached_prompt_tokens == 465


def test_litellm_anthropic_usage_is_read_once_not_twice() -> None:
    # litellm 1.110's model_dump of an Anthropic answer: the cache counts are inside
    # prompt_tokens and repeated three ways; each must count once
    dumped = {
        "completion_tokens": 20,
        "prompt_tokens": 4050,
        "total_tokens": 4070,
        "prompt_tokens_details": {
            "cache_write_tokens": 0,
            "cached_tokens": 4000,
            "text_tokens": 50,
            "cache_creation_tokens": 0,
        },
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4000,
    }
    assert read_usage(dumped) == TokenUsage(4050, 20, 4000, 0)
    written = {
        "prompt_tokens": 4050,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cache_creation_tokens": 4000, "cache_write_tokens": 4000},
        "cache_creation_input_tokens": 4000,
    }
    assert read_usage(written) == TokenUsage(4050, 20, 0, 4000)


def test_anthropic_own_usage_adds_the_cache_to_the_input() -> None:
    raw = {
        "input_tokens": 50,
        "output_tokens": 20,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4000,
    }
    assert read_usage(raw) == TokenUsage(4050, 20, 4000, 0)


def test_usage_without_counts_or_with_junk_reads_as_zero() -> None:
    assert read_usage(None) == TokenUsage()
    assert usage_of({"choices": []}) == TokenUsage()
    junk = {"prompt_tokens": "12", "completion_tokens": True, "prompt_tokens_details": [1]}
    assert read_usage(junk) == TokenUsage()
    # a cache count beyond the prompt is not billed beyond it
    assert read_usage({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 99}}) == (
        TokenUsage(10, 0, 10, 0)
    )


def test_reasoning_tokens_counted_outside_completion_are_added() -> None:
    outside = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 150,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    assert read_usage(outside).completion_tokens == 50
    inside = {**outside, "total_tokens": 120}
    assert read_usage(inside).completion_tokens == 20


# --- pricing: litellm's rates, cached tokens at the cached rates ---------------------------


def rates(model: str) -> dict[str, float]:
    import litellm

    return litellm.get_model_info(model)  # type: ignore[return-value]


@pytest.mark.parametrize("model", [CLAUDE, "openai/gpt-4o-mini"])
def test_price_bills_cache_reads_and_writes_at_their_rates(model: str) -> None:
    r = rates(model)
    read = price(model, TokenUsage(6000, 200, 5000, 0))
    assert read == pytest.approx(
        1000 * r["input_cost_per_token"]
        + 5000 * r["cache_read_input_token_cost"]
        + 200 * r["output_cost_per_token"],
        rel=1e-9,
    )
    write_rate = r.get("cache_creation_input_token_cost") or r["input_cost_per_token"]
    written = price(model, TokenUsage(6000, 200, 0, 5000))
    assert written == pytest.approx(
        1000 * r["input_cost_per_token"] + 5000 * write_rate + 200 * r["output_cost_per_token"],
        rel=1e-9,
    )
    plain = price(model, TokenUsage(6000, 200))
    assert plain == pytest.approx(
        6000 * r["input_cost_per_token"] + 200 * r["output_cost_per_token"], rel=1e-9
    )
    assert read is not None and plain is not None and read < plain


def test_a_model_without_a_price_has_none() -> None:
    assert price("openai/stub-judge", TokenUsage(100, 10, 50, 0)) is None


# --- markers: which providers, and what changes on the wire ---------------------------------


@pytest.mark.parametrize(
    ("model", "marked"),
    [
        (CLAUDE, True),
        ("anthropic/claude-stub-judge", True),  # not in litellm's map: the provider decides
        ("claude-sonnet-4-5", True),
        ("bedrock/anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("bedrock/converse/anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("vertex_ai/claude-3-5-sonnet-v2@20241022", True),
        ("openai/gpt-4o-mini", False),  # OpenAI caches on its own
        ("gpt-4o-mini", False),
        ("openai/stub-judge", False),
        ("hosted_vllm/qwen", False),
        ("azure/gpt-4o", False),
        ("deepseek/deepseek-chat", False),
        ("gemini/gemini-2.0-flash", False),
        ("vertex_ai/gemini-1.5-pro", False),
    ],
)
def test_which_models_get_markers(model: str, marked: bool) -> None:
    assert needs_markers(model) is marked


def test_the_marker_goes_on_the_system_message_only_and_nothing_is_changed_in_place() -> None:
    kwargs: dict[str, Any] = {
        "model": CLAUDE,
        "messages": [
            {"role": "system", "content": "RUBRIC"},
            {"role": "user", "content": "rowId: a"},
        ],
        "temperature": 0.0,
    }
    before = json.dumps(kwargs)
    marked = mark_static_prefix(kwargs)
    assert json.dumps(kwargs) == before
    assert marked["messages"][0] == {
        "role": "system",
        "content": [{"type": "text", "text": "RUBRIC", "cache_control": EPHEMERAL}],
    }
    assert marked["messages"][1] is kwargs["messages"][1]
    assert marked["temperature"] == 0.0
    folded = {"messages": [{"role": "user", "content": "RUBRIC rowId: a"}]}  # --system-as-user
    assert mark_static_prefix(folded) is folded


# --- loopback: a live score through litellm ---------------------------------------------------


def demo_rows(tmp_path: Path, n: int = 4) -> Path:
    lines = (CASES / "health_consult_zh.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def live_options(tmp_path: Path, base_url: str, model: str, **extra: Any) -> ScoreOptions:
    values: dict[str, Any] = {
        "inputs": [demo_rows(tmp_path)],
        "rubric": RUBRICS / "health_cs.yaml",
        "draft": True,
        "mode": "live",
        "model": model,
        "api_base": base_url,
        "api_key_env": "STUB_JUDGE_KEY",
        "store": tmp_path / "store.sqlite",
        "out": tmp_path / "out",
        "cassettes": tmp_path / "cassettes",
        "concurrency": 2,
        "retry": RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=0.05),
    }
    values.update(extra)
    return ScoreOptions(**values)


@pytest.mark.live
def test_anthropic_requests_carry_the_marker_and_the_report_counts_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_JUDGE_KEY", "stub-key")
    # 4 rows in flight at once, each answer 0.2 s away: only the warm-up (the first request
    # alone, the rest once it is answered) makes the other three read the cache
    responder = verdicts_responder(load_verdicts(VERDICTS))
    with AnthropicStubServer(responder, latency_s=0.2) as server:
        result = score(live_options(tmp_path, server.base_url, CLAUDE, concurrency=4))
    assert len(server.requests) == 4
    first, *others = sorted(r["at"] for r in server.requests)
    assert all(at - first >= 0.2 for at in others)
    systems = [r["body"]["system"] for r in server.requests]
    assert {r["path"] for r in server.requests} == {"/v1/messages"}
    # one text block, the whole static prefix, marked; byte-identical for every row
    assert all(len(s) == 1 and s[0]["cache_control"] == EPHEMERAL for s in systems)
    assert len({s[0]["text"] for s in systems}) == 1
    # no marker anywhere else (the row's own message is not cacheable)
    assert all("cache_control" not in json.dumps(r["body"]["messages"]) for r in server.requests)

    prefix = len(systems[0][0]["text"]) // 4  # the stub's count
    usage = result.report["usage"]
    # the first request wrote the prefix to the cache, the other three read it
    assert usage["cacheCreationTokens"] == prefix
    assert usage["cacheReadTokens"] == 3 * prefix
    assert usage["promptTokens"] > 4 * prefix
    r = rates(CLAUDE)
    uncached = usage["promptTokens"] - 4 * prefix
    expected = (
        uncached * r["input_cost_per_token"]
        + 3 * prefix * r["cache_read_input_token_cost"]
        + prefix * r["cache_creation_input_token_cost"]
        + usage["completionTokens"] * r["output_cost_per_token"]
    )
    assert usage["costUsd"] == pytest.approx(expected, abs=1e-6)  # report rounds to 1e-6
    markdown = result.files.markdown.read_text(encoding="utf-8")
    line = (
        f"- Prompt tokens: {3 * prefix} read from the prompt cache, {prefix} written to it, "
        f"{uncached} not cached"
    )
    assert line in markdown
    html = result.files.html.read_text(encoding="utf-8")
    assert f"{3 * prefix} read from the prompt cache" in html
    printed = io.StringIO()
    print_summary(result.report, Console(file=printed, width=200))
    assert f"{3 * prefix} read from the prompt cache, {prefix} written to it" in printed.getvalue()


@pytest.mark.live
def test_no_prompt_cache_sends_no_marker_and_reports_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    monkeypatch.setenv("STUB_JUDGE_KEY", "stub-key")
    with AnthropicStubServer(verdicts_responder(load_verdicts(VERDICTS))) as server:
        args = [
            "score", str(demo_rows(tmp_path)), "--rubric", str(RUBRICS / "health_cs.yaml"),
            "--draft", "--mode", "live", "--model", CLAUDE, "--api-base", server.base_url,
            "--api-key-env", "STUB_JUDGE_KEY", "--store", str(tmp_path / "store.sqlite"),
            "--out", str(tmp_path / "out"), "--no-prompt-cache",
        ]  # fmt: skip
        done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert len(server.requests) == 4
    assert all("cache_control" not in json.dumps(r["body"]) for r in server.requests)
    usage = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["usage"]
    assert "cacheReadTokens" not in usage and "cacheCreationTokens" not in usage
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "prompt cache" not in markdown
    assert "prompt cache" not in done.output  # the printed summary has no cache line either


@pytest.mark.live
def test_openai_requests_are_the_same_bytes_with_and_without_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The markers never reach an OpenAI-protocol request: same wire bodies, same keys."""
    monkeypatch.setenv("STUB_JUDGE_KEY", "stub-key")
    bodies, keys = [], []
    for on in (True, False):
        folder = tmp_path / str(on)
        folder.mkdir()
        with StubServer(verdicts_responder(load_verdicts(VERDICTS))) as server:
            score(
                live_options(
                    folder, server.base_url, "openai/gpt-4o-mini", prompt_cache=on, mode="record"
                )
            )
        bodies.append(sorted(json.dumps(r["body"], sort_keys=True) for r in server.requests))
        keys.append(
            sorted(
                json.loads(line)["key"]
                for f in (folder / "cassettes").rglob("*.jsonl")
                for line in f.read_text(encoding="utf-8").splitlines()
            )
        )
    assert bodies[0] == bodies[1] and len(bodies[0]) == 4
    assert keys[0] == keys[1] and len(keys[0]) == 4


@pytest.mark.live
def test_a_recorded_anthropic_task_replays_with_the_same_cache_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is a transport detail: the cassette key is the unmarked request's, so a
    replay (which sends nothing) finds every entry, and the cassette keeps the counts."""
    monkeypatch.setenv("STUB_JUDGE_KEY", "stub-key")
    with AnthropicStubServer(verdicts_responder(load_verdicts(VERDICTS))) as server:
        recorded = score(live_options(tmp_path, server.base_url, CLAUDE, mode="record"))
    replayed = score(
        live_options(
            tmp_path, server.base_url, CLAUDE, mode="replay", api_base=None, out=tmp_path / "r"
        )
    )
    assert replayed.report["totals"]["judgeErrors"] == 0
    for key in ("promptTokens", "cacheReadTokens", "cacheCreationTokens", "completionTokens"):
        assert replayed.report["usage"][key] == recorded.report["usage"][key]
    assert recorded.report["usage"]["cacheReadTokens"] > 0


@pytest.mark.live
def test_openai_requests_are_unmarked_and_cached_tokens_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_JUDGE_KEY", "stub-key")
    responder = verdicts_responder(load_verdicts(VERDICTS))
    with StubServer(responder, prompt_cache=True) as server:  # one row at a time: no warm-up
        result = score(live_options(tmp_path, server.base_url, "openai/gpt-4o-mini", concurrency=1))
    assert len(server.requests) == 4
    for request in server.requests:
        assert "cache_control" not in json.dumps(request["body"])
        system = request["body"]["messages"][0]
        assert system["role"] == "system" and isinstance(system["content"], str)
    prefix = len(server.requests[0]["body"]["messages"][0]["content"]) // 4
    usage = result.report["usage"]
    assert usage["cacheReadTokens"] == 3 * prefix
    assert usage["cacheCreationTokens"] == 0  # OpenAI bills no cache writes
    r = rates("openai/gpt-4o-mini")
    expected = (
        (usage["promptTokens"] - 3 * prefix) * r["input_cost_per_token"]
        + 3 * prefix * r["cache_read_input_token_cost"]
        + usage["completionTokens"] * r["output_cost_per_token"]
    )
    assert usage["costUsd"] == pytest.approx(expected, abs=1e-6)
    summary = result.report.usage
    uncached = usage["promptTokens"] - 3 * prefix
    assert summary.cache_line == f"{3 * prefix} read from the prompt cache, {uncached} not cached"
