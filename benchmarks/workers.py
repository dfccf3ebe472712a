"""Workers on one PostgreSQL task: throughput for 1/2/4 workers, claim latency, and
a chaos run where workers are SIGKILLed and restarted at random times.

    .venv/bin/python benchmarks/workers.py --rows 2000 --chaos-rows 20000 --latency-ms 50
    .venv/bin/python benchmarks/workers.py --skip throughput chaos   # SQLite vs PostgreSQL replay

Starts a throwaway PostgreSQL cluster (rubric_engine/testing/pg_cluster.py; durable settings:
fsync on, unless --fast-pg) and the loopback stub (benchmarks/stub_server.py), queues tasks
with ``score --workers-only``'s library call and runs each worker as its own process
(``rubric_engine.engine.workers.work``). Prints Markdown tables with the load average before and
after
each run (the machine is shared: figures depend on it). Every process here refuses
non-loopback connections (benchmarks/loopback.py).

Chaos run checks, and prints: every input row has exactly one stored result, none lost, the
task is COMPLETED, how many rows were claimed twice (re-claimed after a kill, whether or not
they had reached the judge) and how many were judged twice (the stub saw their rowId more
than once; the bar is at most 1%). Exit 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loopback import guard  # noqa: E402

guard()


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def queue(url: str, rows: Path, base_url: str, out: Path) -> str:
    from rubric_engine.engine import ScoreOptions
    from rubric_engine.engine.workers import queue_task
    from rubric_engine.store.location import PostgresUrl

    options = ScoreOptions(
        inputs=[rows], rubric="health_cs", mode="live", api_base=base_url,
        store=PostgresUrl(url), out=out,
    )  # fmt: skip
    return queue_task(options).task_id


def spawn(url: str, task: str, base_url: str, ns: argparse.Namespace, log: Path) -> Any:
    cmd = [
        sys.executable, str(Path(__file__).resolve()), "_worker", "--url", url, "--task", task,
        "--api-base", base_url, "--concurrency", str(ns.concurrency), "--batch", str(ns.batch),
        "--lease", str(ns.lease),
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT)


def run_worker(ns: argparse.Namespace) -> None:
    from rubric_engine.engine.workers import WorkSettings, work
    from rubric_engine.judge.backends import import_litellm
    from rubric_engine.store.location import PostgresUrl

    import_litellm()  # start-up apart from the judging: "ready" is after the heavy imports
    ready_at = time.time()
    started = time.perf_counter()
    settings = WorkSettings(
        concurrency=ns.concurrency, batch=ns.batch, lease_s=ns.lease, api_base=ns.api_base,
        poll_s=0.5,
    )  # fmt: skip
    summary = work(PostgresUrl(ns.url), ns.task, settings)
    print(
        json.dumps(
            {
                "stored": summary.stored,
                "lost": summary.lost,
                "completed": summary.completed,
                "claim_ms": summary.claim_ms,
                "wall_s": time.perf_counter() - started,
                "ready_at": ready_at,
                "end_at": time.time(),
            }
        ),
        flush=True,
    )


def check(url: str, task: str, expected_ids: set[str]) -> dict[str, Any]:
    from rubric_engine.store.task_store import TaskStore
    from rubric_engine.store.work_queue import work_stats

    with TaskStore(url) as store:
        db = store.backend
        ids = [r for (r,) in db.execute("SELECT row_id FROM rows WHERE task_id=?", (task,))]
        errors = db.execute(
            "SELECT COUNT(*) FROM rows WHERE task_id=? AND status='JUDGE_ERROR'", (task,)
        ).fetchone()[0]
        stats = work_stats(store, task)
        state = store.task(task).state
    return {
        "state": state,
        "results": len(ids),
        "distinct": len(set(ids)),
        "lost": len(expected_ids - set(ids)),
        "judge_errors": int(errors),
        **stats,
    }


def input_ids(rows: Path) -> set[str]:
    return {json.loads(line)["rowId"] for line in rows.open(encoding="utf-8") if line.strip()}


def throughput(ns: argparse.Namespace, cluster: Any, base_url: str, work: Path) -> None:
    from replicate import write_rows
    from run import table

    replica = write_rows(work / "tp", ns.rows)
    lines = []
    for workers in ns.workers:
        url = cluster.create_database(f"tp{workers}")
        _publish(url)
        task = queue(url, replica.rows, base_url, work / "out")
        before = _load()
        logs = [work / f"tp{workers}-{i}.log" for i in range(workers)]
        started = time.perf_counter()
        procs = [spawn(url, task, base_url, ns, log) for log in logs]
        for p in procs:
            p.wait()
        wall = time.perf_counter() - started
        claims: list[float] = []
        ready, ends = [], []
        for log in logs:
            last = json.loads(log.read_text().strip().splitlines()[-1])
            claims += last["claim_ms"]
            ready.append(last["ready_at"])
            ends.append(last["end_at"])
        judging = max(ends) - min(ready)
        got = check(url, task, input_ids(replica.rows))
        assert got["results"] == got["distinct"] == ns.rows and got["state"] == "COMPLETED", got
        lines.append(
            [workers, ns.rows, ns.concurrency, ns.latency_ms, wall, ns.rows / wall,
             ns.rows / judging,
             workers * ns.concurrency / (ns.latency_ms / 1000), _pct(claims, 0.5),
             _pct(claims, 0.99), len(claims), before, _load()]
        )  # fmt: skip
    print(
        "\n## Throughput (no kills). rows/s: over the wall time, with each worker's start-up;"
        " rows/s judging: from the first worker ready (imports done) to the last one done\n"
    )
    print(
        table(
            ["workers", "rows", "C/worker", "L ms", "wall s", "rows/s", "rows/s judging",
             "ideal", "claim p50 ms",
             "claim p99 ms", "claims", "load before", "load after"],
            lines,
        )
    )  # fmt: skip


def chaos(ns: argparse.Namespace, cluster: Any, base_url: str, work: Path) -> bool:
    from replicate import write_rows
    from run import table

    replica = write_rows(work / "chaos", ns.chaos_rows)
    url = cluster.create_database("chaos")
    _publish(url)
    task = queue(url, replica.rows, base_url, work / "out")
    rng = random.Random(ns.seed)
    before = _load()
    started = time.perf_counter()
    logs = [work / f"chaos-{i}.log" for i in range(4)]
    procs = [spawn(url, task, base_url, ns, logs[i]) for i in range(4)]
    kills, next_kill = 0, started + rng.uniform(0.5, 1.5) * ns.kill_every
    restart_at: dict[int, float] = {}
    while True:
        now = time.perf_counter()
        alive = [i for i, p in enumerate(procs) if p.poll() is None]
        if not alive and not restart_at:
            break
        if now >= next_kill and alive:
            victim = rng.choice(alive)
            procs[victim].kill()  # SIGKILL: no clean-up, its claims stay until the lease ends
            procs[victim].wait()
            kills += 1
            restart_at[victim] = now + rng.uniform(0.0, 3.0)
            next_kill = now + rng.uniform(0.5, 1.5) * ns.kill_every
        for i, at in list(restart_at.items()):
            if now >= at:
                procs[i] = spawn(url, task, base_url, ns, logs[i])
                del restart_at[i]
        time.sleep(0.05)
    wall = time.perf_counter() - started
    got = check(url, task, input_ids(replica.rows))
    twice_pct = 100 * got["claimedTwice"] / ns.chaos_rows
    ok = (
        got["results"] == got["distinct"] == ns.chaos_rows
        and got["lost"] == 0
        and got["state"] == "COMPLETED"
    )
    print("\n## Chaos: 4 workers, random SIGKILL + restart\n")
    print(
        table(
            ["rows", "kills", "lease s", "wall s", "rows/s", "results", "distinct", "lost",
             "judge errors", "claimed twice", "claimed twice %", "state", "load before",
             "load after", "verdict"],
            [[ns.chaos_rows, kills, ns.lease, wall, ns.chaos_rows / wall, got["results"],
              got["distinct"], got["lost"], got["judge_errors"], got["claimedTwice"],
              twice_pct, got["state"], before, _load(), "OK" if ok else "FAILED"]],
        )
    )  # fmt: skip
    return ok


def run_replay(ns: argparse.Namespace) -> None:
    """One replayed ``score()`` into ``--url`` (a SQLite path or a PostgreSQL URL)."""
    from replicate import RUBRIC

    from rubric_engine.engine import ScoreOptions, score
    from rubric_engine.store.location import parse_location

    marks: dict[str, float] = {}
    options = ScoreOptions(
        inputs=[Path(ns.rows)], rubric=RUBRIC, draft=True, cassettes=Path(ns.cassettes),
        store=parse_location(ns.url), out=Path(ns.out),
    )  # fmt: skip
    started = time.perf_counter()
    score(
        options,
        on_start=lambda *_: marks.setdefault("batch", time.perf_counter()),
        on_row=lambda _: marks.__setitem__("last", time.perf_counter()),
    )
    wall = time.perf_counter() - started
    print(json.dumps({"batch_s": marks["last"] - marks["batch"], "score_s": wall}))


def replay(ns: argparse.Namespace, cluster: Any, work: Path) -> None:
    """The same replayed batch scored into SQLite and into PostgreSQL, alternating."""
    from replicate import make_replica
    from run import table

    replica = make_replica(work / "replay", ns.replay_rows)
    lines = []
    for k in range(ns.repeat):
        for backend in ("sqlite", "postgres"):
            url = (
                str(work / f"r{k}.sqlite")
                if backend == "sqlite"
                else cluster.create_database(f"replay{k}")
            )
            before = _load()
            cmd = [sys.executable, str(Path(__file__).resolve()), "_replay", "--url", url,
                   "--rows", str(replica.rows), "--cassettes", str(replica.cassettes),
                   "--out", str(work / f"out-{backend}-{k}")]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            lines.append(
                [backend, ns.replay_rows, got["batch_s"], ns.replay_rows / got["batch_s"],
                 got["score_s"], ns.replay_rows / got["score_s"], before, _load()]
            )  # fmt: skip
    print("\n## One process, replayed rows: the store's cost per row (SQLite vs PostgreSQL)\n")
    print(
        table(
            ["store", "rows", "batch s", "batch rows/s", "score() s", "end-to-end rows/s",
             "load before", "load after"],
            lines,
        )
    )  # fmt: skip


def _publish(url: str) -> None:
    from replicate import RUBRIC

    from rubric_engine.rubric.versions import RubricRegistry
    from rubric_engine.store.task_store import TaskStore

    with TaskStore(url) as store:
        RubricRegistry(store).publish(RUBRIC)


def run_stub(ns: argparse.Namespace) -> None:
    """The loopback stub, counting judge requests per rowId (written to --counts on SIGTERM):
    a row asked twice was judged twice."""
    import signal
    import threading
    from collections import Counter

    from rubric_engine.testing.openai_stub import (
        StubServer,
        load_verdicts,
        row_id_of,
        verdicts_responder,
    )

    counts: Counter[str] = Counter()
    inner = verdicts_responder(load_verdicts(Path(ns.verdicts)))

    def respond(body: dict[str, Any]) -> Any:
        counts[str(row_id_of(body))] += 1
        return inner(body)

    server = StubServer(respond, latency_s=ns.latency_ms / 1000)
    server.requests = _Discard()  # 20,000 request bodies need not stay in memory
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"PORT {server.base_url.rsplit(':', 1)[1].split('/')[0]}", flush=True)
    stop.wait()
    server.stop()
    Path(ns.counts).write_text(json.dumps(counts), encoding="utf-8")


class _Discard(list):  # type: ignore[type-arg]
    def append(self, item: Any) -> None:
        pass


class Stub:
    """:func:`run_stub` in its own process; ``counts()`` after ``stop()``."""

    def __init__(self, verdicts: Path, latency_ms: float, counts: Path) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "_stub", "--verdicts",
               str(verdicts), "--latency-ms", str(latency_ms), "--counts", str(counts)]  # fmt: skip
        self.counts_path = counts
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)  # fmt: skip
        assert self.proc.stdout is not None
        self.base_url = f"http://127.0.0.1:{self.proc.stdout.readline().split()[1]}/v1"

    def stop(self) -> dict[str, int]:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        return dict(json.loads(self.counts_path.read_text(encoding="utf-8")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    w = sub.add_parser("_worker")
    w.add_argument("--url", required=True)
    w.add_argument("--task", required=True)
    w.add_argument("--api-base", required=True)
    for p in (parser, w):
        p.add_argument("--concurrency", type=int, default=8, help="judge calls per worker")
        p.add_argument("--batch", type=int, default=4, help="rows per claim")
        p.add_argument("--lease", type=float, default=5.0, help="lease seconds")
    parser.add_argument("--rows", type=int, default=2000, help="rows per throughput run")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--chaos-rows", type=int, default=20000)
    parser.add_argument("--kill-every", type=float, default=20.0, help="mean seconds")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="stub latency")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--fast-pg", action="store_true", help="fsync off (tests' settings)")
    parser.add_argument("--replay-rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2, help="replay runs per backend")
    parser.add_argument("--skip", choices=["replay", "throughput", "chaos"], nargs="*", default=[])
    rp = sub.add_parser("_replay")
    for name in ("--url", "--rows", "--cassettes", "--out"):
        rp.add_argument(name, required=True)
    st = sub.add_parser("_stub")
    st.add_argument("--verdicts", required=True)
    st.add_argument("--counts", required=True)
    st.add_argument("--latency-ms", type=float, default=50.0)
    ns = parser.parse_args()
    if ns.cmd == "_worker":
        run_worker(ns)
        return
    if ns.cmd == "_stub":
        run_stub(ns)
        return
    if ns.cmd == "_replay":
        run_replay(ns)
        return
    import tempfile

    from rubric_engine.testing.pg_cluster import start_cluster

    work = Path(tempfile.mkdtemp(prefix="rubric-eval-bench-workers-"))
    cluster = start_cluster(durable=not ns.fast_pg)
    print(f"# workers benchmark: {os.cpu_count()} CPU(s), load {_load()}, stub {ns.latency_ms} ms")
    try:
        from replicate import write_rows

        if "replay" not in ns.skip:
            replay(ns, cluster, work)
        verdicts = write_rows(work / "v", max(ns.rows, ns.chaos_rows)).verdicts
        if "throughput" not in ns.skip:
            stub = Stub(verdicts, ns.latency_ms, work / "tp-counts.json")
            try:
                throughput(ns, cluster, stub.base_url, work)
            finally:
                stub.stop()
        if "chaos" not in ns.skip:
            stub = Stub(verdicts, ns.latency_ms, work / "chaos-counts.json")
            try:
                got = chaos(ns, cluster, stub.base_url, work)
            finally:
                counts = stub.stop()
            judged_twice = sum(1 for n in counts.values() if n > 1)
            pct = 100 * judged_twice / ns.chaos_rows
            ok = got and pct <= 1.0
            print(
                f"\nrows judged twice (the stub saw the same rowId again): {judged_twice} "
                f"({pct:.2f}% of {ns.chaos_rows}; bar: at most 1%) -> {'OK' if ok else 'FAILED'}"
            )
            if not ok:
                sys.exit(1)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
