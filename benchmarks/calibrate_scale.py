"""Memory and time of `rubric-eval calibrate` on a big task: N rows, N/10 labels.

    python benchmarks/calibrate_scale.py --rows 10000 --rows 100000 --rows 1000000 [--keep DIR]

Builds, per size, a store holding one task of N rows (the scored demo airline rows repeated
under new rowIds, each with a two-message dialogue so the store stays a few GB at a million)
and N/10 labels from two reviewers (on every 40th row: a row label and one requirement label
each), then runs ``rubric-eval calibrate TASK --no-save --format json`` in its own process and
prints its CPU seconds, wall seconds and peak RSS (the child's own VmHWM) with the load average
before and after. The store is built in-process, straight through the store's own insert, not
timed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, load, measured, table, workdir

#: the child: the CLI, then its own peak RSS as the last JSON line
CHILD = (
    "import json, sys\n"
    "from rubric_engine.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as exc:\n"
    "    if exc.code:\n"
    "        raise\n"
    "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
    "print(json.dumps({'peak_mb': int(peak) / 1024}))\n"
)


def _demo_task(folder: Path) -> tuple[Path, str]:
    """A store with the scored demo airline task (replayed from the shipped cassettes)."""
    store = folder / "store.sqlite"
    cli = [sys.executable, "-m", "rubric_engine.cli"]
    common = ["--store", str(store)]
    subprocess.run([*cli, "rubric", "publish", str(ROOT / "rubrics/airline_cs.yaml"), *common],
                   check=True, capture_output=True)  # fmt: skip
    done = subprocess.run(
        [*cli, "score", str(ROOT / "cases/airline_tau2_dev.json"), "--rubric", "airline_cs",
         "--cassettes", str(ROOT / "cassettes"), "--out", str(folder / "demo"),
         "--display", "none", *common],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return store, done.stdout.split("task id: ")[1].split()[0]


def build(folder: Path, rows: int) -> tuple[Path, str]:
    """The demo task grown to ``rows`` rows and ``rows // 10`` labels (see the docstring)."""
    from rubric_engine.labels.model import Label
    from rubric_engine.labels.store import append_labels
    from rubric_engine.store.digest import RowDigests
    from rubric_engine.store.task_store import TaskStore

    store, task = _demo_task(folder)
    with TaskStore(store) as opened:
        db = opened.backend
        source = db.execute("SELECT * FROM rows WHERE task_id=? ORDER BY seq", (task,)).fetchall()
        names = [d[0] for d in db.execute("SELECT * FROM rows WHERE 1=0").description]
        at = {n: i for i, n in enumerate(names)}
        db.execute("DELETE FROM rows WHERE task_id=?", (task,))
        db.execute("UPDATE tasks SET row_count=? WHERE id=?", (rows, task))
        # each new row gets its digest, as the engine would write it: calibrate checks them
        digests = RowDigests.for_task(opened.task(task))
        assert digests is not None
        batch: list[tuple[Any, ...]] = []
        for k in range(rows):
            row = list(source[k % len(source)])
            row_id = f"r{k:07d}"
            result = json.loads(row[at["result"]])
            result["rowId"] = row_id
            row[at["row_id"]], row[at["seq"]] = row_id, k
            row[at["result"]] = json.dumps(result, separators=(",", ":"))
            row[at["dialogue"]] = json.dumps(
                {"rowId": row_id, "messages": [
                    {"role": "user", "content": "Please cancel my reservation."},
                    {"role": "assistant", "content": "x" * (200 + 37 * (k % 97))}]}
            )  # fmt: skip
            row[at["raw_attempts"]] = "[]"
            row[at["digest"]] = digests.of(row[: at["digest"]])
            batch.append(tuple(row))
            if len(batch) == 5000:
                db.executemany(f"INSERT INTO rows VALUES ({','.join('?' * len(names))})", batch)
                batch.clear()
        if batch:
            db.executemany(f"INSERT INTO rows VALUES ({','.join('?' * len(names))})", batch)
        db.commit()
        record = opened.task(task)
        labels = []
        for k in range(0, rows, 40):
            result = json.loads(source[k % len(source)][at["result"]])
            basis = [b for b in result["referenceBasis"] if b["status"] != "NOT_APPLICABLE"]
            first = basis[(k // 40) % len(basis)]
            for who, flip in (("mia", k % 400 == 0), ("noah", k % 280 == 0)):
                status = first["status"]
                if flip:
                    status = "FOLLOWED" if status != "FOLLOWED" else "VIOLATED"
                pinned = {
                    "row_id": f"r{k:07d}",
                    "reviewer": who,
                    "rubric_key": record.rubric_key,
                    "rubric_version": record.rubric_version,
                    "rubric_hash": record.rubric_hash,
                    "task_id": task,
                }
                row = Label(intent_key=result["intentKey"], score=result["finalScore"], **pinned)
                req = Label(requirement_id=first["requirementId"], status=status, **pinned)
                labels += [row, req]
        append_labels(db, labels)
    return store, task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, action="append", help="task size (repeatable)")
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    ns = parser.parse_args()
    out = []
    for rows in ns.rows or [10_000, 100_000]:
        with workdir(ns.keep / str(rows) if ns.keep else None) as folder:
            store, task = build(folder, rows)
            result = folder / "calibration.json"
            command = ["calibrate", task, "--no-save", "--format", "json", "--out", str(result)]
            run = measured([sys.executable, "-c", CHILD, *command, "--store", str(store)])
            found = json.loads(result.read_text(encoding="utf-8"))
            out.append([rows, found["labels"]["count"], f"{run.cpu_s:.1f}", f"{run.wall_s:.1f}",
                        f"{run.out['peak_mb']:.0f}", f"{run.cpu_s / rows * 1e6:.0f}",
                        f"{run.load_before} → {run.load_after}"])  # fmt: skip
    print(table(["rows", "labels", "CPU s", "wall s", "peak RSS MB", "CPU µs/row", "load"], out))
    print(f"load average now {load()}; {tempfile.gettempdir()}")


if __name__ == "__main__":
    main()
