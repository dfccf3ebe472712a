"""Runs that survive real networks and real operators: resume after a kill, budgets, adaptive
concurrency under 429s, task locks and half-written cassette lines."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score, task_lock
from rubric_engine.judge.cassettes.cassette import CassetteWriter
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import (
    StubReply,
    StubServer,
    load_verdicts,
    scripted_responder,
    verdicts_responder,
)
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run

pytestmark = pytest.mark.live
ROWS = CASES / "health_consult_zh.jsonl"
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")


def slow(latency_s: float) -> Any:
    answer = verdicts_responder(VERDICTS)

    def respond(body: dict[str, Any]) -> StubReply:
        reply = answer(body)
        reply.delay_s = latency_s
        return reply

    return respond


def live_args(server: StubServer, store: Path, out: Path, *extra: str) -> list[str]:
    return [
        "score",
        str(ROWS),
        "-r",
        str(RUBRICS / "health_cs.yaml"),
        "--draft",
        "--mode",
        "live",
        "--api-base",
        server.base_url,
        "--model",
        "openai/stub-judge",
        "--store",
        str(store),
        "--out",
        str(out),
        *extra,
    ]


def stored(store: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        return task.id, {s.result.row_id: s.result.to_json_dict() for s in opened.rows(task.id)}


def opened_rows(store: Path) -> dict[str, dict[str, Any]]:
    return stored(store)[1]


def row_ids(requests: list[dict[str, Any]]) -> list[str]:
    from rubric_engine.testing.openai_stub import row_id_of

    return [row_id_of(r["body"]) or "" for r in requests]


def test_a_run_killed_at_a_random_moment_resumes_with_no_row_lost_or_scored_twice(
    tmp_path: Path,
) -> None:
    store, kill_after = tmp_path / "s.sqlite", random.Random().randint(2, 18)
    with StubServer(slow(0.12)) as server:
        env = {**os.environ, "NO_COLOR": "1"}
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rubric_engine.cli",
                *live_args(server, store, tmp_path / "out", "--concurrency", "2"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < kill_after and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        task_id, before = stored(store)
        # rows answered before the kill are committed within COMMIT_INTERVAL_S; none may be
        # when the kill comes within the first answers
        assert len(before) < 26, f"killed after {kill_after} requests"
        seen_before_resume = len(server.requests)

        code, out = run(
            "score",
            "--resume",
            task_id,
            "--store",
            store,
            "--out",
            tmp_path / "resumed",
            "--concurrency",
            "4",
        )
        assert code == 0, out
        resumed_rows = row_ids(server.requests[seen_before_resume:])
    _, after = stored(store)
    assert len(after) == 26 and all(r["status"] == "SCORED" for r in after.values())
    assert not set(resumed_rows) & set(before), "a row stored before the kill was judged again"
    assert len(resumed_rows) == len(set(resumed_rows)) == 26 - len(before)
    for row_id, result in before.items():
        assert after[row_id] == result
    with TaskStore(store) as opened:
        assert opened.task(task_id).state == "COMPLETED"
    lines = (tmp_path / "resumed" / "rows.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 26


def test_ctrl_c_marks_the_task_interrupted_keeps_its_rows_and_exits_130(tmp_path: Path) -> None:
    # score() runs score_async on its own event loop: Ctrl-C must still reach the run, mark
    # the task INTERRUPTED (not leave it RUNNING) and end with the CLI's 130 and its advice
    store = tmp_path / "s.sqlite"
    with StubServer(slow(0.12)) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rubric_engine.cli",
                *live_args(server, store, tmp_path / "out", "--concurrency", "2"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        task_id, rows = stored(store)
        assert f"interrupted: task {task_id} keeps {len(rows)} of 26 row(s)" in err
        assert "score --resume" in err
        with TaskStore(store) as opened:
            assert opened.task(task_id).state == "INTERRUPTED"
        assert 0 < len(rows) < 26 and all(r["status"] == "SCORED" for r in rows.values())
        # interrupted again while resuming: the count is still the task's, not this run's
        asked = len(server.requests)
        process = subprocess.Popen(
            [sys.executable, "-m", "rubric_engine.cli", "score", "--resume", task_id,
             "--store", str(store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        while len(server.requests) < asked + 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    _, now = stored(store)
    assert len(rows) < len(now) < 26
    assert f"interrupted: task {task_id} keeps {len(now)} of 26 row(s)" in err


def test_resume_refusals_say_what_to_do(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out = run(
        "score",
        ROWS,
        "-r",
        RUBRICS / "health_cs.yaml",
        "--draft",
        "--store",
        store,
        "--cassettes",
        CASSETTES,
        "--out",
        tmp_path / "o",
    )
    task_id = out.rsplit("task id: ", 1)[1].split()[0]
    code, out = run("score", "--resume", task_id, "--store", store)
    # a complete task is not an error to resume: it says so and writes its files again
    # (tests/test_report_files.py)
    assert code == 0 and f"task {task_id} was already complete: nothing was judged" in out
    code, out = run("score", ROWS, "--resume", task_id, "--store", store)
    assert code == 2 and "drop INPUT and --rubric" in out
    code, out = run("score", "--store", store)
    assert code == 2 and "give INPUT file(s) and --rubric KEY" in out
    code, out = run("score", "--resume", "nope", "--store", store)
    assert code == 2 and "task 'nope' not found" in out
    with task_lock(store, task_id):
        code, out = run("score", "--resume", task_id, "--store", store)
    assert code == 3 and "is being run by another rubric-eval process" in out


def test_resume_refuses_an_input_that_changed(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(ROWS.read_text("utf-8"), encoding="utf-8")
    store = tmp_path / "s.sqlite"
    with StubServer(slow(0.0)) as server:
        args = live_args(server, store, tmp_path / "o", "--max-calls", "3")
        args[1] = str(rows)
        code, out = run(*args)
        assert code == 6
        rows.write_text(rows.read_text("utf-8").replace("医生", "大夫"), encoding="utf-8")
        task_id, _ = stored(store)
        code, out = run("score", "--resume", task_id, "--store", store)
    assert code == 2 and "changed since task" in out and "same input file" in out


def test_a_call_budget_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with StubServer(slow(0.02)) as server:
        code, out = run(*live_args(server, store, tmp_path / "o", "--max-calls", "7"))
        assert code == 6
        assert "stopped: --max-calls 7 reached (7 call(s) made)" in out and "--resume" in out
        # a budget is one run's: the message says to give it again, not "a larger budget"
        assert "--max-calls N`: a budget holds for one run, not for the task" in out, out
        assert "without --max-calls the resume has no budget" in out
        assert len(server.requests) <= 7
        task_id, rows = stored(store)
        with TaskStore(store) as opened:
            task = opened.task(task_id)
        assert task.state == "STOPPED" and "max-calls 7" in task.extra["stopReason"]
        report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
        assert report["totals"]["rows"] == len(rows) <= 7
        code, out = run("score", "--resume", task_id, "--store", store, "--max-calls", "100")
        assert code == 0, out
        assert len(server.requests) == 26  # every row judged exactly once over both runs
    # the resumed run writes where the first one did
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert report["totals"]["rows"] == 26 and report["task"]["state"] == "COMPLETED"
    _, rows = stored(store)
    assert len(rows) == 26


def _asked_three_times() -> dict[str, list[StubReply]]:
    """Each row's script: two unusable answers (two re-asks), then its verdict."""
    return {
        row_id: [
            StubReply(content="not a verdict"),
            StubReply(content="still not a verdict"),
            StubReply(content=json.dumps(verdict, ensure_ascii=False)),
        ]
        for row_id, verdict in VERDICTS.items()
    }


def test_a_call_budget_is_never_overshot_by_re_asks(tmp_path: Path) -> None:
    """Every row is re-asked twice (two unusable answers, then its verdict): a budget that
    reserved one call per row in flight made 30 calls on --max-calls 10 with 8 rows at once.
    A call past the limit is not made; its row is stored as nothing, and --resume finishes
    it with the answers it already had."""
    store = tmp_path / "s.sqlite"
    with StubServer(scripted_responder(_asked_three_times())) as server:
        args = ["--max-calls", "10", "--concurrency", "8"]
        code, out = run(*live_args(server, store, tmp_path / "o", *args))
        assert code == 6, out
        assert len(server.requests) <= 10
        made = len(server.requests)
        assert f"stopped: --max-calls 10 reached ({made} call(s) made)" in out
        task_id, rows = stored(store)
        # a row is stored only once its verdict came: never a score or an error made up
        assert all(r["status"] == "SCORED" for r in rows.values()), rows
        assert len(rows) <= 3
        code, out = run("score", "--resume", task_id, "--store", store, "--max-calls", "20")
        assert code == 6, out
        assert len(server.requests) - made <= 20
        code, out = run("score", "--resume", task_id, "--store", store)
        assert code == 0, out
        # no answer was asked for twice: three calls a row over the three runs
        assert len(server.requests) == 3 * 26
    _, rows = stored(store)
    assert len(rows) == 26 and all(r["status"] == "SCORED" for r in rows.values())


def test_a_cost_budget_counts_re_asks_before_they_are_made(tmp_path: Path) -> None:
    """The same re-asked rows on --max-cost: each call goes out only while the spend plus the
    dearest call so far for each call on the wire stays within the limit."""
    with StubServer(scripted_responder(_asked_three_times())) as server:
        args = live_args(server, tmp_path / "s.sqlite", tmp_path / "o", "--max-cost", "0.003")
        args[args.index("openai/stub-judge")] = "openai/gpt-4o-mini"
        code, out = run(*args, "--concurrency", "8")
    assert code == 6, out
    spent, calls = (
        out.split("--max-cost 0.003 USD reached (", 1)[1]
        .split(" call(s)")[0]
        .split(" USD spent in ")
    )
    assert int(calls) == len(server.requests) and 0 < float(spent) <= 0.003


def test_a_cost_budget_needs_a_known_price_and_stops_on_it(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with StubServer(slow(0.0)) as server:
        code, out = run(*live_args(server, store, tmp_path / "o", "--max-cost", "0.01"))
        assert code == 2 and "--max-cost needs a model litellm knows the price of" in out
        code, out = run(*live_args(server, store, tmp_path / "o", "--max-cost", "nan"))
        assert code == 2 and "--max-cost nan is not valid" in out
        args = live_args(server, store, tmp_path / "o", "--max-cost", "0.003")
        args[args.index("openai/stub-judge")] = "openai/gpt-4o-mini"
        code, out = run(*args)
    assert code == 6 and "--max-cost 0.003 USD reached" in out
    assert "--max-cost USD`: a budget holds for one run" in out and "may spend" in out
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        spent = sum(s.cost_usd or 0 for s in opened.rows(task.id))
    # about 0.0006 USD a row: a handful of rows, never the whole batch of 26
    assert 0 < spent <= 0.003 * 1.2 and 2 < len(opened_rows(store)) < 10


def test_concurrency_shrinks_on_429_and_grows_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that serves 2 requests at a time for its first 30 answers, then 16.

    The server reads the run's limiter (how many calls the client has out), so the overlaps the
    assertions need happen however slowly a loaded machine sends the calls: an answer waits
    (at most 10 s) for the call the client has out beyond the server's capacity, and late, once
    the limiter lets 4 calls out, for all 4 to arrive; a fixed 50 ms alone missed them under load.
    """
    from rubric_engine.judge.limiter import AdaptiveLimit

    limiters: list[AdaptiveLimit] = []
    make_limit = AdaptiveLimit.__init__

    def recorded(self: AdaptiveLimit, maximum: int) -> None:
        make_limit(self, maximum)
        limiters.append(self)

    monkeypatch.setattr(AdaptiveLimit, "__init__", recorded)
    copies = {f"{k}#{c}": v | {"rowId": f"{k}#{c}"} for k, v in VERDICTS.items() for c in range(3)}
    answer = verdicts_responder(copies)
    lock = threading.Lock()
    state = {"active": 0, "answered": 0, "rejected": 0, "peak_late": 0}

    def calls_out() -> int:
        return limiters[-1].in_flight if limiters else 0

    def hold(until: Any) -> None:
        deadline = time.monotonic() + 10
        while not until() and time.monotonic() < deadline:
            time.sleep(0.002)

    def respond(body: dict[str, Any]) -> StubReply:
        with lock:
            late = state["answered"] >= 30
            capacity = 16 if late else 2
            if state["active"] >= capacity:
                state["rejected"] += 1
                return StubReply(
                    status=429, content="rate limited", headers={"Retry-After": "0.05"}
                )
            state["active"] += 1
            rejected_before = state["rejected"]
            if late:
                state["peak_late"] = max(state["peak_late"], state["active"])
        time.sleep(0.05)
        if late:
            hold(lambda: state["peak_late"] >= 4 or calls_out() < 4)
        else:
            hold(lambda: state["rejected"] > rejected_before or calls_out() <= capacity)
        with lock:
            state["active"] -= 1
            state["answered"] += 1
        return answer(body)

    many = tmp_path / "many.jsonl"
    rows = ROWS.read_text("utf-8").splitlines()
    with many.open("w", encoding="utf-8") as handle:
        for copy in range(3):
            for line in rows:
                row = json.loads(line)
                row["rowId"] = f"{row['rowId']}#{copy}"
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    with StubServer(respond) as server:
        result = score(
            ScoreOptions(
                inputs=[many],
                rubric=RUBRICS / "health_cs.yaml",
                draft=True,
                mode="live",
                model="openai/stub-judge",
                api_base=server.base_url,
                concurrency=8,
                store=tmp_path / "s.sqlite",
                out=tmp_path / "o",
            )
        )
    assert result.report["totals"]["scored"] == 78
    with TaskStore(tmp_path / "s.sqlite") as opened:
        limits = opened.task(result.task_id).extra["concurrency"]
    assert limits["max"] == 8 and limits["lowest"] <= 2  # shrank to what the server serves
    assert limits["rateLimited"] == state["rejected"] > 0
    assert state["rejected"] < 40  # without shrinking, 6 of 8 callers would hit 429 each round
    assert state["peak_late"] >= 4  # and grew back once the server had room
    assert limits["final"] == 8  # all the way: 48 late successes, no late 429


def test_a_half_written_cassette_line_is_skipped_and_cut_before_the_next_write(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "cassettes"
    (folder / "health_cs").mkdir(parents=True)
    source = CASSETTES / "health_cs" / "health_consult_zh.jsonl"
    target = folder / "health_cs" / "health_consult_zh.jsonl"
    lines = source.read_text("utf-8").splitlines(keepends=True)
    target.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    code, out = run("cassette", "check", folder)
    assert code == 0 and "25 entries" in out and "half-written last line skipped" in out
    code, out = run(
        "score",
        ROWS,
        "-r",
        RUBRICS / "health_cs.yaml",
        "--draft",
        "--cassettes",
        folder,
        "--store",
        tmp_path / "s.sqlite",
        "--out",
        tmp_path / "o",
    )
    assert code == 4 and "1 row(s) had no cassette entry" in out  # only the torn row
    CassetteWriter(target)  # a record run reopening the file
    assert target.read_text("utf-8") == "".join(lines[:-1])


def test_a_cassette_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes" / "x"
    folder.mkdir(parents=True)
    (folder / "c.jsonl").write_bytes(b'\xff\xfe{"a": 1}\n')
    code, out = run("cassette", "check", tmp_path / "cassettes")
    assert code == 2 and "c.jsonl:1: not UTF-8 text (byte 0)" in out


def test_resume_refuses_options_the_task_fixes_and_replay_cost_budgets(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out = run(
        "score", ROWS, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
        "--cassettes", CASSETTES, "--out", tmp_path / "o", "--max-calls", "3",
    )  # fmt: skip
    assert code == 6
    task_id = stored(store)[0]
    code, out = run(
        "score", "--resume", task_id, "--store", store, "--model", "openai/other",
        "--cassettes", tmp_path,
    )  # fmt: skip
    assert code == 2 and "drop --model, --cassettes" in out
    code, out = run("score", "--resume", task_id, "--store", store, "--max-cost", "1")
    assert code == 2 and "--max-cost is for --mode live or record" in out
    assert (tmp_path / "s.sqlite.locks").is_dir() and not (tmp_path / "locks").exists()
