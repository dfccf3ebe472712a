"""What batching the samples of a harness saves: the 26 health demo rows scored by
``evaluate()`` one row per engine run (what a plug-in calling the API per sample does) against
all rows in one run (what the Inspect and DeepEval plug-ins do, docs/integrations.md).
Replayed, offline. Prints a Markdown table with the load average.

    .venv/bin/python benchmarks/plugin_batching.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, load, table

from rubric_engine import ScoreOptions, evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=26, help="at most the 26 demo rows")
    args = parser.parse_args()
    lines = (ROOT / "cases" / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(x) for x in lines][: args.rows]
    base = ScoreOptions(rubric=ROOT / "rubrics" / "health_cs.yaml", draft=True,
                        cassettes=ROOT / "cassettes")  # fmt: skip
    evaluate(ScoreOptions(**{**base.__dict__, "rows": rows[:1]}))  # imports and caches warm
    per_row, batched = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        for row in rows:
            evaluate(ScoreOptions(**{**base.__dict__, "rows": [row]}))
        per_row.append(time.perf_counter() - started)
        started = time.perf_counter()
        evaluate(ScoreOptions(**{**base.__dict__, "rows": rows}))
        batched.append(time.perf_counter() - started)
    a, b = statistics.median(per_row), statistics.median(batched)
    print(table(["rows", "one run per row, s", "one run for all, s", "ratio"],
                [[len(rows), f"{a:.2f}", f"{b:.2f}", f"{a / b:.1f}×"]]))  # fmt: skip
    print(f"\nmedian of {args.repeat}; load average (1/5 min) {load()}")


if __name__ == "__main__":
    main()
