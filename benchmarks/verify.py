"""What row digests cost a reader, and how long ``rubric-eval verify`` takes (docs/verify.md).

    .venv/bin/python benchmarks/verify.py --rows 20000 --repeat 3

Scores a replica of N demo rows (benchmarks/replicate.py) by replay into a throwaway store,
then measures, each in its own process (CPU time by the kernel, with the load average before
and after): ``report TASK --format json`` reading rows whose digests are checked; the same
report on a copy of the store made to look as it would before digests (no digest is checked
there); and ``verify TASK``. Prints a Markdown table and the check's cost per row.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import load, measured, table, workdir  # noqa: E402
from replicate import make_replica  # noqa: E402

ENGINE = [sys.executable, "-m", "rubric_engine.cli"]


def scored(folder: Path, rows: int) -> tuple[Path, str]:
    replica = make_replica(folder / "data", rows)
    store = folder / "digests.sqlite"
    rubric = str(ROOT / "rubrics" / "health_cs.yaml")
    cmd = [*ENGINE, "score", str(replica.rows), "-r", rubric, "--draft"]
    cmd += ["--cassettes", str(replica.cassettes), "--store", str(store)]
    cmd += ["--out", str(folder / "out"), "--display", "none"]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(done.stdout[-2000:] + done.stderr[-2000:])
    return store, done.stdout.rsplit("task id: ", 1)[1].split()[0]


def without_digests(store: Path, task: str) -> Path:
    """A copy of the store whose task looks as it was stored before digests."""
    copy = store.with_name("before-digests.sqlite")
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as db:
        (extra,) = db.execute("SELECT extra FROM tasks WHERE id=?", (task,)).fetchone()
        extra = {k: v for k, v in json.loads(extra).items() if k != "rowDigests"}
        db.execute("UPDATE tasks SET extra=? WHERE id=?", (json.dumps(extra), task))
        db.execute("UPDATE rows SET digest=NULL")
        # and the store took digests after the task was created, as an upgraded store did
        db.execute(
            "UPDATE migrations SET applied_at='2100-01-01T00:00:00Z' "
            "WHERE name='m011_samples_and_digests'"
        )
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command")
    parser.add_argument("--keep", type=Path, help="keep the data and stores in this folder")
    ns = parser.parse_args()
    with workdir(ns.keep) as folder:
        store, task = scored(folder, ns.rows)
        plain = without_digests(store, task)
        runs: list[list[object]] = []
        cpu: dict[str, float] = {}
        commands = {
            "report, digests checked": [*ENGINE, "report", task, "--store", str(store)],
            "report, before digests": [*ENGINE, "report", task, "--store", str(plain)],
            "verify": [*ENGINE, "verify", task, "--store", str(store)],
        }
        for name, cmd in commands.items():
            if name.startswith("report"):
                cmd = [*cmd, "--format", "json", "--out", str(folder / name.replace(" ", ""))]
            best = None
            for _ in range(ns.repeat):
                got = measured(cmd, json_line=False)
                if best is None or got.cpu_s < best.cpu_s:
                    best = got
            assert best is not None
            cpu[name] = best.cpu_s
            runs.append([name, ns.rows, best.cpu_s, best.wall_s, best.load_before, best.load_after])
        head = ["command", "rows", "CPU s (best)", "wall s", "load before", "load after"]
        print(table(head, runs))
        extra = cpu["report, digests checked"] - cpu["report, before digests"]
        print(
            f"\ndigest check: {extra * 1e6 / ns.rows:.0f} µs of CPU a row "
            f"({extra / cpu['report, before digests'] * 100:+.0f}% on the report); "
            f"verify: {cpu['verify'] * 1e6 / ns.rows:.0f} µs a row; load now {load()}"
        )


if __name__ == "__main__":
    main()
