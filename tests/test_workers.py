"""Many workers on one PostgreSQL task: queue, claim, lease, fenced write."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rubric_engine.store.location import PostgresUrl
from rubric_engine.store.task_store import StoredRow, TaskStore, row_write
from rubric_engine.store.work_queue import WorkQueue, work_stats
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run
from tests.test_store_backends import _mask, read_files, score_demo

HEALTH = CASES / "health_consult_zh.jsonl"


def queue(store: str, *extra: object) -> tuple[int, str]:
    return run(
        "score", HEALTH, "-r", "health_cs", "--store", store, "--cassettes", CASSETTES,
        "--workers-only", *extra,
    )  # fmt: skip


def queued_task(pg_url: str, tmp_path: Path) -> str:
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    assert code == 0, out
    code, out = queue(pg_url, "--out", tmp_path / "out")
    assert code == 0 and "26 row(s) queued for workers" in out, out
    return out.rsplit("task id: ", 1)[1].split()[0]


def test_workers_only_queues_without_judging_and_a_worker_completes_the_task(
    tmp_path: Path, pg_url: str
) -> None:
    task = queued_task(pg_url, tmp_path)
    with TaskStore(pg_url) as store:
        assert store.task(task).state == "QUEUED" and store.finished_rows() == {}
    code, out = run("work", task, "--store", pg_url, "--cassettes", CASSETTES)
    assert code == 0 and "stored 26 row(s)" in out and "COMPLETED" in out, out
    code, out = run("report", task, "--store", pg_url, "--out", tmp_path / "workers")
    assert code == 0, out
    # the same batch scored by one process into SQLite: the same report files
    alone = score_demo(
        tmp_path / "s.sqlite", "health_consult_zh.jsonl", "health_cs", tmp_path / "one"
    )
    for name in ("report.json", "report.md", "rows.jsonl"):
        ours = _mask(read_files(tmp_path / "workers")[name], task)
        assert ours == _mask(read_files(tmp_path / "one")[name], alone), name
    with TaskStore(pg_url) as store:
        assert work_stats(store, task) == {"rows": 26, "done": 26, "claims": 26, "claimedTwice": 0}


def test_work_takes_a_task_s_name_as_every_other_command_does(tmp_path: Path, pg_url: str) -> None:
    """Newcomer finding: `rubric-eval work pgw` said "task 'pgw' not found" while `tasks`
    listed the queued task named pgw. work takes an id, a name or tag:TAG, as report does."""
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    assert code == 0, out
    code, out = queue(pg_url, "--name", "pgw", "--out", tmp_path / "out")
    assert code == 0, out
    task = out.rsplit("task id: ", 1)[1].split()[0]
    # the hint names the store (it said a literal `--store URL`), a password as ***
    assert f"`rubric-eval work {task} --store {PostgresUrl(pg_url)}`" in out, out
    code, out = run("work", "pgw", "--store", pg_url, "--cassettes", CASSETTES)
    assert code == 0 and "stored 26 row(s)" in out and f"task {task} COMPLETED" in out, out


def test_queueing_a_live_task_needs_no_key_and_writes_no_report_folder(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the workers bring the credentials and anyone writes the report later: the machine
    # that queues checks neither (score's own plan, fresh_plan(judged_here=False))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    assert code == 0, out
    code, out = queue(pg_url, "--mode", "live", "--out", tmp_path / "out")
    assert code == 0 and "26 row(s) queued for workers" in out, out
    assert not (tmp_path / "out").exists()
    # the worker is where the key is checked, before it claims a row
    task = out.rsplit("task id: ", 1)[1].split()[0]
    code, out = run("work", task, "--store", pg_url)
    assert code == 2 and "OPENAI_API_KEY" in out, out
    with TaskStore(pg_url) as store:
        assert work_stats(store, task)["claims"] == 0


def test_workers_only_needs_a_postgres_store(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    code, out = queue(str(store))
    assert code == 3 and "--workers-only needs a PostgreSQL store" in out


def test_a_late_worker_cannot_overwrite_a_row_another_worker_took_over(
    tmp_path: Path, pg_url: str
) -> None:
    task = queued_task(pg_url, tmp_path)
    # a finished row to write (any stored row will do: the one a replayed score stored)
    alone = score_demo(
        tmp_path / "s.sqlite", "health_consult_zh.jsonl", "health_cs", tmp_path / "o"
    )
    with TaskStore(tmp_path / "s.sqlite") as sqlite_store:
        first: StoredRow = next(sqlite_store.rows(alone))
    with TaskStore(pg_url) as a_store, TaskStore(pg_url) as b_store:
        a = WorkQueue(a_store, task, "a", lease_s=0.3)
        b = WorkQueue(b_store, task, "b", lease_s=30)
        (claim_a,) = a.claim(1)
        assert claim_a.seq == 0 and claim_a.token == 1
        assert [c.seq for c in b.claim(1)] == [1]  # a's row is locked and leased: skipped
        time.sleep(0.5)  # a's lease runs out (no heartbeat: a is "dead")
        (claim_b,) = b.claim(1)
        assert claim_b.seq == 0 and claim_b.token == 2
        digests = a_store.digests(task)
        assert not a.complete(claim_a, *row_write(task, first, digests))  # fenced: a lost it
        assert b.complete(claim_b, *row_write(task, first, digests))
        assert not b.complete(claim_b, *row_write(task, first, digests))  # stored once only
        assert a_store.finished_rows() == {task: 1}
        assert work_stats(a_store, task)["claimedTwice"] == 1


def test_concurrent_claims_never_hand_out_the_same_row(tmp_path: Path, pg_url: str) -> None:
    task = queued_task(pg_url, tmp_path)
    got: dict[str, list[int]] = {}

    def claim_all(name: str) -> None:
        with TaskStore(pg_url) as store:
            q = WorkQueue(store, task, name, lease_s=60)
            got[name] = []
            while claims := q.claim(2):
                got[name] += [c.seq for c in claims]

    threads = [threading.Thread(target=claim_all, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    every = sorted(seq for seqs in got.values() for seq in seqs)
    assert every == list(range(26))


def test_the_heartbeat_keeps_a_live_worker_s_rows(tmp_path: Path, pg_url: str) -> None:
    task = queued_task(pg_url, tmp_path)
    with TaskStore(pg_url) as a_store, TaskStore(pg_url) as b_store:
        a = WorkQueue(a_store, task, "a", lease_s=1.5)
        b = WorkQueue(b_store, task, "b", lease_s=30)
        held = a.claim(26)
        with a.heartbeat():
            time.sleep(2.5)  # longer than the lease: only the heartbeat keeps the rows
            assert b.claim(26) == []
        assert len(held) == 26


@pytest.mark.live
def test_a_killed_worker_s_rows_are_claimed_again_and_every_row_has_one_result(
    tmp_path: Path, pg_url: str
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from rubric_engine.testing.openai_stub import StubServer
    from tests.test_resilience import row_ids, slow

    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    with StubServer(slow(0.15)) as server:
        code, out = run(
            "score", HEALTH, "-r", "health_cs", "--store", pg_url, "--mode", "live",
            "--api-base", server.base_url, "--model", "gpt-4o-mini", "--workers-only",
        )  # fmt: skip
        assert code == 0, out
        task = out.rsplit("task id: ", 1)[1].split()[0]
        worker = [sys.executable, "-m", "rubric_engine.cli", "work", task, "--store", pg_url,
                  "--concurrency", "2", "--batch", "2", "--lease", "2"]  # fmt: skip
        env = {**os.environ, "NO_COLOR": "1"}
        first = subprocess.Popen(worker, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while len(server.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)  # mid-row, holding claims: no clean-up at all
        first.wait(30)
        with TaskStore(pg_url) as store:
            before = {r.result.row_id: r.result.to_json_dict() for r in store.rows(task)}
            assert store.task(task).state == "RUNNING" and len(before) < 26
        code, out = run("work", task, "--store", pg_url, "--concurrency", "4", "--lease", "2")
        assert code == 0 and "COMPLETED" in out, out
        asked = row_ids(server.requests)
    with TaskStore(pg_url) as store:
        after = {r.result.row_id: r.result.to_json_dict() for r in store.rows(task)}
        stats = work_stats(store, task)
        assert store.task(task).state == "COMPLETED"
    assert len(after) == 26 and all(r["status"] == "SCORED" for r in after.values())
    assert all(after[row_id] == result for row_id, result in before.items())
    assert set(asked) == set(after) and stats["claimedTwice"] >= 1  # the dead worker's rows
    assert not set(before) & {r for r in asked if asked.count(r) > 1}  # stored rows not redone


@pytest.mark.live
def test_a_worker_that_cannot_reach_the_judge_stops_and_hands_its_rows_back(
    tmp_path: Path, pg_url: str
) -> None:
    # a 404 (wrong --api-base) stands for "unreachable"; a 401 stops at once (test below)
    from rubric_engine.testing.openai_stub import StubReply, StubServer

    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    with StubServer(lambda body: StubReply(status=404, content="no such route")) as server:
        code, out = run(
            "score", HEALTH, "-r", "health_cs", "--store", pg_url, "--mode", "live",
            "--api-base", server.base_url, "--model", "gpt-4o-mini", "--workers-only",
        )  # fmt: skip
        task = out.rsplit("task id: ", 1)[1].split()[0]
        code, out = run("work", task, "--store", pg_url, "--concurrency", "1")
    assert code == 5 and "first 3 row(s) all failed to reach the judge" in out, out
    assert "handed its rows back" in out and "404" in out
    with TaskStore(pg_url) as store:
        assert store.finished_rows() == {}  # one misconfigured worker spoils no row
        states = store.backend.execute(
            "SELECT state, COUNT(*) FROM work_items WHERE task_id=? GROUP BY state", (task,)
        ).fetchall()
    assert [tuple(s) for s in states] == [("PENDING", 26)]


def test_a_worker_whose_credentials_are_refused_stops_at_once_and_hands_its_rows_back(
    tmp_path: Path, pg_url: str
) -> None:
    from rubric_engine.testing.openai_stub import StubReply, StubServer

    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    with StubServer(lambda body: StubReply(status=401, content="invalid api key")) as server:
        code, out = run(
            "score", HEALTH, "-r", "health_cs", "--store", pg_url, "--mode", "live",
            "--api-base", server.base_url, "--model", "gpt-4o-mini", "--workers-only",
        )  # fmt: skip
        task = out.rsplit("task id: ", 1)[1].split()[0]
        code, out = run("work", task, "--store", pg_url, "--concurrency", "1")
        sent = len(server.requests)
    assert code == 8 and "refused the credentials (HTTP 401)" in out, out
    assert "handed its rows back" in out and sent == 1  # no further row was sent
    with TaskStore(pg_url) as store:
        assert store.finished_rows() == {}


def test_workers_only_refuses_recording(tmp_path: Path, pg_url: str) -> None:
    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    code, out = queue(pg_url, "--mode", "record")
    assert code == 2 and "cannot be combined with --mode record" in out


def test_a_call_budget_holds_across_workers_and_stops_the_task(tmp_path: Path, pg_url: str) -> None:
    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    code, out = queue(pg_url, "--max-calls", "10", "--out", tmp_path / "out")
    assert code == 0, out
    task = out.rsplit("task id: ", 1)[1].split()[0]
    from rubric_engine.engine.workers import WorkSettings, work
    from rubric_engine.store.location import parse_location

    summaries = []

    def worker() -> None:  # three workers at once, each free to take every row
        settings = WorkSettings(cassettes=CASSETTES, batch=3, poll_s=0.1)
        summaries.append(work(parse_location(pg_url), task, settings))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [s.state for s in summaries] == ["STOPPED"] * 3
    assert sum(s.stored for s in summaries) == 10
    code, out = run("work", task, "--store", pg_url, "--cassettes", CASSETTES)
    assert code == 6 and "STOPPED: --max-calls 10 reached (10 call(s) made)" in out, out
    with TaskStore(pg_url) as store:
        assert sum(r.calls for r in store.rows(task)) == 10  # one call a replayed row
        assert store.task(task).state == "STOPPED"
    code, out = run("report", task, "--store", pg_url, "--format", "md")
    assert code == 0 and "STOPPED" in out and "10 of 26 planned rows" in out, out


def test_resume_refuses_a_task_that_workers_judge(tmp_path: Path, pg_url: str) -> None:
    task = queued_task(pg_url, tmp_path)
    code, out = run("score", "--resume", task, "--store", pg_url)
    assert code == 2 and f"`rubric-eval work {task} --store URL`, not --resume" in out


def test_a_worker_judges_in_the_task_s_output_mode_and_prompt_shape(
    tmp_path: Path, pg_url: str
) -> None:
    # a worker once built its judge with the default
    # json mode and a system message, whatever `score --workers-only` had recorded
    from rubric_engine.testing.openai_stub import StubReply, StubServer

    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    with StubServer(lambda body: StubReply(status=401, content="invalid api key")) as server:
        code, out = run(
            "score", HEALTH, "-r", "health_cs", "--store", pg_url, "--mode", "live",
            "--api-base", server.base_url, "--model", "gpt-4o-mini", "--workers-only",
            "--output-mode", "tools", "--system-as-user",
        )  # fmt: skip
        assert code == 0, out
        task = out.rsplit("task id: ", 1)[1].split()[0]
        code, out = run("work", task, "--store", pg_url, "--concurrency", "1")
        bodies = [r["body"] for r in server.requests]
    assert code == 8 and len(bodies) == 1, out
    assert "tools" in bodies[0]  # the forced tool call of --output-mode tools
    assert [m["role"] for m in bodies[0]["messages"]] == ["user"]  # --system-as-user


@pytest.mark.live
def test_a_worker_takes_the_transport_it_is_given(tmp_path: Path, pg_url: str) -> None:
    # `work --transport` as `score --transport`: litellm's client, not the direct session
    from rubric_engine.testing.openai_stub import StubServer
    from tests.test_resilience import slow

    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", pg_url)
    with StubServer(slow(0)) as server:
        code, out = run(
            "score", HEALTH, "-r", "health_cs", "--store", pg_url, "--mode", "live",
            "--api-base", server.base_url, "--model", "gpt-4o-mini", "--workers-only",
        )  # fmt: skip
        assert code == 0, out
        task = out.rsplit("task id: ", 1)[1].split()[0]
        code, out = run("work", task, "--store", pg_url, "--transport", "carrier-pigeon")
        assert code == 2 and "--transport 'carrier-pigeon' is not a transport" in out, out
        assert "direct, litellm" in out and not server.requests
        code, out = run("work", task, "--store", pg_url, "--transport", "litellm")
        assert code == 0 and "COMPLETED" in out, out
        agents = {r["headers"]["user-agent"] for r in server.requests}
    assert len(server.requests) == 26 and "rubric-eval" not in agents
