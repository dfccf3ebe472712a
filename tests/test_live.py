"""The live judge path against a loopback OpenAI-compatible server (real sockets, real litellm
and instructor, no cassette), and record → replay through the same parsing code."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.testing.openai_stub import StubReply, StubServer, scripted_responder
from tests.conftest import RUBRICS

pytestmark = pytest.mark.live
UNSEEN = Path(__file__).parent / "data" / "unseen_health.jsonl"
SENTINEL = "sk-SENTINEL-6f1e2d3c4b5a-never-store-me"


def verdict(row_id: str, delay_s: float = 0.0, **fields: Any) -> StubReply:
    body = {
        "rowId": row_id,
        "intentKey": "HEALTH_CONSULTATION",
        "score": 3,
        "redFlagTypes": [],
        "scoreExplanation": "scripted for a test",
        "unmetRequirementIds": [],
        "partialRequirementIds": [],
        "questionsCheck": "NOT_PRESENT",
        "questionsIssues": [],
    }
    body.update(fields)
    return StubReply(content=json.dumps(body, ensure_ascii=False), delay_s=delay_s)


SCRIPT = {
    # judge 3, an unmet rule capped at 2 -> final 2, capped by it
    "unseen-5": [verdict("unseen-5", unmetRequirementIds=["INTENT_HEALTH_ON_TOPIC"])],
    # a red flag with no rule named -> the type's applicable rule is backfilled, cap 1
    "unseen-10": [verdict("unseen-10", score=4, redFlagTypes=["SAFETY_OMISSION"])],
    # a string score and a lower-case ID: cleaned; the red line adds its flag, cap 1
    "unseen-21": [
        verdict("unseen-21", score="4", unmetRequirementIds=["intent_health_no_prescription"])
    ],
    # first answer names an intent the pack does not have -> re-asked, then valid
    "unseen-36": [
        verdict("unseen-36", intentKey="HEALTH"),
        verdict("unseen-36", score=2, partialRequirementIds=["INTENT_HEALTH_TRIAGE"]),
    ],
}


def options(tmp_path: Path, server: StubServer | None, **extra: Any) -> ScoreOptions:
    base: dict[str, Any] = {
        "inputs": [UNSEEN],
        "rubric": RUBRICS / "health_cs.yaml",
        "draft": True,
        "mode": "live" if server else "replay",
        "model": "openai/stub-judge",
        "api_base": server.base_url if server else None,
        "store": tmp_path / "store.sqlite",
        "out": tmp_path / "out",
        "cassettes": tmp_path / "cassettes",
        "concurrency": 3,
        "retry": RetryPolicy(max_attempts=4, base_s=0.01, max_wait_s=0.05),
    }
    base.update(extra)
    return ScoreOptions(**base)


def rows_by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {r["rowId"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_live_path_normalizes_unseen_dialogues(tmp_path: Path) -> None:
    with StubServer(scripted_responder(SCRIPT)) as server:
        result = score(options(tmp_path, server))
    rows = rows_by_id(result.files.rows)
    assert (rows["unseen-5"]["finalScore"], rows["unseen-5"]["cappedBy"]) == (
        2,
        ["INTENT_HEALTH_ON_TOPIC"],
    )
    backfilled = {e["requirementId"]: e for e in rows["unseen-10"]["referenceBasis"]}
    assert backfilled["INTENT_HEALTH_RED_FLAG_REFERRAL"]["source"] == "backfill"
    assert rows["unseen-10"]["finalScore"] == 1
    assert rows["unseen-21"]["judgeScore"] == 4 and rows["unseen-21"]["finalScore"] == 1
    assert rows["unseen-21"]["redFlagTypes"] == ["MEDICAL_OVERREACH"]
    # the string score and the re-cased ID are counted clean-ups (docs/protocol.md §5), then the
    # red line
    assert [w["code"] for w in rows["unseen-21"]["warnings"]] == [
        "SCORE_TEXT_CONVERTED",
        "JUDGE_VALUE_RECASED",
        "RED_FLAG_ADDED",
    ]
    assert rows["unseen-36"]["status"] == "SCORED" and rows["unseen-36"]["finalScore"] == 2
    assert [w["code"] for w in rows["unseen-36"]["warnings"]] == ["JUDGE_REASKED"]
    # every applicable rule has one entry; the pack's unobservable rules are not in this intent
    assert len(rows["unseen-5"]["referenceBasis"]) == 10 + 8
    assert len(server.requests) == 5  # one call per row, plus one re-ask
    assert result.report["usage"]["calls"] == 5
    assert result.report["usage"]["promptTokens"] > 0
    assert not (tmp_path / "cassettes").exists()  # live mode needs and writes no cassette


def test_record_then_replay_gives_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUBRIC_EVAL_TEST_KEY", SENTINEL)
    with StubServer(scripted_responder(SCRIPT)) as server:
        recorded = score(
            options(
                tmp_path,
                server,
                mode="record",
                out=tmp_path / "rec",
                api_key_env="RUBRIC_EVAL_TEST_KEY",
            )
        )
    sent = {r["authSha256"] for r in server.requests}
    assert sent == {hashlib.sha256(f"Bearer {SENTINEL}".encode()).hexdigest()}
    replayed = score(options(tmp_path, None, out=tmp_path / "rep"))
    assert rows_by_id(recorded.files.rows) == rows_by_id(replayed.files.rows)
    assert replayed.report["task"]["cassettes"] == {"recorded": 4}
    entries = [
        json.loads(line)
        for f in (tmp_path / "cassettes").rglob("*.jsonl")
        for line in f.read_text(encoding="utf-8").splitlines()
    ]
    assert len(entries) == 4
    assert {e["provenance"]["kind"] for e in entries} == {"recorded"}
    assert max(len(e["attempts"]) for e in entries) == 2  # the re-asked row keeps both answers
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path


def test_invalid_answers_become_judge_error_and_the_batch_goes_on(tmp_path: Path) -> None:
    script = dict(SCRIPT)
    script["unseen-5"] = [StubReply(content="I think this is a 4 out of 5.")]
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server, max_reasks=2))
    rows = rows_by_id(result.files.rows)
    bad = rows["unseen-5"]
    assert bad["status"] == "JUDGE_ERROR" and bad["finalScore"] is None
    assert bad["error"]["kind"] == "INVALID_OUTPUT" and bad["error"]["attempts"] == 3
    assert [w["code"] for w in bad["warnings"]] == ["JUDGE_REASKED", "JUDGE_REASKED"]
    assert result.report["totals"]["judgeErrors"] == 1
    assert result.report["totals"]["scored"] == 3
    assert (
        sum(1 for r in server.requests if "unseen-5" in json.dumps(r["body"], ensure_ascii=False))
        == 3
    )


def test_server_errors_are_retried_and_client_errors_are_not(tmp_path: Path) -> None:
    # a 401/403 now stops the whole run (tests/test_crash_safety.py); a 400 is the row's own
    # client error, never retried, and the batch goes on
    script = dict(SCRIPT)
    script["unseen-5"] = [
        StubReply(status=503, content="busy"),
        StubReply(status=429, content="slow down", headers={"Retry-After": "0"}),
        SCRIPT["unseen-5"][0],
    ]
    script["unseen-10"] = [StubReply(status=400, content="bad request")]
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server))
    rows = rows_by_id(result.files.rows)
    assert rows["unseen-5"]["status"] == "SCORED"
    assert rows["unseen-10"]["status"] == "JUDGE_ERROR"
    assert rows["unseen-10"]["error"]["kind"] == "TRANSPORT"
    assert "400" in rows["unseen-10"]["error"]["message"]

    def seen(row_id: str) -> int:
        return sum(
            1
            for r in server.requests
            if f"rowId: {row_id}\n"
            in json.dumps(r["body"], ensure_ascii=False).replace("\\n", "\n")
        )

    assert seen("unseen-5") == 3  # 503, 429, then the answer: retries do not stack
    assert seen("unseen-10") == 1  # 400 is never retried
    # failed attempts count as calls in the usage report
    assert result.report["usage"]["calls"] == 3 + 1 + 1 + 2


def test_real_judge_quirks_are_parsed_and_refusals_are_not_reasked(tmp_path: Path) -> None:
    script = dict(SCRIPT)
    fenced = SCRIPT["unseen-5"][0].content
    script["unseen-5"] = [StubReply(content=f"Sure.\n```json\n{fenced}\n```")]
    script["unseen-10"] = [StubReply(content=None, finish_reason="content_filter")]
    echo = json.loads(SCRIPT["unseen-21"][0].content or "{}")
    echo["rowId"] = "ＵＮＳＥＥＮ-21 "  # full-width, trailing space: the same row
    script["unseen-21"] = [StubReply(content=json.dumps(echo, ensure_ascii=False))]
    with StubServer(scripted_responder(script)) as server:
        result = score(options(tmp_path, server))
    rows = rows_by_id(result.files.rows)
    assert rows["unseen-5"]["finalScore"] == 2 and rows["unseen-5"]["warnings"] == []
    assert rows["unseen-10"]["error"]["kind"] == "REFUSED"
    assert "content filter" in rows["unseen-10"]["error"]["message"]
    assert rows["unseen-21"]["status"] == "SCORED"
    calls = [r for r in server.requests if "unseen-10" in json.dumps(r["body"])]
    assert len(calls) == 1  # a refusal is not re-asked


def test_replay_miss_names_the_key_and_how_to_record(tmp_path: Path) -> None:
    (tmp_path / "cassettes").mkdir()
    result = score(options(tmp_path, None))
    assert len(result.cassette_misses) == 4
    error = result.cassette_misses[0].error
    assert error is not None and error.kind == "CASSETTE_MISS"
    assert error.cassette_key and error.cassette_key.startswith("sha256:")
    assert error.cassette_key in error.message and "no entry for row" in error.message


def test_unreachable_judge_stops_the_run_early(tmp_path: Path) -> None:
    from rubric_engine.engine import JudgeUnavailableError
    from rubric_engine.report import report_for_task
    from rubric_engine.report.render.json_md import render_markdown
    from rubric_engine.store.task_store import TaskStore

    # (a 401/403 stops at the first row instead: tests/test_crash_safety.py)
    script = {row: [StubReply(status=404, content="no such model")] for row in SCRIPT}
    with (
        StubServer(scripted_responder(script)) as server,
        pytest.raises(JudgeUnavailableError, match="first 3 of 4 row") as info,
    ):
        score(options(tmp_path, server, concurrency=1))
    assert "404" in str(info.value) and "API key" in str(info.value)
    assert len(server.requests) == 3  # 404 is not retried, and row 4 was never tried
    with TaskStore(tmp_path / "store.sqlite") as store:
        task = store.task(info.value.task_id)
        assert task.state == "STOPPED" and len(list(store.rows(task.id))) == 3
        markdown = render_markdown(report_for_task(store, task.id))
    assert "**State: STOPPED** — 3 of 4 planned rows were judged" in markdown


def test_credentials_are_checked_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubric_engine.errors import ConfigurationError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        score(options(tmp_path, None, mode="live", model="openai/gpt-4o-mini"))
    with pytest.raises(ConfigurationError, match=r"\$MY_JUDGE_KEY .* is not set"):
        score(options(tmp_path, None, mode="live", api_key_env="MY_JUDGE_KEY"))
    assert not (tmp_path / "store.sqlite").exists()


def test_bare_model_name_with_api_base_means_openai_compatible(tmp_path: Path) -> None:
    with StubServer(scripted_responder(SCRIPT)) as server:
        result = score(options(tmp_path, server, model="my-local-judge"))
    assert result.report["task"]["model"] == "openai/my-local-judge"
    assert result.report["totals"]["scored"] == 4
    assert {r["body"]["model"] for r in server.requests} == {"my-local-judge"}


def test_unknown_provider_is_named_before_any_call(tmp_path: Path) -> None:
    from rubric_engine.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="write it as provider/model"):
        score(options(tmp_path, None, mode="live", model="no-such-model-xyz"))


def test_template_syntax_in_a_dialogue_reaches_the_judge_unchanged(tmp_path: Path) -> None:
    # regression: instructor renders messages as Jinja templates when given `context=`, which
    # rewrote "{{ row_id }}" and crashed on a lone "{%" inside dialogues
    text = "My code prints {{ row_id }} and {% if x %} — why?\n    indented line"
    rows = tmp_path / "tpl.jsonl"
    rows.write_text(
        json.dumps(
            {
                "rowId": "tpl-1",
                "messages": [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": "请提供完整的病历。"},
                ],
            },
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    with StubServer(scripted_responder({"tpl-1": [verdict("tpl-1")]})) as server:
        result = score(options(tmp_path, server, inputs=[rows]))
    assert result.report["totals"]["scored"] == 1
    sent = server.requests[0]["body"]["messages"][-1]["content"]
    assert text in sent


def test_a_key_quoted_back_by_the_provider_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # regression: a key read by litellm from OPENAI_API_KEY (not passed by us) was quoted in a
    # 401 message and stored verbatim in rows, reports and the terminal output (a 401 now
    # stops the run at once: CredentialsRefusedError, whose message quotes the provider's)
    from rubric_engine.engine import CredentialsRefusedError

    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    script = {
        row: [StubReply(status=401, content=f"Incorrect API key provided: {SENTINEL}")]
        for row in SCRIPT
    }
    with (
        StubServer(scripted_responder(script)) as server,
        pytest.raises(CredentialsRefusedError) as info,
    ):
        score(options(tmp_path, server, mode="record", concurrency=1))
    assert SENTINEL not in str(info.value) and "[redacted]" in str(info.value)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path


def test_stub_latency_is_served_to_concurrent_clients_in_parallel() -> None:
    """Throughput runs need the stub to wait out its latency per connection, not in a queue:
    a single-threaded server would take the 16 requests in one by one, 1 s apart."""
    import threading
    import urllib.request

    def ask(url: str, statuses: list[int]) -> None:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        req = urllib.request.Request(url, data=body.encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as response:
            statuses.append(response.status)

    with StubServer(lambda body: StubReply(content="{}"), latency_s=1.0) as server:
        statuses: list[int] = []
        url = server.base_url + "/chat/completions"
        threads = [threading.Thread(target=ask, args=(url, statuses)) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        arrivals = sorted(r["at"] for r in server.requests)
    assert statuses == [200] * 16
    assert arrivals[-1] - arrivals[0] < 0.8  # all 16 were in flight within one latency
