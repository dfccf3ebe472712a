"""Self-hosted judge units (docs/self-hosted-judge.md): re-ask wording, the timeout back-off, the
schema form fallback in replay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tenacity import RetryCallState

from rubric_engine.engine import score
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import ServerQuirks, StubServer, scripted_responder
from tests.test_judge_equivalence import ScriptBackend, reply, request, verdict
from tests.test_live import SCRIPT, options


@pytest.mark.parametrize("mode", ["json", "tools"])
def test_a_reask_is_plain_words_and_never_offers_an_unobservable_id(
    mode: str, mini_rubric: Any
) -> None:
    bad = verdict(unmetRequirementIds=["REFUND_CHECK"])
    good = verdict()
    script = (
        [reply(None, tool_arguments=bad), reply(None, tool_arguments=good)]
        if mode == "tools"
        else [reply(bad), reply(good)]
    )
    backend = ScriptBackend(script)
    judge = InstructorJudge(backend, mini_rubric, "openai/stub-judge", output_mode=mode)  # type: ignore[arg-type]
    outcome = asyncio.run(judge.judge(request(mini_rubric)))
    assert outcome.verdict is not None
    said = backend.seen[1]["messages"][-1]["content"]
    assert "'REFUND_CHECK' is not a requirement ID of this rubric" in said
    assert "REFUND_VERIFY" in said  # the valid choices are listed …
    assert "COMMON_CARD_SOURCE" not in said  # … but not one the prompt says never to list
    assert "http" not in said and "errors.pydantic.dev" not in said
    if mode == "tools":  # the same schema, with the enum, as the forced tool's parameters
        ids = backend.seen[0]["tools"][0]["function"]["parameters"]["properties"][
            "unmetRequirementIds"
        ]["items"]["enum"]
        assert "REFUND_VERIFY" in ids and "COMMON_CARD_SOURCE" not in ids


def test_a_retry_after_a_timeout_lets_the_server_finish() -> None:
    class Timeout(Exception):
        pass

    class Outcome:
        def exception(self) -> BaseException:
            return Timeout("timed out")

    state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.outcome = Outcome()  # type: ignore[assignment]
    state.attempt_number = 1
    policy = RetryPolicy(base_s=0.5, after_timeout_s=12.0)
    assert all(12.0 <= policy.wait(state) <= 12.5 for _ in range(20))
    assert RetryPolicy(base_s=0.5).wait(state) <= 0.5  # without it: the plain back-off


def test_a_schema_fallback_recorded_live_replays_with_the_same_form(tmp_path: Path) -> None:
    with StubServer(
        scripted_responder(SCRIPT), quirks=ServerQuirks(reject_json_schema=True)
    ) as server:
        recorded = score(
            options(tmp_path, server, mode="record", output_mode="schema", out=tmp_path / "r")
        )
    assert [r["body"]["response_format"]["type"] for r in server.requests].count("json_schema") == 1
    replayed = score(options(tmp_path, None, output_mode="schema", out=tmp_path / "p"))
    assert replayed.cassette_misses == []
    assert replayed.report["totals"] == recorded.report["totals"]
    with TaskStore(tmp_path / "store.sqlite") as store:
        form = store.task(replayed.task_id).extra["outputForm"]
    assert form["form"] == "json_object+schema" and form["refused"]["form"] == "json_schema"
    assert "cassette" in form["refused"]["error"]  # in replay: no entry for the refused form
    assert json.loads(recorded.files.json.read_text())["task"]["outputForm"]["form"] == (
        "json_object+schema"
    )


def test_over_long_rows_do_not_count_as_an_unreachable_judge(tmp_path: Path) -> None:
    """Three CONTEXT_EXCEEDED rows first do not stop the run (three TRANSPORT rows would)."""
    with StubServer(scripted_responder(SCRIPT), quirks=ServerQuirks(context_limit=50)) as server:
        result = score(options(tmp_path, server, concurrency=1))
    kinds = {
        r["error"]["kind"] for r in map(json.loads, result.files.rows.read_text().splitlines())
    }
    assert kinds == {"CONTEXT_EXCEEDED"}
    assert len(server.requests) == 4  # every row tried once, none retried


def test_resume_keeps_the_tasks_output_mode_and_prompt_shape(tmp_path: Path) -> None:
    from rubric_engine.engine import ScoreOptions
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.judge.retry import RetryPolicy

    with StubServer(scripted_responder(SCRIPT)) as server:
        first = score(
            options(
                tmp_path,
                server,
                output_mode="tools",
                system_as_user=True,
                max_calls=2,
                concurrency=1,
            )
        )
        assert first.stopped is not None
        before = len(server.requests)
        again = ScoreOptions(
            resume=first.task_id,
            store=tmp_path / "store.sqlite",
            retry=RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=0.05),
        )
        with pytest.raises(ConfigurationError, match="--output-mode"):
            score(ScoreOptions(**{**again.__dict__, "output_mode": "json"}))
        score(again)
    resumed = server.requests[before:]
    assert resumed and all("tools" in r["body"] for r in resumed)
    assert all(r["body"]["messages"][0]["role"] == "user" for r in resumed)


def test_a_row_missing_from_schema_cassettes_does_not_switch_the_form(tmp_path: Path) -> None:
    """Replay: the first row has no entry in any form; the rows recorded in the first form
    still replay (a miss is not a refusal)."""
    with StubServer(scripted_responder(SCRIPT)) as server:
        score(options(tmp_path, server, mode="record", output_mode="schema", out=tmp_path / "r"))
    cassette = next((tmp_path / "cassettes").rglob("*.jsonl"))
    lines = cassette.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if json.loads(line)["rowId"] != "unseen-5"]
    cassette.write_text("\n".join(kept) + "\n", encoding="utf-8")
    replayed = score(options(tmp_path, None, output_mode="schema", concurrency=1))
    assert [r.row_id for r in replayed.cassette_misses] == ["unseen-5"]
    assert replayed.report["totals"]["scored"] == 3
    assert replayed.report["task"]["outputForm"] == {"mode": "schema", "form": "json_schema"}


def test_after_a_timeout_the_retry_waits_for_the_server_to_finish(tmp_path: Path) -> None:
    from rubric_engine.judge.retry import RetryPolicy
    from rubric_engine.testing.openai_stub import StubReply

    slow_then_ok = dict(SCRIPT)
    slow_then_ok["unseen-5"] = [StubReply(content="{}", delay_s=1.0), SCRIPT["unseen-5"][0]]
    with StubServer(scripted_responder(slow_then_ok)) as server:
        result = score(
            options(
                tmp_path,
                server,
                timeout_s=0.4,
                concurrency=1,
                retry=RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=5.0),
            )
        )
    tries = [r["at"] for r in server.requests if "rowId: unseen-5" in json.dumps(r["body"])]
    assert len(tries) == 2
    assert tries[1] - tries[0] >= 0.4 + 0.4  # the timeout itself, then at least as long again
    assert result.report["totals"]["scored"] == 4
