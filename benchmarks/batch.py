"""Batch mode at scale against the loopback fake: figures, not pass/fail.

    .venv/bin/python benchmarks/batch.py --rows 20000 --kills 20
    .venv/bin/python benchmarks/batch.py --rows 100000 --max-requests 50000

Rows are replicas of the demo health rows (``benchmarks/replicate.py``); the fake
(``rubric_engine/testing/batch_stub.py``) answers each line with the row's authored verdict,
except that every 13th row's first answer names an unknown intent (so it is re-asked in a
follow-up batch), and batches 2 and 5 expire with half their lines answered (the rest go in
follow-up batches). ``score --mode batch`` runs as its own process (loopback-only, like every
benchmark process); with ``--kills K`` it is killed with SIGKILL after a random number of HTTP
requests K times, each followed by ``score --resume``. Printed: wall time, the scoring
processes' peak RSS, HTTP calls by endpoint, batches, duplicate submissions (must be 0), rows
stored once, and the judge cost of the same tokens (re-asks included) at litellm's live and
batch rates for ``openai/gpt-4o-mini``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loopback import guard  # noqa: E402

guard()
MODEL = "openai/gpt-4o-mini"
if "RUBRIC_EVAL_BENCH_PEAKS" not in os.environ:  # the benchmark process; its children inherit
    os.environ["RUBRIC_EVAL_BENCH_PEAKS"] = tempfile.mkdtemp(prefix="rubric-eval-batch-peaks-")
PEAKS = Path(os.environ["RUBRIC_EVAL_BENCH_PEAKS"])


def responder(verdicts: dict[str, dict[str, Any]]) -> Any:
    from rubric_engine.testing.openai_stub import StubReply, row_id_of, verdicts_responder

    answer = verdicts_responder(verdicts)

    def respond(body: dict[str, Any]) -> StubReply:
        k = int((row_id_of(body) or "x-0").rsplit("-", 1)[1])
        if k % 13 == 0 and len(body["messages"]) == 2:
            return StubReply(content='{"intentKey": "NO_SUCH_INTENT", "score": 3}')
        return answer(body)

    return respond


def fate(number: int, lines: int) -> Any:
    from rubric_engine.testing.batch_stub import Fate

    return Fate("expired", lines // 2) if number in (2, 5) else Fate()


def endpoint(method: str, path: str) -> str:
    parts = [p for p in path.split("/") if p][1:]
    if parts[:1] == ["files"]:
        return f"{method} /files" + ("/{id}/content" if parts[2:] == ["content"] else "")
    if parts[:1] == ["batches"]:
        tail = {1: "", 2: "/{id}"}.get(len(parts), "/{id}/" + "/".join(parts[2:]))
        return f"{method} /batches{tail}"
    return f"{method} /" + "/".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--kills", type=int, default=0)
    parser.add_argument("--max-requests", type=int, default=5_000, help="requests per batch")
    parser.add_argument("--in-progress-s", type=float, default=0.5, help="fake batch run time")
    parser.add_argument("--poll-s", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument(
        "--kill-window-s", type=float, default=12.0, help="kill within this many seconds of a start"
    )
    args = parser.parse_args()

    from replicate import write_rows

    from rubric_engine.batch.pricing import rates
    from rubric_engine.store.task_store import TaskStore
    from rubric_engine.testing.batch_stub import BatchStub, Delays
    from rubric_engine.testing.openai_stub import load_verdicts

    with tempfile.TemporaryDirectory(prefix="rubric-eval-batch-") as tmp:
        work = Path(tmp)
        replica = write_rows(work / "data", args.rows)
        store, out = work / "store.sqlite", work / "out"
        stub = BatchStub(
            responder(load_verdicts(replica.verdicts)),
            fate=fate,
            delays=Delays(in_progress_s=args.in_progress_s),
        )
        rng = random.Random(args.seed)
        cli = [sys.executable, str(Path(__file__).resolve()), "_cli"]
        with stub:
            command = [
                "score", str(replica.rows), "-r", str(ROOT / "rubrics" / "health_cs.yaml"),
                "--draft", "--mode", "batch", "--api-base", stub.base_url, "--model", MODEL,
                "--batch-max-requests", str(args.max_requests),
                "--batch-poll-interval", str(args.poll_s),
                "--store", str(store), "--out", str(out), "-q",
            ]  # fmt: skip
            started = time.perf_counter()
            kills = 0
            finished = False
            peaks: list[float] = []  # MB, per scoring process in run order
            while kills < args.kills and not finished:
                process = subprocess.Popen([*cli, *command], stdout=subprocess.DEVNULL)
                # a random moment: a few HTTP requests from now, or a random time, if sooner
                target = len(stub.requests) + rng.randint(1, 4)
                deadline = time.monotonic() + rng.uniform(0.5, args.kill_window_s)
                while (
                    len(stub.requests) < target
                    and time.monotonic() < deadline
                    and process.poll() is None
                ):
                    time.sleep(0.002)
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                    kills += 1
                finished = reap(process, peaks) == 0
                with TaskStore(store) as opened:
                    tasks = opened.tasks()
                if tasks:
                    command = ["score", "--resume", tasks[0].id, "--store", str(store), "-q"]
            if finished:
                done = subprocess.CompletedProcess(command, 0)
            else:
                last = subprocess.Popen([*cli, *command], stdout=subprocess.DEVNULL)
                done = subprocess.CompletedProcess(command, reap(last, peaks))
            wall_s = time.perf_counter() - started
            requests = list(stub.requests)
            duplicates = stub.duplicate_custom_ids()
            submissions = len(stub.submissions)
            statuses = Counter(stub.batches[s["batchId"]].status for s in stub.submissions)
            lines = sum(len(s["customIds"]) for s in stub.submissions)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mb = max(peaks)
        cpu_s = children.ru_utime + children.ru_stime
        with TaskStore(store) as opened:
            (task,) = opened.tasks()
            rows = list(opened.report_rows(task.id))
        prompt = sum(r[2] for r in rows)
        completion = sum(r[3] for r in rows)
        calls = sum(r[1] for r in rows)
        live, batch = rates(MODEL, batch=False), rates(MODEL)
        statuses_text = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        by_endpoint = sorted(Counter(endpoint(m, p) for m, p in requests).items())
        live_usd = f"{live.price(prompt, completion):.2f}" if live else "n/a"
        batch_usd = f"{batch.price(prompt, completion):.2f}" if batch else "n/a"
        figures = [
            ("rows", f"{args.rows:,}"),
            ("exit code of the last run", done.returncode),
            ("task state", task.state),
            ("rows stored (each once)", f"{len(rows):,}"),
            ("kill -9 + resume (kills that hit a running process)", kills),
            ("wall time, s", f"{wall_s:.1f}"),
            ("CPU time of the scoring processes, s", f"{cpu_s:.1f}"),
            ("peak RSS of a scoring process, MB", f"{peak_mb:.0f}"),
            ("  per process, in run order", " ".join(f"{p:.0f}" for p in peaks)),
            ("HTTP calls", f"{len(requests):,}"),
            *((f"  {k}", f"{v:,}") for k, v in by_endpoint),
            ("batches (by end status)", f"{submissions} ({statuses_text})"),
            ("request lines submitted", f"{lines:,}"),
            ("custom_ids submitted twice", len(duplicates)),
            ("judge calls stored (re-asks, retries included)", f"{calls:,}"),
            ("tokens in / out", f"{prompt:,} / {completion:,}"),
            ("cost at live rates, USD", live_usd),
            ("cost at batch rates, USD", batch_usd),
            ("cost stored by the run, USD", f"{sum(r[4] or 0 for r in rows):.2f}"),
        ]  # fmt: skip
        shutil.rmtree(PEAKS, ignore_errors=True)
        width = max(len(k) for k, _ in figures)
        print(f"| {'figure'.ljust(width)} | value |\n|{'-' * (width + 2)}|-------|")
        for key, value in figures:
            print(f"| {key.ljust(width)} | {value} |")


def reap(process: subprocess.Popen[bytes], peaks: list[float]) -> int:
    """Wait for a scoring process; note its own peak RSS (MB); return its exit code.

    The peak is the process's ``VmHWM`` as it last wrote it (:func:`cli`), not ``ru_maxrss``:
    a child's ``ru_maxrss`` starts at its parent's size when it was spawned (Linux keeps the
    old memory map's high-water mark across exec), and this parent holds the fake's files.
    """
    code = process.wait()
    found = PEAKS / str(process.pid)
    peaks.append(int(found.read_text()) / 1024 if found.exists() else float("nan"))
    return code


def _high_water_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cli() -> None:
    """``batch.py _cli ARGS``: rubric-eval in this process, behind the loopback guard.

    Writes its peak RSS (``VmHWM``, kB) to ``$RUBRIC_EVAL_BENCH_PEAKS/<pid>`` every 50 ms and
    at exit, so a process killed with SIGKILL still leaves a figure.
    """
    import atexit
    import threading

    from rubric_engine.cli import main as rubric_eval

    out = Path(os.environ["RUBRIC_EVAL_BENCH_PEAKS"]) / str(os.getpid())

    def write() -> None:
        out.write_text(str(_high_water_kb()))

    def keep_writing() -> None:
        while True:
            write()
            time.sleep(0.05)

    threading.Thread(target=keep_writing, daemon=True).start()
    atexit.register(write)

    sys.argv = ["rubric-eval", *sys.argv[2:]]
    rubric_eval()


if __name__ == "__main__":
    if sys.argv[1:2] == ["_cli"]:
        cli()
    else:
        main()
