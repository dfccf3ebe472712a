"""What providers do that a judge run must take as it comes: Retry-After hints,
parameters a model rejects, the seed, reasoning tokens. Real sockets, real litellm."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from rubric_engine.engine import score
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.testing.openai_stub import StubReply, StubServer, scripted_responder
from tests.test_live import SCRIPT, options, rows_by_id

pytestmark = pytest.mark.live


def gaps_s(server: StubServer, row_id: str) -> list[float]:
    times = [r["at"] for r in server.requests if f"rowId: {row_id}" in str(r["body"])]
    return [b - a for a, b in itertools.pairwise(times)]


@pytest.mark.parametrize("header", ["Retry-After", "retry-after-ms"])
def test_retry_after_is_a_minimum_wait_and_the_cap_bounds_it(tmp_path: Path, header: str) -> None:
    # a provider enforcing a 0.6 s hint saw retries sooner than it asked
    hint = "0.6" if header == "Retry-After" else "600"
    script = dict(SCRIPT)
    script["unseen-5"] = [
        StubReply(status=429, content="slow down", headers={header: hint}),
        StubReply(status=503, content="busy", headers={header: hint}),
        SCRIPT["unseen-5"][0],
    ]
    policy = RetryPolicy(max_attempts=4, base_s=0.01, max_wait_s=5.0)
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server, retry=policy))
        gaps = gaps_s(server, "unseen-5")
    assert rows_by_id(result.files.rows)["unseen-5"]["status"] == "SCORED"
    assert len(gaps) == 2 and min(gaps) >= 0.6, gaps


def test_a_hint_beyond_the_cap_waits_the_cap(tmp_path: Path) -> None:
    script = dict(SCRIPT)
    script["unseen-5"] = [
        StubReply(status=429, content="slow down", headers={"Retry-After": "3600"}),
        SCRIPT["unseen-5"][0],
    ]
    policy = RetryPolicy(max_attempts=3, base_s=0.01, max_wait_s=0.3)
    with StubServer(scripted_responder(script)) as server:
        score(options(tmp_path, server, retry=policy))
        (gap,) = gaps_s(server, "unseen-5")
    assert 0.3 <= gap < 2.0


def test_retry_after_holds_off_every_row_not_only_the_one_it_answered(tmp_path: Path) -> None:
    # before: the other rows kept sending while one row waited out the hint, so a provider
    # enforcing it saw requests well inside the window it asked for
    script = {
        row: [StubReply(content=reply.content, delay_s=0.15) for reply in replies]
        for row, replies in SCRIPT.items()
    }
    script["unseen-5"] = [
        StubReply(status=429, content="slow down", headers={"Retry-After": "1"}),
        SCRIPT["unseen-5"][0],
    ]
    policy = RetryPolicy(max_attempts=4, base_s=0.01, max_wait_s=5.0)
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server, retry=policy, concurrency=2))
        told = next(r["at"] for r in server.requests if "rowId: unseen-5" in str(r["body"]))
        # requests arriving within 50 ms were on the wire before the 429 was read
        later = [r["at"] - told for r in server.requests if r["at"] > told + 0.05]
    assert all(rows["status"] == "SCORED" for rows in rows_by_id(result.files.rows).values())
    assert later and min(later) >= 1.0, later


def test_retry_after_as_an_http_date_is_read() -> None:
    from rubric_engine.judge.retry import retry_after_s

    class Limited(Exception):
        def __init__(self) -> None:
            when = datetime.now(UTC) + timedelta(seconds=20)
            self.headers = {"retry-after": format_datetime(when, usegmt=True)}

    hinted = retry_after_s(Limited())
    assert hinted is not None and 17 < hinted <= 20
    assert RetryPolicy(max_wait_s=5.0).hint_s(Limited()) == 5.0


def test_a_rejected_temperature_is_learned_once_recorded_and_the_seed_is_sent(
    tmp_path: Path,
) -> None:
    # before: a reasoning model refusing temperature made every row a JUDGE_ERROR
    from rubric_engine.store.task_store import TaskStore
    from tests.test_cli import run as cli

    answer = scripted_responder(SCRIPT)

    def respond(body: dict[str, object]) -> StubReply:
        if "temperature" in body:
            return StubReply(
                status=400,
                content="Unsupported parameter: 'temperature' is not supported with this model.",
            )
        return answer(body)

    with StubServer(respond) as server:
        code, out = cli(
            "score", Path(__file__).parent / "data" / "unseen_health.jsonl", "-r",
            Path(__file__).parent.parent / "rubrics" / "health_cs.yaml", "--draft", "--mode",
            "live", "--api-base", server.base_url, "--model", "openai/stub-judge", "--store",
            tmp_path / "s.sqlite", "--out", tmp_path / "out", "--seed", "7", "--concurrency",
            "1", "--display", "none",
        )  # fmt: skip
        bodies = [r["body"] for r in server.requests]
    assert code == 0, out
    assert "note: the provider rejected temperature" in out
    assert sum("temperature" in b for b in bodies) == 1  # learned from the first rejection
    assert all(b.get("seed") == 7 for b in bodies)
    rows = rows_by_id(tmp_path / "out" / "rows.jsonl")
    assert all(r["status"] == "SCORED" for r in rows.values())
    with TaskStore(tmp_path / "s.sqlite") as opened:
        (task,) = opened.tasks()
    assert task.judge_params["seed"] == 7
    assert "Unsupported parameter" in task.extra["droppedParams"]["temperature"]


# prompt_tokens is a plausible count for the rubric-sized prompt: far fewer would be taken
# for a server that dropped the system message (rubric_engine.judge.server_checks)
@pytest.mark.parametrize(("total", "counted"), [(9050, 50), (9080, 80)])
def test_reasoning_tokens_are_kept_and_counted(tmp_path: Path, total: int, counted: int) -> None:
    # before: usage details were dropped when responses were stored, and a provider that
    # reports reasoning tokens outside completion_tokens was under-counted
    import json

    usage = {
        "prompt_tokens": 9000,
        "completion_tokens": 50,
        "total_tokens": total,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    script = {
        row: [StubReply(content=r.content, usage=dict(usage)) for r in replies]
        for row, replies in SCRIPT.items()
    }
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server, mode="record"))
    (cassette,) = (tmp_path / "cassettes").rglob("*.jsonl")
    entry = json.loads(cassette.read_text("utf-8").splitlines()[0])
    kept = entry["attempts"][0]["response"]["usage"]
    assert kept["completion_tokens_details"] == {"reasoning_tokens": 30}
    row = rows_by_id(result.files.rows)["unseen-5"]
    assert row["status"] == "SCORED"
    calls = result.report["usage"]["calls"]
    assert result.report["usage"]["completionTokens"] == counted * calls
