"""Batch mode: the fake batch API, score --mode batch, kill -9 and resume, export and
import, budgets, live fallback, record mode and batch pricing.

Real sockets and real litellm against :mod:`rubric_engine.testing.batch_stub` on 127.0.0.1;
the must-shows of the issue at test scale (300 rows, 3 kills; the 20,000-row and 100,000-row
figures come from ``benchmarks/batch.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.batch.client import BatchClient
from rubric_engine.batch.ledger import Ledger
from rubric_engine.batch.lines import (
    custom_id,
    parse_custom_id,
    request_line,
    split_lines,
    task_hash,
)
from rubric_engine.batch.mode import BatchSettings
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.errors import InputError
from rubric_engine.judge.backends import LiveSettings
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.batch_stub import BatchStub, Delays, Fate, Limits
from rubric_engine.testing.openai_stub import (
    Responder,
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
    verdicts_responder,
)
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS
from tests.test_cli import run

pytestmark = pytest.mark.live
sys.path.insert(0, str(ROOT / "benchmarks"))
from replicate import write_rows  # noqa: E402

HEALTH = CASES / "health_consult_zh.jsonl"
FAST = RetryPolicy(max_attempts=4, base_s=0.01, max_wait_s=0.05)


def faulty(verdicts: dict[str, dict[str, Any]]) -> Responder:
    """Every 13th row's first answer names an unknown intent (valid once re-asked); stateless,
    so a live run and a batch run get the same answers."""
    answer = verdicts_responder(verdicts)

    def respond(body: dict[str, Any]) -> StubReply:
        k = int((row_id_of(body) or "x-0").rsplit("-", 1)[1])
        if k % 13 == 0 and len(body["messages"]) == 2:
            return StubReply(content='{"intentKey": "NO_SUCH_INTENT", "score": 3}')
        return answer(body)

    return respond


def expire_some(number: int, lines: int) -> Fate:
    return Fate("expired", lines // 2) if number in (2, 5) else Fate()


def rows_of(out: Path) -> list[str]:
    return (out / "rows.jsonl").read_text("utf-8").splitlines()


def report_core(out: Path) -> dict[str, Any]:
    """report.json without what differs by how calls were made (task identity, usage)."""
    report = json.loads((out / "report.json").read_text("utf-8"))
    return {k: v for k, v in report.items() if k not in ("task", "usage")}


def batch_options(rows: Path, stub: BatchStub, tmp: Path, name: str, **batch: Any) -> ScoreOptions:
    return ScoreOptions(
        inputs=[rows],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        mode="batch",
        api_base=stub.base_url,
        model="openai/gpt-4o-mini",
        store=tmp / f"{name}.sqlite",
        out=tmp / name,
        retry=FAST,
        batch=BatchSettings(poll_interval_s=0.02, **batch),
    )


# -- the fake -----------------------------------------------------------------------------------


def _lines(n: int, prefix: str = "c") -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "rowId: r-1\nhi"}]}
    return b"".join(request_line(f"{prefix}{i}", body) for i in range(n))


def test_the_fake_walks_the_states_expires_fails_and_logs_each_submission() -> None:
    answer = verdicts_responder({"r-1": {"intentKey": "X", "score": 4}})
    fates = {1: Fate(), 2: Fate("expired", 1), 3: Fate("failed")}
    now = [0.0]  # the fake's clock, stepped by hand: one state per poll, whatever the load
    with BatchStub(
        answer,
        fate=lambda n, _k: fates.get(n, Fate()),
        delays=Delays(validating_s=1, in_progress_s=1, finalizing_s=1),
        limits=Limits(max_requests=3),
        clock=lambda: now[0],
    ) as stub:
        client = BatchClient("openai", LiveSettings(api_base=stub.base_url, retry=FAST))

        async def walk(data: bytes) -> list[str]:
            file_id = await client.upload(io.BytesIO(data), "in.jsonl")
            status = await client.create(file_id, {"k": "v"})
            seen = [status.status]
            while status.status not in ("completed", "expired", "failed", "cancelled"):
                now[0] += 1
                status = await client.retrieve(status.batch_id)
                if status.status != seen[-1]:
                    seen.append(status.status)
            assert await client.find(file_id) == status
            return seen

        assert asyncio.run(walk(_lines(2))) == [
            "validating", "in_progress", "finalizing", "completed"
        ]  # fmt: skip
        assert asyncio.run(walk(_lines(2, "e"))) == ["validating", "in_progress", "expired"]
        assert asyncio.run(walk(_lines(2, "f"))) == ["validating", "failed"]
        assert asyncio.run(walk(_lines(4, "big")))[-1] == "failed"  # over max_requests

        expired = stub.batches["batch-stub-000002"]
        errors = stub.contents[expired.error_file_id or ""].decode().splitlines()
        assert [json.loads(e)["error"]["code"] for e in errors] == ["batch_expired"]
        assert expired.counts == {"total": 2, "completed": 1, "failed": 1}
        output = asyncio.run(client.content(stub.batches["batch-stub-000001"].output_file_id or ""))
        first = json.loads(output.splitlines()[0])
        assert first["custom_id"] == "c0" and first["response"]["status_code"] == 200
        assert len(stub.submissions) == 4 and stub.duplicate_custom_ids() == []
        cancelled = asyncio.run(client.cancel("batch-stub-000004"))
        assert cancelled.status == "failed"  # a failed batch stays failed


def test_a_line_answered_with_an_error_status_goes_to_the_error_file() -> None:
    def answer(body: dict[str, Any]) -> StubReply:
        return StubReply(status=500, content="overloaded")

    with BatchStub(answer) as stub:
        status, _ = stub.handle("POST", "/v1/files", {}, None, b"")
        assert status == 400  # not multipart
        stub._store_file(_lines(1), "x.jsonl", "batch")
        _, batch = stub.handle(
            "POST",
            "/v1/batches",
            {},
            "application/json",
            json.dumps(
                {"input_file_id": "file-stub-000001", "endpoint": "/v1/chat/completions"}
            ).encode(),
        )
        _, done = stub.handle("GET", f"/v1/batches/{batch['id']}", {}, None, b"")
        assert isinstance(done, dict) and done["status"] == "completed"
        assert done["request_counts"] == {"total": 1, "completed": 0, "failed": 1}
        line = json.loads(stub.contents[done["error_file_id"]])
        assert line["response"]["status_code"] == 500 and line["error"] is None


# -- lines --------------------------------------------------------------------------------------


def test_custom_ids_are_deterministic_per_row_and_attempt() -> None:
    task = "20261204-170957-2624d2"
    assert custom_id(12, 1, "medgpt-7", task) == custom_id(12, 1, "medgpt-7", task)
    assert len({custom_id(12, a, "medgpt-7", task) for a in range(3)}) == 3
    assert custom_id(12, 1, "medgpt-7", task) != custom_id(12, 1, "medgpt-7", task + "x")
    parsed = parse_custom_id(custom_id(12, 1, "medgpt-7", task))
    assert parsed is not None and (parsed.seq, parsed.attempt) == (12, 1)
    assert parsed.matches("medgpt-7") and not parsed.matches("medgpt-8")
    assert parsed.task_hash == task_hash(task)
    assert parse_custom_id("someone-else-42") is None
    old = parse_custom_id("r000012.a1.3f9c2e1b7a")  # an id exported before ids had a task
    assert old is not None and old.task_hash is None and old.seq == 12


def test_files_split_under_both_the_request_and_the_byte_limit() -> None:
    lines = [b"x" * 100 + b"\n"] * 10
    assert [len(c) for c in split_lines(lines, max_requests=4, max_bytes=10_000)] == [4, 4, 2]
    assert [len(c) for c in split_lines(lines, max_requests=100, max_bytes=303)] == [3, 3, 3, 1]
    with pytest.raises(InputError, match="over the 50-byte file limit"):
        list(split_lines(lines, max_bytes=50))


# -- score --mode batch -------------------------------------------------------------------------


def test_batch_mode_equals_a_live_run_over_the_same_answers(tmp_path: Path) -> None:
    replica = write_rows(tmp_path / "data", 300)
    respond = faulty(load_verdicts(replica.verdicts))
    with StubServer(respond) as live:
        score(
            ScoreOptions(
                inputs=[replica.rows],
                rubric=RUBRICS / "health_cs.yaml",
                draft=True,
                mode="live",
                api_base=live.base_url,
                model="openai/gpt-4o-mini",
                store=tmp_path / "live.sqlite",
                out=tmp_path / "live",
            )
        )
    events: list[str] = []
    with BatchStub(respond, fate=expire_some, delays=Delays(in_progress_s=0.05)) as stub:
        result = score(
            batch_options(replica.rows, stub, tmp_path, "batch", max_requests=70),
            on_event=events.append,
        )
    assert stub.duplicate_custom_ids() == []
    assert rows_of(tmp_path / "batch") == rows_of(tmp_path / "live")
    assert report_core(tmp_path / "batch") == report_core(tmp_path / "live")
    rows = [json.loads(line) for line in rows_of(tmp_path / "batch")]
    assert len(rows) == len({r["rowId"] for r in rows}) == 300
    assert all(r["status"] == "SCORED" for r in rows)
    reasked = [r for r in rows if any(w["code"] == "JUDGE_REASKED" for w in r["warnings"])]
    assert len(reasked) == len(range(0, 300, 13))  # every invalid first answer was re-asked
    submitted = stub.submitted_custom_ids()
    assert max(len(s["customIds"]) for s in stub.submissions) <= 70
    assert sum(1 for c in submitted if ".a1." in c) >= len(reasked)  # follow-up batches
    assert {stub.batches[b["batchId"]].status for b in stub.submissions} == {"completed", "expired"}
    assert any("expired" in e for e in events) and any("completed" in e for e in events)
    extra = result.report["task"]
    assert extra["judgeMode"] == "batch"


def as_asked(verdicts: dict[str, dict[str, Any]], bodies: list[dict[str, Any]]) -> Responder:
    """The verdicts, as a tool call when the request offers the verdict tool; every body kept."""
    answer = verdicts_responder(verdicts)

    def respond(body: dict[str, Any]) -> StubReply:
        bodies.append(body)
        reply = answer(body)
        if not body.get("tools"):
            return reply
        name = body["tools"][0]["function"]["name"]
        call = {"name": name, "arguments": reply.content}
        return StubReply(
            content="", tool_calls=[{"id": "c1", "type": "function", "function": call}]
        )

    return respond


@pytest.mark.parametrize("output_mode", ["tools", "schema"])
def test_batch_lines_ask_in_the_task_s_output_mode_and_prompt_shape(
    tmp_path: Path, output_mode: str
) -> None:
    # before, batch mode and `batch export` always asked in JSON mode with a system message,
    # while the task recorded --output-mode and --system-as-user
    replica = write_rows(tmp_path / "data", 30)
    verdicts = load_verdicts(replica.verdicts)
    shape = {"output_mode": output_mode, "system_as_user": True}
    live_bodies: list[dict[str, Any]] = []
    with StubServer(as_asked(verdicts, live_bodies)) as live:
        score(
            ScoreOptions(
                inputs=[replica.rows], rubric=RUBRICS / "health_cs.yaml", draft=True,
                mode="live", api_base=live.base_url, model="openai/gpt-4o-mini",
                store=tmp_path / "live.sqlite", out=tmp_path / "live", **shape,
            )
        )  # fmt: skip
    batch_bodies: list[dict[str, Any]] = []
    with BatchStub(as_asked(verdicts, batch_bodies)) as stub:
        options = replace(batch_options(replica.rows, stub, tmp_path, "batch"), **shape)
        result = score(options)
    assert rows_of(tmp_path / "batch") == rows_of(tmp_path / "live")
    strip = ("stream",)  # what the live transport adds that a batch line does not carry
    for bodies in (live_bodies, batch_bodies):
        assert len(bodies) == 30
        assert all(m["role"] != "system" for b in bodies for m in b["messages"])
    asked = {k for k in batch_bodies[0] if k not in strip}
    assert asked == {k for k in live_bodies[0] if k not in strip}
    assert ("tools" in asked) == (output_mode == "tools")
    assert ("response_format" in asked) == (output_mode == "schema")
    params = result.report["task"]["judgeParams"]
    recorded = {"tools": "instructor/TOOLS", "schema": "instructor/JSON_SCHEMA"}[output_mode]
    assert params["outputMode"] == recorded
    assert params["systemAsUser"] is True


def test_cost_is_priced_at_batch_rates(tmp_path: Path) -> None:
    import litellm

    info = litellm.get_model_info("openai/gpt-4o-mini")
    with BatchStub(verdicts_responder(load_verdicts(CASES / "verdicts" / "health_cs.jsonl"))) as s:
        score(batch_options(HEALTH, s, tmp_path, "b"))
    with TaskStore(tmp_path / "b.sqlite") as store:
        (task,) = store.tasks()
        rows = list(store.rows(task.id))
        assert task.extra["batch"]["costBasis"] == "batch"
    for row in rows:
        batch_price = (
            row.prompt_tokens * info["input_cost_per_token_batches"]
            + row.completion_tokens * info["output_cost_per_token_batches"]
        )
        live_price = (
            row.prompt_tokens * info["input_cost_per_token"]
            + row.completion_tokens * info["output_cost_per_token"]
        )
        assert row.cost_usd == pytest.approx(batch_price)
        assert row.cost_usd < live_price


def test_killed_three_times_resume_never_submits_twice_nor_loses_a_row(tmp_path: Path) -> None:
    replica = write_rows(tmp_path / "data", 300)
    respond = faulty(load_verdicts(replica.verdicts))
    store = tmp_path / "k.sqlite"
    rng = random.Random(15)
    env = {**os.environ, "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with BatchStub(respond, fate=expire_some, delays=Delays(in_progress_s=0.3)) as stub:
        first = [
            "score", str(replica.rows), "-r", str(RUBRICS / "health_cs.yaml"), "--draft",
            "--mode", "batch", "--api-base", stub.base_url, "--model", "openai/gpt-4o-mini",
            "--batch-max-requests", "60", "--batch-poll-interval", "0.02",
            "--store", str(store), "--out", str(tmp_path / "out"), "--display", "none",
        ]  # fmt: skip
        args, kills, finished = first, 0, False
        # each start is killed, finishes, or fails the test: at most 3 kills + 1 starts
        for start in range(4):
            if kills == 3 or finished:
                break
            stderr_path = tmp_path / f"start-{start}.stderr"
            with stderr_path.open("w", encoding="utf-8") as stderr:
                process = subprocess.Popen(
                    [sys.executable, "-m", "rubric_engine.cli", *args],
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    env=env,
                )
                target = len(stub.requests) + rng.randint(1, 5)
                deadline = time.monotonic() + 60
                while len(stub.requests) < target and process.poll() is None:
                    assert time.monotonic() < deadline, "no batch request for 60 s"
                    time.sleep(0.005)
                killed = process.poll() is None
                if killed:
                    process.send_signal(signal.SIGKILL)
                    kills += 1
                code = process.wait(30)
            finished = code == 0
            assert killed or finished, (
                f"start {start} ({' '.join(args[:2])}) exited {code} without being killed:\n"
                + stderr_path.read_text(encoding="utf-8")[-3000:]
            )
            with TaskStore(store) as opened:
                (task,) = opened.tasks()
            args = ["score", "--resume", task.id, "--store", str(store), "--display", "none"]
        assert kills == 3, "the run finished before the third kill"
        if not finished:
            code, out = run(*args)
            assert code == 0, out
    assert stub.duplicate_custom_ids() == []
    with TaskStore(store) as opened:
        assert opened.task(task.id).state == "COMPLETED"
        results = {s.result.row_id: s.result for s in opened.rows(task.id)}
        jobs = Ledger(opened).jobs(task.id)
    assert len(results) == 300 and all(r.status == "SCORED" for r in results.values())
    assert {j.state for j in jobs} == {"DOWNLOADED"}
    assert len(jobs) == len(stub.submissions)  # every batch the fake holds is in the ledger
    assert len(rows_of(tmp_path / "out")) == 300


def test_ctrl_c_says_the_submitted_batches_keep_running_at_the_provider(tmp_path: Path) -> None:
    """Ctrl-C printed 'keeps 0 of 26 row(s)' and no word of the batches the provider still
    runs, and bills, whatever the task does next."""
    store = tmp_path / "s.sqlite"
    respond = verdicts_responder(load_verdicts(CASES / "verdicts" / "health_cs.jsonl"))
    with BatchStub(respond, delays=Delays(in_progress_s=60)) as stub:
        process = subprocess.Popen(
            [sys.executable, "-m", "rubric_engine.cli", "score", str(HEALTH), "-r",
             str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "batch", "--api-base",
             stub.base_url, "--model", "openai/gpt-4o-mini", "--batch-max-requests", "10",
             "--batch-poll-interval", "0.05", "--store", str(store), "--out",
             str(tmp_path / "out"), "--display", "none"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(stub.submissions) < 3 and process.poll() is None:
            assert time.monotonic() < deadline, "no batch submitted for 60 s"
            time.sleep(0.01)
        time.sleep(0.3)  # the last submission recorded in the ledger
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        ids = [j.batch_id for j in Ledger(opened).jobs(task.id) if j.state == "SUBMITTED"]
    assert f"interrupted: task {task.id} keeps 0 of 26 row(s)" in err, err
    assert ids and f"{len(ids)} batch(es) submitted to the provider keep running there" in err
    assert "billed" in err and "cancel them at the provider" in err, err
    assert all(batch_id in err for batch_id in ids if batch_id), err


def test_a_crash_between_asking_for_a_batch_and_recording_it_adopts_that_batch(
    tmp_path: Path,
) -> None:
    """The window kill -9 rarely hits: the provider made the batch, the ledger says SUBMITTING."""
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    with BatchStub(verdicts_responder(verdicts)) as stub:
        options = batch_options(HEALTH, stub, tmp_path, "c", max_requests=10)
        score(replace_mode(options, max_calls=10))  # STOPPED after one batch of 10
        with TaskStore(options.store) as opened:
            (task,) = opened.tasks()
            ledger = Ledger(opened)
            (job,) = ledger.jobs(task.id)
            ledger.update(task.id, job.job_no, "SUBMITTING", batch_id=None)
        assert len(stub.submissions) == 1
        score(ScoreOptions(resume=task.id, store=options.store, retry=FAST))
    assert stub.duplicate_custom_ids() == []
    assert len(stub.submissions) == 3  # the adopted one, then 10 + 6 new requests
    assert len(rows_of(tmp_path / "c")) == 26


def replace_mode(options: ScoreOptions, **changes: Any) -> ScoreOptions:
    from dataclasses import replace

    return replace(options, **changes)


def test_budgets_apply_before_submitting(tmp_path: Path) -> None:
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    with BatchStub(verdicts_responder(verdicts)) as stub:
        result = score(replace_mode(batch_options(HEALTH, stub, tmp_path, "m"), max_calls=7))
        assert result.stopped and "--max-calls 7" in result.stopped
        assert sum(len(s["customIds"]) for s in stub.submissions) == 7
        assert result.report["totals"]["rows"] == 7
        cost = score(replace_mode(batch_options(HEALTH, stub, tmp_path, "c"), max_cost_usd=1e-3))
        assert cost.stopped and "--max-cost" in cost.stopped
        assert 0 < cost.report["totals"]["rows"] < 26


def test_batch_fallback_live_finishes_expired_requests_with_live_calls(tmp_path: Path) -> None:
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    answer = verdicts_responder(verdicts)
    with BatchStub(answer, fate=lambda n, k: Fate("expired", 5)) as stub:
        result = score(batch_options(HEALTH, stub, tmp_path, "f", fallback="live"))
        live_calls = [p for m, p in stub.requests if p.endswith("/chat/completions")]
    assert len(stub.submissions) == 1 and len(live_calls) == 21
    assert result.report["totals"]["scored"] == 26
    with TaskStore(tmp_path / "f.sqlite") as opened:
        assert opened.tasks()[0].extra["batch"]["liveFallbackCalls"] == 21


def test_record_mode_in_batch_writes_cassettes_that_replay_to_the_same_rows(
    tmp_path: Path,
) -> None:
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    with BatchStub(verdicts_responder(verdicts)) as stub:
        options = replace_mode(
            batch_options(HEALTH, stub, tmp_path, "rec", record=True),
            cassettes=tmp_path / "cass",
        )
        score(options)
    entries = [
        json.loads(line)
        for line in (tmp_path / "cass" / "health_cs" / "health_consult_zh.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]
    assert len(entries) == 26 and {e["provenance"]["kind"] for e in entries} == {"recorded"}
    score(
        ScoreOptions(
            inputs=[HEALTH],
            rubric=RUBRICS / "health_cs.yaml",
            draft=True,
            model="openai/gpt-4o-mini",
            cassettes=tmp_path / "cass",
            store=tmp_path / "replay.sqlite",
            out=tmp_path / "replay",
        )
    )
    assert rows_of(tmp_path / "replay") == rows_of(tmp_path / "rec")


# -- export / import ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "pack", "shape"),
    [
        (HEALTH, "health_cs", ()),
        (CASES / "airline_tau2_dev.json", "airline_cs", ()),
        # the rubric inside the first user message: every line, follow-ups included, is asked so
        (HEALTH, "health_cs", ("--system-as-user",)),
    ],
)
def test_export_answer_import_gives_the_replay_rows(
    tmp_path: Path, rows: Path, pack: str, shape: tuple[str, ...]
) -> None:
    store = tmp_path / "s.sqlite"
    code, out = run("score", rows, "-r", RUBRICS / f"{pack}.yaml", "--draft", "--store", store,
                    "--out", tmp_path / "replay")  # fmt: skip
    assert code in (0, 4), out
    code, out = run("batch", "export", rows, "-r", RUBRICS / f"{pack}.yaml", "--draft",
                    "--store", store, "--out", tmp_path / "x", "--report-out", tmp_path / "imp",
                    "--batch-max-requests", "7", *shape)  # fmt: skip
    assert code == 0, out
    manifest = json.loads((tmp_path / "x" / "manifest.json").read_text("utf-8"))
    task_id, round_no = manifest["taskId"], 0
    while True:
        round_no += 1
        answered = tmp_path / f"results-{round_no}.jsonl"
        with answered.open("w", encoding="utf-8") as handle:
            for request in sorted((tmp_path / "x").glob("requests-*.jsonl")):
                roles = {m["role"] for line in request.read_text("utf-8").splitlines()
                         for m in json.loads(line)["body"]["messages"]}  # fmt: skip
                assert ("system" in roles) == (not shape), roles
                done = subprocess.run(
                    [sys.executable, str(ROOT / "scripts" / "answer_batch.py"), str(request),
                     "--cassettes", str(CASSETTES)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                handle.write(done.stdout)
        code, out = run("batch", "import", task_id, answered, "--store", store)
        assert code == 0, out
        if "COMPLETED" in out:
            break
        assert round_no < 4, out
        for old in (tmp_path / "x").glob("requests-*.jsonl"):
            old.unlink()
        code, out = run("batch", "export", task_id, "--store", store, "--out", tmp_path / "x")
        assert code == 0, out
    assert rows_of(tmp_path / "imp") == rows_of(tmp_path / "replay")


def _answered(folder: Path, into: Path) -> list[str]:
    """Every request file of ``folder`` answered from the cassettes: the output lines."""
    lines: list[str] = []
    for request in sorted(folder.glob("requests-*.jsonl")):
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "answer_batch.py"), str(request),
             "--cassettes", str(CASSETTES)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        lines += done.stdout.splitlines(keepends=True)
    into.write_text("".join(lines), encoding="utf-8")
    return lines


@pytest.mark.parametrize("export_between", [False, True])
def test_answers_imported_from_two_files_are_all_used(tmp_path: Path, export_between: bool) -> None:
    """The results of one export split 20 + 6: after the first import the 6 requests were
    asked again as retries with the same bodies, and the second file's answers were ignored
    as foreign. They are taken now (with or without a follow-up export between the two), and
    importing a file again says its lines are already imported."""
    store = tmp_path / "s.sqlite"
    code, out = run("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store",
                    store, "--out", tmp_path / "replay")  # fmt: skip
    code, out = run("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
                    "--store", store, "--out", tmp_path / "x", "--report-out",
                    tmp_path / "imp")  # fmt: skip
    assert code == 0, out
    task_id = json.loads((tmp_path / "x" / "manifest.json").read_text("utf-8"))["taskId"]
    lines = _answered(tmp_path / "x", tmp_path / "all.jsonl")
    assert len(lines) == 26
    part1, part2 = tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"
    part1.write_text("".join(lines[:20]), encoding="utf-8")
    part2.write_text("".join(lines[20:]), encoding="utf-8")
    code, out = run("batch", "import", task_id, part1, "--store", store)
    assert code == 0 and "matched 20 result(s)" in out, out
    code, out = run("batch", "import", task_id, part1, "--store", store)
    assert code == 0, out
    assert "20 line(s) already imported" in out and "ignored 0 foreign line(s)" in out, out
    if export_between:  # the 6 rows' retries are written (same bodies, .a1)
        for old in (tmp_path / "x").glob("requests-*.jsonl"):
            old.unlink()
        code, out = run("batch", "export", task_id, "--store", store, "--out", tmp_path / "x")
        assert code == 0, out
    code, out = run("batch", "import", task_id, part2, "--store", store)
    assert code == 0 and "matched 6 result(s)" in out and "ignored 0 foreign" in out, out
    round_no = 0
    while "COMPLETED" not in out:  # the re-asks the answers need, as any import
        round_no += 1
        assert round_no < 4, out
        for old in (tmp_path / "x").glob("requests-*.jsonl"):
            old.unlink()
        code, out = run("batch", "export", task_id, "--store", store, "--out", tmp_path / "x")
        assert code == 0, out
        answered = tmp_path / f"results-{round_no}.jsonl"
        _answered(tmp_path / "x", answered)
        code, out = run("batch", "import", task_id, answered, "--store", store)
        assert code == 0, out
    assert rows_of(tmp_path / "imp") == rows_of(tmp_path / "replay")


def test_a_job_s_requests_are_found_by_the_job_not_by_reading_every_request(
    tmp_path: Path,
) -> None:
    """What import and ``--mode batch`` ask of one job (its requests, how many are answered,
    an error for the unanswered) goes through the ``batch_requests_by_job`` index: a scan of
    every request of the store per job made an import of N rows grow with N²."""
    store = tmp_path / "s.sqlite"
    code, out = run("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
                    "--store", store, "--out", tmp_path / "x",
                    "--batch-max-requests", "7")  # fmt: skip
    assert code == 0, out
    task_id = json.loads((tmp_path / "x" / "manifest.json").read_text("utf-8"))["taskId"]
    with TaskStore(store) as opened:
        ledger, ran = Ledger(opened), []
        opened.backend.connection.set_trace_callback(ran.append)
        assert len(ledger.job_requests(task_id, 2)) == 7
        assert ledger.answered_count(task_id, [1, 2]) == 0
        ledger.close_job(task_id, 2, "no answer", "DOWNLOADED")
        assert ledger.answered_count(task_id, [1, 2, 4]) == 7  # job 2's 7 have an error now
        opened.backend.connection.set_trace_callback(None)
        by_job = [sql for sql in ran if "batch_requests" in sql and "job_no=" in sql]
        plans = {
            sql: [str(step[3]) for step in opened.backend.execute("EXPLAIN QUERY PLAN " + sql)]
            for sql in by_job
        }
        opened.backend.rollback()
    assert len(by_job) == 7, ran
    for sql, plan in plans.items():
        assert any("batch_requests_by_job" in step for step in plan), (sql, plan)


def test_export_never_overwrites_another_task_s_export(tmp_path: Path) -> None:
    store, folder = tmp_path / "s.sqlite", tmp_path / "x"
    export = ("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
              "--store", store)  # fmt: skip
    code, out = run(*export, "--out", folder)
    assert code == 0, out
    first = json.loads((folder / "manifest.json").read_text("utf-8"))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    code, out = run(*export, "--out", folder)  # a second task into the same folder
    assert code == 2 and f"already holds task {first['taskId']}'s batch export" in out, out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with TaskStore(store) as s:
        assert [t.id for t in s.tasks()] == [first["taskId"]]  # the refused export made no task
    (folder / "manifest.json").unlink()  # request files alone are still someone's
    code, out = run(*export, "--out", folder)
    assert code == 2 and "already holds another batch export" in out, out
    (tmp_path / "z" / "manifest.json").mkdir(parents=True)  # was IsADirectoryError, a task left
    code, out = run(*export, "--out", tmp_path / "z")
    assert code == 2 and "already holds another batch export" in out, out
    # a follow-up export of the task: what it was exported with is the task's own
    task = first["taskId"]
    code, out = run("batch", "export", task, "--store", store, "--out", tmp_path / "y",
                    "--output-mode", "tools", "--system-as-user")  # fmt: skip
    assert code == 2 and "--output-mode, --system-as-user: task" in out, out
    # the options that shape a new task were ignored without a word; typed at their default
    # value too, since it cannot be told from a choice
    code, out = run("batch", "export", task, "--store", store, "--out", tmp_path / "y",
                    "--model", "openai/gpt-4o-mini", "--temperature", "0.5", "--max-reasks", "1",
                    "--input-format", "jsonl", "--max-tokens", "64")  # fmt: skip
    named = "--model, --input-format, --max-reasks, --temperature, --max-tokens: task"
    assert code == 2 and named in out and "omit" in out, out
    code, out = run("batch", "export", task, "--store", store, "--out", tmp_path / "y")
    assert code == 0 and "wrote 0 request(s)" in out, out
    assert f"{first['requests']} request(s) exported before still await answers" in out, out
    code, out = run("tasks", "--store", store)  # was a bare STOPPED, like a budget stop
    assert code == 0 and "STOPPED (waiting for `rubric-eval batch import`)" in out, out


def test_import_refuses_a_task_that_export_did_not_make(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, _ = run("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
                  "--out", tmp_path / "o")  # fmt: skip
    with TaskStore(store) as opened:
        task_id = opened.tasks()[0].id
    results = tmp_path / "r.jsonl"
    results.write_text("", encoding="utf-8")
    code, out = run("batch", "import", task_id, results, "--store", store)
    assert code == 2 and "not made by `rubric-eval batch export`" in out


def test_import_refuses_another_task_s_results(tmp_path: Path) -> None:
    # two exports of one input: their request ids repeated, so task B took task A's answers
    # (of another model even) and credited its own model with them
    store = tmp_path / "s.sqlite"
    export = ("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
              "--store", store)  # fmt: skip
    code, out = run(*export, "--out", tmp_path / "a", "--report-out", tmp_path / "ra")
    assert code == 0, out
    code, out = run(*export, "--out", tmp_path / "b", "--report-out", tmp_path / "rb",
                    "--model", "openai/gpt-4o")  # fmt: skip
    assert code == 0, out
    task_a = json.loads((tmp_path / "a" / "manifest.json").read_text("utf-8"))["taskId"]
    task_b = json.loads((tmp_path / "b" / "manifest.json").read_text("utf-8"))["taskId"]
    answered = tmp_path / "results-a.jsonl"
    for request in sorted((tmp_path / "a").glob("requests-*.jsonl")):
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "answer_batch.py"), str(request),
             "--cassettes", str(CASSETTES)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        with answered.open("a", encoding="utf-8") as handle:
            handle.write(done.stdout)
    code, out = run("batch", "import", task_b, answered, "--store", store)
    assert code == 2, out
    assert f"{answered}:1" in out and f"task {task_a}" in out and f"not of task {task_b}" in out
    with TaskStore(store) as s:
        assert s.row_outcomes(task_b) == {}
    code, out = run("batch", "import", task_a, answered, "--store", store)
    assert code == 0 and "COMPLETED" in out, out


def test_errored_truncated_and_refused_lines_end_as_live_ends_them(tmp_path: Path) -> None:
    """An errored line is sent again in follow-up batches up to the retry policy's attempts,
    then TRANSPORT; a truncated one is asked again with twice the room; a refusal is REFUSED
    at once. None is ever scored from the bad answer."""
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    answer = verdicts_responder(verdicts)
    errored, truncated, refused = sorted(verdicts)[:3]

    def respond(body: dict[str, Any]) -> StubReply:
        row = row_id_of(body)
        if row == errored:
            return StubReply(status=500, content="overloaded")
        if row == truncated and body["max_tokens"] == 1024:
            return StubReply(content='{"intentKey": "', finish_reason="length")
        if row == refused:
            return StubReply(content=None, refusal="I can't help with that.")
        return answer(body)

    with BatchStub(respond) as stub:
        result = score(batch_options(HEALTH, stub, tmp_path, "e"))
        sent = {
            json.loads(line)["custom_id"]: json.loads(line)["body"]
            for s in stub.submissions
            for line in stub.contents[s["inputFileId"]].splitlines()
        }
    rows = {json.loads(r)["rowId"]: json.loads(r) for r in rows_of(tmp_path / "e")}
    assert rows[errored]["status"] == "JUDGE_ERROR"
    assert rows[errored]["error"]["kind"] == "TRANSPORT"
    assert "500" in rows[errored]["error"]["message"]
    by_row: dict[str, list[tuple[int, int]]] = {}
    for cid, body in sent.items():
        parsed = parse_custom_id(cid)
        assert parsed is not None
        by_row.setdefault(row_id_of(body) or "", []).append((parsed.attempt, body["max_tokens"]))
    # errored: a0 … a3, each in its own batch, then TRANSPORT
    assert sorted(by_row[errored]) == [(a, 1024) for a in range(FAST.max_attempts)]
    assert rows[truncated]["status"] == "SCORED"
    assert sorted(by_row[truncated]) == [(0, 1024), (1, 2048)]
    assert rows[refused]["error"]["kind"] == "REFUSED"
    assert by_row[refused] == [(0, 1024)]
    assert result.report["totals"]["scored"] == 24
    assert stub.duplicate_custom_ids() == []


def test_batch_mode_and_its_ledger_on_both_stores(tmp_path: Path, store_at: str) -> None:
    """The ledger is migration m007 on SQLite and PostgreSQL alike: a run stopped by a budget
    after its first batch resumes from the ledger and submits nothing twice."""
    from dataclasses import replace

    from rubric_engine.store.location import parse_location

    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    with BatchStub(verdicts_responder(verdicts)) as stub:
        options = replace(
            batch_options(HEALTH, stub, tmp_path, "pg", max_requests=10),
            store=parse_location(store_at),
        )
        first = score(replace(options, max_calls=10))
        assert first.stopped and len(stub.submissions) == 1
        score(ScoreOptions(resume=first.task_id, store=options.store, retry=FAST))
    assert stub.duplicate_custom_ids() == []
    assert sum(len(s["customIds"]) for s in stub.submissions) == 26
    with TaskStore(options.store) as opened:
        jobs = Ledger(opened).jobs(first.task_id)
        assert [j.state for j in jobs] == ["DOWNLOADED"] * 3
        assert len(list(opened.rows(first.task_id))) == 26


class RefusingStub(BatchStub):
    """The batch fake, but its files endpoint refuses the credentials (HTTP 401)."""

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], kind: str | None, raw: bytes
    ) -> tuple[int, dict[str, Any] | bytes]:
        if method == "POST" and path.rstrip("/").endswith("/files"):
            return 401, {"error": {"message": "Incorrect API key provided", "type": "auth"}}
        return super().handle(method, path, query, kind, raw)


def test_refused_credentials_stop_a_batch_run_at_once_and_it_stays_resumable(
    tmp_path: Path,
) -> None:
    from rubric_engine.engine.run import CredentialsRefusedError
    from rubric_engine.store.task_state import TaskState

    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    with RefusingStub(verdicts_responder(verdicts)) as stub:
        with pytest.raises(CredentialsRefusedError, match="HTTP 401") as refused:
            score(batch_options(HEALTH, stub, tmp_path, "r"))
        uploads = [p for m, p in stub.requests if m == "POST" and p.endswith("/files")]
    assert len(uploads) == 1  # a 401 is not retried
    assert stub.submissions == []
    assert "--resume" in str(refused.value)
    with TaskStore(tmp_path / "r.sqlite") as opened:
        task = opened.tasks()[0]
    assert task.state == TaskState.STOPPED
    assert task.extra["stopReason"] == "the provider refused the credentials"


def test_export_of_new_rows_words_its_own_option_errors(tmp_path: Path) -> None:
    # score's checks spoke of --resume and --judge none, which batch export lacks, and told
    # a user of batch export to "write the requests with `rubric-eval batch export`"
    store, out = tmp_path / "s.sqlite", tmp_path / "x"
    code, printed = run("batch", "export", HEALTH, "--store", store, "--out", out)
    assert code == 2 and "give INPUT file(s) and -r/--rubric KEY" in printed, printed
    assert "--resume" not in printed and "--judge none" not in printed, printed
    code, printed = run("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
                        "--model", "gpt-4o-mini", "--store", store, "--out", out)  # fmt: skip
    assert code == 2 and "e.g. --model openai/gpt-4o-mini" in printed, printed
    assert "write the requests with" not in printed, printed
    assert not out.exists() or not any(out.iterdir())


def test_requests_over_the_byte_limit_are_each_written_alone_with_a_warning(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite"
    export = ("batch", "export", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
              "--store", store)  # fmt: skip
    code, out = run(*export, "--out", tmp_path / "x", "--batch-max-bytes", "1024")
    assert code == 0, out  # was written without a word: 26 files of ~25 KB under a 1 KB limit
    files = sorted((tmp_path / "x").glob("requests-*.jsonl"))
    assert all(len(f.read_text("utf-8").splitlines()) == 1 for f in files), "one request each"
    largest = max(f.stat().st_size for f in files)
    assert f"warning: {len(files)} request(s) are larger than the 1,024-byte file limit" in out
    assert f"(largest {largest:,} bytes; row(s) " in out and "raise --batch-max-bytes" in out
    code, out = run(*export, "--out", tmp_path / "y", "--batch-max-bytes", str(3 * largest))
    assert code == 0 and "warning" not in out, out
    assert len(list((tmp_path / "y").glob("requests-*.jsonl"))) < len(files)


def test_judge_when_is_refused_in_batch_mode(tmp_path: Path) -> None:
    """The batch run writes a request for every row, so --judge-when would have been ignored
    and every row paid for: refused before anything is sent."""
    from rubric_engine.errors import ConfigurationError

    options = ScoreOptions(
        inputs=[CASES / "health_consult_zh.jsonl"],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        mode="batch",
        model="openai/gpt-4o-mini",
        judge_when="tier=gold",
        store=tmp_path / "s.sqlite",
        out=tmp_path / "o",
    )
    with pytest.raises(ConfigurationError, match="--judge-when is not applied by --mode batch"):
        score(options)
    assert not (tmp_path / "o").exists()
