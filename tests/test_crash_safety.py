"""Nothing answered is lost: a SIGKILL while calls are still in flight keeps every
row the judge already answered, and the resume asks only for the rows that had no answer."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.store.task_store import COMMIT_INTERVAL_S, TaskStore
from rubric_engine.testing.openai_stub import (
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
    verdicts_responder,
)
from tests.conftest import CASES, ROOT, RUBRICS
from tests.test_cli import run

pytestmark = pytest.mark.live
ROWS = CASES / "health_consult_zh.jsonl"
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
ROW_IDS = [json.loads(line)["rowId"] for line in ROWS.read_text("utf-8").splitlines() if line]


class HangingJudge:
    """Answers the rows in ``fast`` at once and keeps every other request hanging; records
    which rows got an answer (sent back on the socket) and every row asked."""

    def __init__(self, fast: set[str]) -> None:
        self.fast = fast
        self.answered: list[str] = []
        self.asked: list[str] = []
        self.release = threading.Event()
        self._answer = verdicts_responder(VERDICTS)

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row_id = row_id_of(body) or ""
        self.asked.append(row_id)
        if row_id not in self.fast:
            self.release.wait(120)  # a provider that takes minutes
        reply = self._answer(body)
        self.answered.append(row_id)
        return reply


def test_sigkill_with_calls_in_flight_keeps_every_answered_row_and_resume_asks_only_the_rest(
    tmp_path: Path,
) -> None:
    # three workers hang on the first three rows; the fourth answers rows 4-16 quickly, then
    # hangs too. Before the commit clock, rows answered in the last 0.5 s before the calls
    # went quiet sat uncommitted until a later row finished, which never came: the SIGKILL
    # lost them and the resume paid for them again.
    store = tmp_path / "s.sqlite"
    fast = set(ROW_IDS[3:16])
    judge = HangingJudge(fast)
    with StubServer(judge) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rubric_engine.cli",
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
                str(tmp_path / "out"),
                "--concurrency",
                "4",
                "--max-reasks",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-test"},
        )
        try:
            deadline = time.monotonic() + 90
            while len(judge.answered) < len(fast) or len(judge.asked) < len(fast) + 4:
                assert time.monotonic() < deadline, process.stderr
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.01)
            # the answers are on the wire; give the engine their processing time and one tick
            time.sleep(COMMIT_INTERVAL_S + 1.5)
            in_flight = set(judge.asked) - set(judge.answered)
            assert len(in_flight) == 4, judge.asked
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
        with TaskStore(store) as opened:
            (task,) = opened.tasks()
            kept = {s.result.row_id for s in opened.rows(task.id)}
        assert kept == fast, f"answered but lost: {sorted(fast - kept)}"

        judge.fast = set(ROW_IDS)  # the provider is quick again
        judge.release.set()
        time.sleep(0.2)  # the hung requests of the killed run finish on their own
        asked_before = len(judge.asked)
        code, out = run(
            "score", "--resume", task.id, "--store", store, "--out", tmp_path / "resumed"
        )
        assert code == 0, out
        resumed = judge.asked[asked_before:]
    assert sorted(resumed) == sorted(set(ROW_IDS) - fast), "the resume asked for answered rows"
    with TaskStore(store) as opened:
        assert {s.result.row_id for s in opened.rows(task.id)} == set(ROW_IDS)
        assert opened.task(task.id).state == "COMPLETED"


def test_a_401_after_a_success_stops_the_run_at_once_and_the_rows_stay_resumable(
    tmp_path: Path,
) -> None:
    # before: a 401 is not retried, so every later row was sent and failed the same way,
    # and the run exited 0 with a report of JUDGE_ERROR rows
    state = {"status": 200, "sent_after_401": 0, "revoked": 0}
    answer = verdicts_responder(VERDICTS)

    def respond(body: dict[str, Any]) -> StubReply:
        if state["status"] == 401:
            state["sent_after_401"] += 1
            return StubReply(status=401, content="Invalid API key: key revoked")
        if row_id_of(body) == ROW_IDS[1] and not state["revoked"]:
            state["status"] = state["revoked"] = 401  # revoked after the first success
            return StubReply(status=401, content="Invalid API key: key revoked")
        return answer(body)

    store = tmp_path / "s.sqlite"
    with StubServer(respond) as server:
        code, out = run(
            "score", ROWS, "-r", RUBRICS / "health_cs.yaml", "--draft", "--mode", "live",
            "--api-base", server.base_url, "--model", "openai/stub-judge", "--store", store,
            "--out", tmp_path / "out", "--concurrency", "1", "--display", "none",
        )  # fmt: skip
        assert code == 8, out
        assert "refused the credentials (HTTP 401)" in out and "Invalid API key: key revoked" in out
        assert state["sent_after_401"] == 0, "rows were sent after the 401"
        with TaskStore(store) as opened:
            (task,) = opened.tasks()
            assert task.state == "STOPPED"
            kept = {s.result.row_id: s.result.status for s in opened.rows(task.id)}
        assert kept == {ROW_IDS[0]: "SCORED", ROW_IDS[1]: "JUDGE_ERROR"}
        state["status"] = 200  # a new key
        code, out = run("score", "--resume", task.id, "--store", store, "--display", "none")
        assert code == 0, out
    with TaskStore(store) as opened:
        assert all(s.result.status == "SCORED" for s in opened.rows(task.id))


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script or nohup start it


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_sigterm_is_handled_like_ctrl_c(tmp_path: Path, sigint: str) -> None:
    # what CI cancellation sends: before, the process died at once and the task stayed RUNNING;
    # started with SIGINT ignored, it ended the same way but printed ~80 lines of "Task
    # exception was never retrieved ... KeyboardInterrupt"
    store = tmp_path / "s.sqlite"
    answer = verdicts_responder(VERDICTS)

    def respond(body: dict[str, Any]) -> StubReply:
        reply = answer(body)
        reply.delay_s = 0.12
        return reply

    with StubServer(respond) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rubric_engine.cli",
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
                str(tmp_path / "out"),
                "--concurrency",
                "2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            preexec_fn=_ignore_sigint if sigint == "ignored" else None,
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        assert task.state == "INTERRUPTED"
        kept = list(opened.rows(task.id))
    assert f"interrupted: task {task.id} keeps" in err and "score --resume" in err
    assert "Traceback" not in err and "never retrieved" not in err, err
    assert 0 < len(kept) < 26


def test_after_ctrl_c_usage_calls_counts_every_request_the_provider_received(
    tmp_path: Path,
) -> None:
    # before: the calls of rows cut off in flight were in no row, so usage.calls was lower
    # than the requests the provider had received (and paid for)
    store = tmp_path / "s.sqlite"
    answer = verdicts_responder(VERDICTS)

    def respond(body: dict[str, Any]) -> StubReply:
        reply = answer(body)
        reply.delay_s = 0.3
        return reply

    with StubServer(respond) as server:
        args = [
            sys.executable, "-m", "rubric_engine.cli", "score", str(ROWS), "-r",
            str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "live", "--api-base",
            server.base_url, "--model", "openai/stub-judge", "--store", str(store),
            "--out", str(tmp_path / "out"), "--concurrency", "4",
        ]  # fmt: skip
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # several calls on the wire
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        received = len(server.requests)
    assert process.returncode == 130, err
    with TaskStore(store) as opened:
        (task,) = opened.tasks()
        in_rows = sum(s.calls for s in opened.rows(task.id))
    assert in_rows < received, "no call was cut off: the test proves nothing"
    code, out = run("report", task.id, "--store", store, "--format", "json")
    assert code == 0, out
    assert json.loads(out)["usage"]["calls"] == received


def test_sigterm_to_a_replay_started_with_sigint_ignored_ends_without_a_traceback(
    tmp_path: Path,
) -> None:
    # `score … &` in a script starts Python with SIGINT ignored, so asyncio set no handler on
    # it; SIGTERM's KeyboardInterrupt was raised inside a row's coroutine (a replay keeps
    # the loop busy) and ~80 lines of "Task exception was never retrieved" followed
    made = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "data", "--rows", "8000",
         "--out", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    data, store = tmp_path / "data" / "data-8000", tmp_path / "s.sqlite"
    process = subprocess.Popen(
        [sys.executable, "-m", "rubric_engine.cli", "score", str(data / "rows.jsonl"),
         "--cassettes", str(data / "cassettes"), "-r", str(RUBRICS / "health_cs.yaml"),
         "--draft", "--store", str(store), "--out", str(tmp_path / "out"), "--display", "none"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"}, preexec_fn=_ignore_sigint,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    stored = 0
    while stored < 200 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
        with (
            contextlib.suppress(sqlite3.Error),
            contextlib.closing(sqlite3.connect(store, timeout=1)) as db,
        ):
            stored = db.execute("SELECT count(*) FROM rows").fetchone()[0]
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "never retrieved" not in err, err
    assert "interrupted: task" in err and "score --resume" in err, err
