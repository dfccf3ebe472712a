"""`rubric-eval actions` at scale: replica rows replayed into a store, then the action list of
the task against a baseline (the same task), timed in its own process.

    .venv/bin/python benchmarks/actions.py --rows 10000 100000

Prints, per size, the rows, low rows, clusters, wall and CPU seconds and the child's peak
memory, with the load average before and after (2 cores: above 2 the CPU is shared). Figures,
never pass/fail (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measured, table, workdir
from benchmarks.replicate import RUBRIC, make_replica

CLI = [sys.executable, "-m", "rubric_engine.cli"]


def _cli(*args: str) -> list[str]:
    return [*CLI, *args]


def one(folder: Path, rows: int) -> list[object]:
    replica = make_replica(folder / f"data-{rows}", rows)
    store = str(folder / f"store-{rows}.sqlite")
    measured(_cli("rubric", "publish", str(RUBRIC), "--store", store), json_line=False)
    score = measured(
        _cli(
            "score",
            str(replica.rows),
            "-r",
            "health_cs",
            "--store",
            store,
            "--name",
            "bench",
            "--cassettes",
            str(replica.cassettes),
            "--out",
            str(folder / f"out-{rows}"),
            "-q",
        ),
        json_line=False,
    )
    out = folder / f"actions-{rows}.json"
    run = measured([sys.executable, "-c", _CHILD, store, str(out)])
    built = json.loads(out.read_text("utf-8"))
    return [
        rows,
        built["lowRows"],
        len(built["items"]),
        f"{score.wall_s:.1f}",
        f"{run.wall_s:.2f}",
        f"{run.cpu_s:.2f}",
        f"{run.out['peakMb']:.0f}",
        run.load_before,
        run.load_after,
    ]


#: the measured child: `actions bench --baseline bench --format json --out OUT`, then its peak
#: resident memory from /proc (VmHWM), as the last JSON line
_CHILD = """
import json, sys
from pathlib import Path
from rubric_engine.cli import app
try:
    app(["actions", "bench", "--baseline", "bench", "--store", sys.argv[1], "--format", "json",
         "--out", sys.argv[2]], standalone_mode=False)
finally:
    hwm = [l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM")]
    print(json.dumps({"peakMb": int(hwm[0].split()[1]) / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--keep", type=Path, help="keep the data and stores in this folder")
    args = parser.parse_args()
    found = []
    with workdir(args.keep) as folder:
        for rows in args.rows:
            found.append(one(folder, rows))
    print(
        table(
            [
                "rows",
                "low rows",
                "items",
                "score wall s",
                "actions wall s",
                "actions CPU s",
                "actions peak MB",
                "load before",
                "load after",
            ],
            found,
        )
    )


if __name__ == "__main__":
    main()
