"""The review app's pages at 1k, 10k and 100k rows: the server's CPU seconds per request and
its memory (see benchmarks/RESULTS.md and docs/review.md "Any task size").

    .venv/bin/python benchmarks/run.py pages --rows 1000 10000 100000

For each size: the replica rows of ``benchmarks/run.py data`` are scored twice into one store
(two tasks over the same rows, for the comparison page), a team and a queue are made, and a
share of the rows is answered the way the app writes answers (labels, queue state). Then
``rubric-eval serve`` is started as a user starts it (``--reviewer alice``, on loopback: the
reviewer who answered those rows, whose queue has the most to leave out) and each page is
fetched in turn — the review form of a row, the queue page, the answer of a row (a POST), the
report (twice: the server keeps it built), the comparison — reading the server's own CPU time
(``/proc/PID/stat``) before and after each request and its resident memory (``VmRSS``, and the
peak ``VmHWM`` so far: the pages are fetched in that order, so the form's and the queue's peak
is theirs alone). Figures are printed with the load average, never asserted. With ``--data``
the replica rows and each size's store are kept and reused.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from common import load, table

TICKS = os.sysconf("SC_CLK_TCK")
HEADERS = [
    "rows",
    "page",
    "requests",
    "server CPU s/request",
    "wall s/request",
    "response KB",
    "server RSS MB",
    "server peak MB",
    "load before",
    "load after",
]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _memory_mb(pid: int) -> tuple[float, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def build_store(work: Path, replica: Any, reviewed: float) -> dict[str, Any]:
    """Two tasks over the replica rows in one store, the team, a queue on the first task and
    ``reviewed`` of its rows answered by alice (a share of those also by bob)."""
    from common import measured
    from run import engine_cmd

    from rubric_engine.store.copy import copy_store

    # the engine child starts each run from an empty store: score twice, then copy the second
    # task into the first store (`rubric-eval store migrate`'s copy)
    for part in ("a", "b"):
        measured(engine_cmd(replica, work / part))
    copy_store(work / "b" / "store.sqlite", work / "a" / "store.sqlite")
    store = work / "a" / "store.sqlite"
    started = time.perf_counter()
    info = _team_and_labels(store, reviewed)
    info["setup_s"] = time.perf_counter() - started
    return info


def _team_and_labels(store: Path, reviewed: float) -> dict[str, Any]:
    from rubric_engine.labels.store import store_labels
    from rubric_engine.review.accounts import add_reviewer
    from rubric_engine.review.answers import ReviewContext, answer_of_result, labels_of_answer
    from rubric_engine.review.queue import QueueSettings
    from rubric_engine.review.queue_store import create_queue, refresh_rows
    from rubric_engine.store.task_store import TaskStore, parse_result

    with TaskStore(store) as opened:
        first, second = (t.id for t in opened.tasks())
        record = opened.task(first)
        for name, role in (("alice", "reviewer"), ("bob", "reviewer"), ("carol", "lead")):
            add_reviewer(opened.backend, name, role)
        create_queue(opened, first, QueueSettings(), "benchmark")
        rows = [r for (r,) in opened.backend.execute(
            "SELECT row_id FROM review_items WHERE task_id=? ORDER BY position", (first,)
        )]  # fmt: skip
        answered = rows[: int(len(rows) * reviewed)]
        for start in range(0, len(answered), 500):
            batch = answered[start : start + 500]
            labels = []
            for row_id in batch:
                text = opened.backend.execute(
                    "SELECT result FROM rows WHERE task_id=? AND row_id=?", (first, row_id)
                ).fetchone()[0]
                judge = answer_of_result(parse_result(text, first, row_id))
                if judge is None:
                    continue
                for who in ("alice", "bob") if row_id.endswith("0") else ("alice",):
                    context = ReviewContext(
                        who, first, record.rubric_key, record.rubric_version,
                        record.rubric_hash, saw_judge_verdict=True,
                    )  # fmt: skip
                    labels += labels_of_answer(judge, context)
            with opened.backend.exclusive("labels"):
                store_labels(opened.backend, labels)
                refresh_rows(opened, first, batch)
        labelled = opened.backend.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
        open_row = opened.backend.execute(
            "SELECT row_id FROM review_items WHERE task_id=? AND state='open' ORDER BY position "
            "DESC LIMIT 2",
            (first,),
        ).fetchall()
    return {
        "first": first,
        "second": second,
        "labels": labelled,
        "rows": [r for (r,) in open_row],
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`rubric-eval serve` in its own process, and a client with a cookie jar."""

    def __init__(self, store: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rubric_engine.cli", "serve", "--store", str(store),
             "--port", str(self.port), "--reviewer", "alice"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        for _ in range(300):
            try:
                self.fetch("/signin")
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(
            f"serve did not start: {self.proc.stderr.read() if self.proc.stderr else ''}"
        )

    def fetch(self, path: str, data: dict[str, Any] | None = None) -> bytes:
        body = None if data is None else urllib.parse.urlencode(data, doseq=True).encode()
        with self.opener.open(self.base + path, data=body, timeout=3600) as answer:
            return bytes(answer.read())

    def measure(self, path: str, data: dict[str, Any] | None = None) -> tuple[float, float, int]:
        """(server CPU s, wall s, bytes) of one request."""
        cpu, wall = _cpu_s(self.proc.pid), time.perf_counter()
        size = len(self.fetch(path, data))
        return _cpu_s(self.proc.pid) - cpu, time.perf_counter() - wall, size

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _answer_form(html: str, row_id: str, store: Path, task_id: str) -> dict[str, Any]:
    """The review form answered as the judge did (each question explicitly)."""
    from rubric_engine.review.answers import answer_of_result
    from rubric_engine.store.task_store import TaskStore, parse_result

    with TaskStore(store) as opened:
        text = opened.backend.execute(
            "SELECT result FROM rows WHERE task_id=? AND row_id=?", (task_id, row_id)
        ).fetchone()[0]
    judge = answer_of_result(parse_result(text, task_id, row_id))
    assert judge is not None
    asked = set(re.findall(r'name="status\.([^"]+)" value="FOLLOWED"', html))
    form: dict[str, Any] = {
        "csrf": re.search(r'name="csrf" value="([^"]+)"', html).group(1),  # type: ignore[union-attr]
        "queue": "main",
        "opened": re.search(r'name="opened" value="([^"]+)"', html).group(1),  # type: ignore[union-attr]
        "intent": judge.intent_key,
        "score": str(judge.score),
        "flag": sorted(judge.red_flag_types),
    }
    for rid, status in judge.statuses.items():
        if rid in asked:
            form[f"status.{rid}"] = str(status)
    return form


def measure_pages(
    store: Path, info: dict[str, Any], count: int, repeat: int, wanted: list[str]
) -> list[list[Any]]:
    first, second = info["first"], info["second"]
    row_id = info["rows"][0]
    server = Server(store)
    out = []
    try:
        pages = [
            ("row (review form)", f"/tasks/{first}/review/{row_id}?queue=main", repeat),
            ("queue", f"/tasks/{first}/queues/main", repeat),
            ("answer (POST)", None, 1),
            ("report", f"/tasks/{first}/report", 1),
            ("report again (kept)", f"/tasks/{first}/report", 1),
            ("compare (first page)", f"/compare?baseline={second}&current={first}", 1),
        ]
        for name, path, times in pages:
            if name.split()[0] not in wanted:
                continue
            before = load()
            runs = []
            for _ in range(times):
                if path is None:
                    html = server.fetch(f"/tasks/{first}/review/{row_id}?queue=main").decode()
                    form = _answer_form(html, row_id, store, first)
                    runs.append(server.measure(f"/tasks/{first}/review/{row_id}", form))
                else:
                    runs.append(server.measure(path))
            rss, peak = _memory_mb(server.proc.pid)
            out.append(
                [
                    count,
                    name,
                    times,
                    statistics.median(r[0] for r in runs),
                    statistics.median(r[1] for r in runs),
                    runs[-1][2] / 1024,
                    rss,
                    peak,
                    before,
                    load(),
                ]
            )
    finally:
        server.stop()
    return out


def cmd_pages(ns: argparse.Namespace) -> None:
    from common import workdir
    from run import replica_for

    rows: list[list[Any]] = []
    setup = []
    with workdir(ns.data) as work:
        for count in ns.rows:
            replica = replica_for(work / f"data-{count}", count)
            store_dir = work / f"pages-{count}"
            made = store_dir / "made.json"
            if ns.data is not None and made.exists():  # kept from an earlier run: reused
                info = json.loads(made.read_text("utf-8"))
            else:
                if store_dir.exists():
                    subprocess.run(["rm", "-rf", str(store_dir)], check=True)
                info = build_store(store_dir, replica, ns.reviewed)
                made.write_text(json.dumps(info), "utf-8")
            setup.append([count, info["labels"], f"{info['setup_s']:.1f}"])
            store = store_dir / "a" / "store.sqlite"
            rows += measure_pages(store, info, count, ns.repeat, ns.pages)
            print(f"  measured the pages at {count} rows", flush=True)
    print(table(HEADERS, rows))
    print(
        "\nserver: `rubric-eval serve --reviewer alice` (SQLite store, two tasks over the same "
        f"rows; alice answered {ns.reviewed:.0%} of the first); each page fetched after the one "
        f"above it, {ns.repeat} time(s) for the form and the queue (median); CPU is the "
        "server process's user+system time over the request (/proc/PID/stat, 10 ms ticks); "
        "peak is VmHWM so far. Targets (docs/review.md): the form and the queue at 100k rows "
        "≤ 0.3 CPU-s, server under 200 MB."
    )
    print("\n" + table(["rows", "labels in the store", "team, queue and labels made in s"], setup))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--repeat", type=int, default=5, help="fetches of the form and the queue")
    p.add_argument(
        "--reviewed", type=float, default=0.1, help="share of rows answered before measuring"
    )
    p.add_argument(
        "--data", type=Path, help="keep (and reuse) the replica data and stores in this folder"
    )
    p.add_argument(
        "--pages",
        nargs="+",
        default=["row", "queue", "answer", "report", "compare"],
        help="which pages to fetch (default: all)",
    )
    p.set_defaults(func=cmd_pages)
