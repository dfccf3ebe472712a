"""A self-hosted judge (llama.cpp, vLLM) as it behaves: it restarts, it counts tokens its own way
(docs/self-hosted-judge.md). Each test failed before its fix."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import score
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.testing.openai_stub import StubReply, StubServer, row_id_of
from tests.test_live import UNSEEN, options, verdict

pytestmark = pytest.mark.live


def test_a_refused_connection_is_retried_until_the_restart_wait_has_passed() -> None:
    import asyncio

    from rubric_engine.judge.transport import APIConnectionError, BadRequestError

    policy = RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=0.05, restart_wait_s=0.6)
    tries: list[float] = []

    async def call(exc: Exception) -> None:
        async for attempt in policy.retrying():
            with attempt:
                tries.append(time.monotonic())
                raise exc

    refused = APIConnectionError("connection refused by http://127.0.0.1:9/v1 (is the server…)")
    started = time.monotonic()
    with pytest.raises(APIConnectionError):
        asyncio.run(call(refused))
    assert time.monotonic() - started >= 0.6 and len(tries) > 2  # past max_attempts
    tries.clear()
    with pytest.raises(BadRequestError):  # any other error: max_attempts (not retried at all)
        asyncio.run(call(BadRequestError("bad", 400)))
    assert len(tries) == 1


def test_a_server_restart_loses_no_row(tmp_path: Path) -> None:
    # a restart (~10 s) outlasted the 4 retries in 8 s; the row failed "to reach the judge"
    first = StubServer(lambda body: verdict(row_id_of(body) or ""))
    port = int(first.base_url.rsplit(":", 1)[1].split("/")[0])
    first.start()
    restarted: list[StubServer] = []

    def restart() -> None:
        first.stop()  # the listening socket closes: connections are refused
        time.sleep(2.0)
        again = StubServer(lambda body: verdict(row_id_of(body) or ""), port=port)
        restarted.append(again.start())

    rows = tmp_path / "rows.jsonl"
    rows.write_text(UNSEEN.read_text("utf-8"), "utf-8")
    base = first.base_url
    threading.Thread(target=restart, daemon=True).start()
    time.sleep(0.2)  # the server is down when the run starts
    try:
        result = score(
            options(
                tmp_path, None, mode="live", api_base=base, inputs=[rows],
                retry=RetryPolicy(max_attempts=2, base_s=0.2, max_wait_s=1.0),
                restart_wait_s=30.0,
            )
        )  # fmt: skip
    finally:
        for server in restarted:
            server.stop()
    assert result.report.totals.judge_errors == 0
    assert result.report.totals.scored == len(UNSEEN.read_text("utf-8").splitlines())


def test_the_stop_message_counts_the_calls_the_judge_answered(tmp_path: Path) -> None:
    # the in-flight rows' answered calls were not counted: "failed to reach the judge"
    from rubric_engine.engine.run import JudgeUnavailableError

    seen: dict[str, int] = {}

    def judge(body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        seen[row] = seen.get(row, 0) + 1
        if seen[row] == 1:
            return StubReply(content=json.dumps({"rowId": row, "score": 99}))  # asked again
        return StubReply(status=500, content="the server went away")

    with StubServer(judge) as server, pytest.raises(JudgeUnavailableError) as stopped:
        score(
            options(
                tmp_path, server, concurrency=1,
                retry=RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=0.02),
            )
        )  # fmt: skip
    message = str(stopped.value)
    assert "the judge answered 3 of their 9 call(s), then stopped answering" in message, message
    assert "failed to reach the judge" not in message


def test_a_truncated_re_ask_goes_again_alone_with_more_room(tmp_path: Path) -> None:
    # a truncated re-ask restarted the row: the first request (whose answer was invalid) was
    # sent again byte for byte, then the re-ask: 9 calls for one row
    from tests.test_hostile_judge import OWN, run_row

    invalid = StubReply(content=OWN.replace('"score": 4', '"score": 99'))
    cut = StubReply(content=OWN[:40], finish_reason="length")
    row, calls = run_row(tmp_path, [invalid, cut, StubReply(content=OWN)])
    assert row["status"] == "SCORED" and row["judgeScore"] == 4
    assert len(calls) == 3
    first, reask, again = (c["body"] for c in calls)
    assert (reask["max_tokens"], again["max_tokens"]) == (1024, 2048)
    assert again["messages"] == reask["messages"] != first["messages"]


def test_a_re_ask_cut_off_twice_ends_the_row(tmp_path: Path) -> None:
    from tests.test_hostile_judge import OWN, run_row

    invalid = StubReply(content=OWN.replace('"score": 4', '"score": 99'))
    cut = StubReply(content=OWN[:40], finish_reason="length")
    row, calls = run_row(tmp_path / "b", [invalid, cut, cut, StubReply(content=OWN)])
    assert row["status"] == "JUDGE_ERROR" and row["error"]["kind"] == "TRUNCATED"
    assert len(calls) == 3 and "a re-ask was cut off" in row["error"]["message"]


def _rows(tmp_path: Path) -> Path:
    """A short row and a long one (12,000 characters of English: ~2,400 tiktoken tokens)."""
    small = json.loads(UNSEEN.read_text("utf-8").splitlines()[0])
    big = {**small, "rowId": "long-row"}
    big["messages"] = [
        {"role": "user", "content": "The patient lists symptoms and history. " * 300},
        {"role": "assistant", "content": "Please see a doctor."},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(small) + "\n" + json.dumps(big) + "\n", "utf-8")
    return path


def _warned(tmp_path: Path, server: StubServer, max_context: int) -> list[str]:
    import warnings

    from rubric_engine.engine.plan import fresh_plan
    from rubric_engine.judge.server_checks import ContextLimitWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = fresh_plan(
            options(tmp_path, server, inputs=[_rows(tmp_path)], max_context=max_context), "t"
        )
    plan.inputs.close()
    return [str(w.message) for w in caught if issubclass(w.category, ContextLimitWarning)]


def test_the_context_check_asks_a_server_with_a_tokenizer_for_its_count(tmp_path: Path) -> None:
    # the pre-flight counted with tiktoken (here: 4x low) and let an 11k-token row through
    from rubric_engine.testing.openai_stub import ServerQuirks

    quirks = ServerQuirks(chars_per_token=1, tokenize=True)  # a tokenizer of its own
    with StubServer(lambda body: verdict(row_id_of(body) or ""), quirks=quirks) as server:
        warned = _warned(tmp_path, server, 16000)
        asked = server.tokenize_calls
    assert len(warned) == 1 and "long-row" in warned[0], warned
    assert "counted by the server's /tokenize" in warned[0]
    assert UNSEEN.read_text("utf-8").split('"', 4)[3] not in warned[0]  # the short row fits
    assert asked >= 3  # the probe, then each long row


def test_without_a_tokenizer_the_check_adds_max_tokens_and_a_stated_margin(
    tmp_path: Path,
) -> None:
    # "about 7663 tokens … over 8192" let rows through: max_tokens was not counted
    with StubServer(lambda body: verdict(row_id_of(body) or "")) as server:
        warned = _warned(tmp_path, server, 11500)
    assert len(warned) == 1 and "long-row" in warned[0], warned
    assert "room for a 1024-token answer" in warned[0]
    assert "tiktoken plus a 30% margin" in warned[0]


def test_a_context_error_quotes_the_server_s_own_count(tmp_path: Path) -> None:
    from rubric_engine.testing.openai_stub import ServerQuirks

    quirks = ServerQuirks(chars_per_token=1, context_limit=16000)
    with StubServer(lambda body: verdict(row_id_of(body) or ""), quirks=quirks) as server:
        result = score(options(tmp_path, server, inputs=[_rows(tmp_path)], max_context=16000))
    (error,) = [e for e in result.report.judge_errors if e.row_id == "long-row"]
    assert error.kind == "CONTEXT_EXCEEDED"
    assert "tokens as the server counted" in (error.message or ""), error.message


def test_the_context_check_counts_only_prompts_that_might_not_fit() -> None:
    """A prompt under a quarter of the room in characters (a character is at most four UTF-8
    bytes) or under the room in bytes fits uncounted; a longer one is counted and named when
    its tokens and the answer's room pass the limit."""
    from rubric_engine.judge.server_checks import oversized_rows

    counted: list[str] = []

    def estimate(messages: list[dict[str, Any]]) -> int:
        counted.append(messages[0]["content"])
        return len(messages[0]["content"])  # one token a character

    prompts = [
        ("short", [{"role": "user", "content": "a" * 24}]),  # 4 x 24 < 100: no encoding
        ("wide", [{"role": "user", "content": "健" * 30}]),  # 90 bytes < 100: not counted
        ("bytes", [{"role": "user", "content": "健" * 40}]),  # 120 bytes: counted, 40 fits
        ("long", [{"role": "user", "content": "b" * 120}]),  # counted: 120 + 10 > 110
    ]
    assert oversized_rows(prompts, 110, estimate, reserve=10) == [("long", 120)]
    assert counted == ["健" * 40, "b" * 120]
