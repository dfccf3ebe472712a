"""A judge on a self-hosted server (docs/self-hosted-judge.md), tried against the loopback
fake configured like llama.cpp's server with a small model (drops system messages, refuses
OpenAI's json_schema form with 500 but takes json_object + schema, a 16k context, one reply
that loops)."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import RubricNotDeliveredError, ScoreOptions, score
from rubric_engine.judge.server_checks import ContextLimitWarning, looping_unit
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import (
    ServerQuirks,
    StubReply,
    StubServer,
    scripted_responder,
)
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_live import SCRIPT, UNSEEN, options, rows_by_id

pytestmark = pytest.mark.live
LIKE_LLAMA_CPP = ServerQuirks(drop_system=True, reject_json_schema=True, context_limit=16384)
LOOP = "的的的" * 400  # one short unit repeated until the budget ran out


def rows_file(tmp_path: Path) -> Path:
    """The four unseen rows, one over-long row and one the model loops on."""
    lines = UNSEEN.read_text(encoding="utf-8").splitlines()
    long = {
        "rowId": "long-1",
        "messages": [
            {"role": "user", "content": "Please read my notes: " + "symptom notes " * 6000},
            {"role": "assistant", "content": "Please see a doctor."},
        ],
    }
    loops = json.loads(lines[0])
    loops["rowId"] = "loop-1"
    path = tmp_path / "rows.jsonl"
    path.write_text(
        "\n".join([*lines, json.dumps(long), json.dumps(loops, ensure_ascii=False)]) + "\n",
        encoding="utf-8",
    )
    return path


def script() -> dict[str, list[StubReply]]:
    out = dict(SCRIPT)
    out["loop-1"] = [StubReply(content=LOOP, finish_reason="length")]
    return out


def run(tmp_path: Path, server: StubServer, **extra: Any) -> Any:
    return score(options(tmp_path, server, inputs=[rows_file(tmp_path)], **extra))


def test_a_dropped_rubric_stops_the_run_with_the_likely_cause(tmp_path: Path) -> None:
    with (
        StubServer(scripted_responder(script()), quirks=LIKE_LLAMA_CPP) as server,
        pytest.raises(RubricNotDeliveredError) as info,
    ):
        run(tmp_path, server, concurrency=1)
    message = str(info.value)
    assert "drops system messages" in message and "--system-as-user" in message
    assert len(server.requests) == 1  # one clear stop, on the first answer
    with TaskStore(tmp_path / "store.sqlite") as store:
        assert store.task(info.value.task_id).state == "STOPPED"


def test_like_llama_cpp_with_system_as_user_and_schema_mode(tmp_path: Path) -> None:
    with (
        StubServer(scripted_responder(script()), quirks=LIKE_LLAMA_CPP) as server,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        result = run(
            tmp_path,
            server,
            system_as_user=True,
            output_mode="schema",
            max_context=16384,
            concurrency=3,
        )
    # before the first call: the over-long row is named, with its size and the limit
    sized = [w for w in caught if issubclass(w.category, ContextLimitWarning)]
    assert (
        len(sized) == 1 and "long-1" in str(sized[0].message) and "16384" in str(sized[0].message)
    )
    rows = rows_by_id(result.files.rows)
    # the batch went on: the four scripted rows are scored
    assert all(rows[r]["status"] == "SCORED" for r in SCRIPT)
    # the over-long row is its own kind, named with the server's own token count and the limit
    long = rows["long-1"]["error"]
    assert long["kind"] == "CONTEXT_EXCEEDED"
    assert "16384" in long["message"] and "tokens as the server counted" in long["message"]
    # the loop is classified and not asked again with a doubled budget
    loop = rows["loop-1"]["error"]
    assert loop["kind"] == "LOOPING" and "max_tokens=1024" in loop["message"]
    loop_calls = [r for r in server.requests if "rowId: loop-1" in json.dumps(r["body"])]
    assert [r["body"]["max_tokens"] for r in loop_calls] == [1024]
    # the json_schema form was refused once (500, not retried); every other call used the
    # json_object + schema form, and the task says so
    forms = [(r["body"].get("response_format") or {}).get("type") for r in server.requests]
    assert forms.count("json_schema") == 1 and forms[0] == "json_schema"
    assert set(forms[1:]) == {"json_object"}
    assert all("schema" in r["body"]["response_format"] for r in server.requests[1:])
    assert all([m["role"] for m in r["body"]["messages"]][:1] == ["user"] for r in server.requests)
    with TaskStore(tmp_path / "store.sqlite") as store:
        task = store.task(result.task_id)
    assert task.extra["outputForm"] == {
        "mode": "schema",
        "form": "json_object+schema",
        "refused": {"form": "json_schema", "error": task.extra["outputForm"]["refused"]["error"]},
    }
    assert "500" in task.extra["outputForm"]["refused"]["error"]
    assert task.judge_params["outputMode"] == "instructor/JSON_SCHEMA"
    markdown = result.files.markdown.read_text(encoding="utf-8")
    assert "output mode schema (json_object+schema; json_schema refused:" in markdown
    assert task.judge_params["systemAsUser"] is True
    # a CONTEXT_EXCEEDED row is not judged again by --resume (its options cannot change)
    from rubric_engine.engine import RETRIED_ON_RESUME

    assert "CONTEXT_EXCEEDED" not in RETRIED_ON_RESUME


def test_schema_mode_sends_the_enum_constrained_schema(tmp_path: Path) -> None:
    with StubServer(scripted_responder(SCRIPT)) as server:
        score(options(tmp_path, server, output_mode="schema"))
    body = server.requests[0]["body"]
    assert body["response_format"]["type"] == "json_schema"  # OpenAI's form, accepted here
    schema = body["response_format"]["json_schema"]["schema"]
    props = schema["properties"]
    assert "HEALTH_CONSULTATION" in props["intentKey"]["enum"]
    assert "MEDICAL_OVERREACH" in props["redFlagTypes"]["items"]["enum"]
    assert (props["score"]["minimum"], props["score"]["maximum"]) == (1, 5)
    ids = props["unmetRequirementIds"]["items"]["enum"]
    assert "INTENT_HEALTH_ON_TOPIC" in ids
    assert props["partialRequirementIds"]["items"]["enum"] == ids
    assert len(server.requests) == 5  # no fallback: the form was accepted


def test_tools_mode_forces_a_tool_call_with_the_same_schema(tmp_path: Path) -> None:
    def as_tool(reply: StubReply) -> StubReply:
        call = {"id": "c1", "type": "function"}
        call["function"] = {"name": "JudgeVerdict", "arguments": reply.content}  # type: ignore[assignment]
        return StubReply(content=None, tool_calls=[call])

    with StubServer(scripted_responder({k: [as_tool(v[-1])] for k, v in SCRIPT.items()})) as server:
        result = score(options(tmp_path, server, output_mode="tools"))
    body = server.requests[0]["body"]
    assert body["tool_choice"]["function"]["name"] == "JudgeVerdict"
    params = body["tools"][0]["function"]["parameters"]
    assert "INTENT_HEALTH_ON_TOPIC" in params["properties"]["unmetRequirementIds"]["items"]["enum"]
    assert result.report["totals"]["scored"] == 4


def test_default_mode_keys_are_unchanged_and_the_demo_replays(tmp_path: Path) -> None:
    """The demo cassettes were recorded with instructor's JSON mode: the default mode still
    makes exactly their keys, and a schema-mode replay (a different request) misses them."""
    demo = {
        "inputs": [CASES / "health_consult_zh.jsonl"],
        "rubric": RUBRICS / "health_cs.yaml",
        "draft": True,
        "cassettes": CASSETTES,
        "store": tmp_path / "s.sqlite",
    }
    replayed = score(ScoreOptions(**demo, out=tmp_path / "json"))
    assert replayed.cassette_misses == [] and replayed.report["totals"]["scored"] > 0
    # replay reports the recorded latency and says so; authored answers record none
    assert replayed.report["task"]["latency"] == "recorded"
    assert replayed.report["usage"]["latencyMsMean"] == 0
    schema = score(ScoreOptions(**demo, out=tmp_path / "schema", output_mode="schema"))
    assert schema.cassette_misses and "output mode differs" in str(
        schema.cassette_misses[0].error.message if schema.cassette_misses[0].error else ""
    )


def test_replay_reports_the_recorded_latency_and_the_endpoint_is_recorded(tmp_path: Path) -> None:
    with StubServer(scripted_responder(SCRIPT), latency_s=0.08) as server:
        live = score(options(tmp_path, server, mode="record", out=tmp_path / "rec"))
        base = server.base_url
    replayed = score(options(tmp_path, None, out=tmp_path / "rep"))
    assert live.report["usage"]["latencyMsMean"] >= 80
    assert replayed.report["usage"]["latencyMsMean"] == live.report["usage"]["latencyMsMean"]
    assert "recorded with the cassettes" in replayed.files.markdown.read_text(encoding="utf-8")
    entry = json.loads(next((tmp_path / "cassettes").rglob("*.jsonl")).read_text().splitlines()[0])
    host = base.rsplit("/", 1)[0]
    assert entry["provenance"]["endpoint"] == {"providerPrefix": "openai", "host": host}
    assert entry["provenance"]["model"] == "stub-judge"  # as the server reported it
    assert entry["provenance"]["requestedModel"] == "openai/stub-judge"


def test_a_looping_reply_is_told_from_a_long_one() -> None:
    assert looping_unit(LOOP) == "的"
    assert looping_unit('{"score": 3, "scoreExplanation": "' + "ab " * 100) in ("ab ", " ab", "b a")
    assert (
        looping_unit("A verdict that was simply long and ran out of room before the end.") is None
    )
    varied = " ".join(f"requirement {i} was met" for i in range(60))
    assert looping_unit(varied) is None


def test_the_provider_key_is_not_sent_to_a_self_hosted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-for-openai-only")
    monkeypatch.setenv("MY_SERVER_KEY", "server-key")
    with StubServer(scripted_responder(SCRIPT)) as server:
        score(options(tmp_path, server))
        score(options(tmp_path, server, api_key_env="MY_SERVER_KEY", out=tmp_path / "o2"))
    sent = [r["authSha256"] for r in server.requests]
    digest = {
        k: hashlib.sha256(f"Bearer {k}".encode()).hexdigest() for k in ("no-key", "server-key")
    }
    assert set(sent[:5]) == {digest["no-key"]}
    assert set(sent[5:]) == {digest["server-key"]}


def test_the_recorded_endpoint_never_holds_credentials() -> None:
    from rubric_engine.judge.endpoints import endpoint_kind

    found = endpoint_kind("hosted_vllm/gemma", "https://me:secret@gpu.example:8443/v1?key=x")
    assert found == {"providerPrefix": "hosted_vllm", "host": "https://gpu.example:8443"}
    assert endpoint_kind("openai/gpt-4o-mini", None)["host"] == "default"
