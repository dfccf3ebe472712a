"""Repeated-rowId check at scale: claim N rowIds in one process, print CPU an id and memory.

    .venv/bin/python benchmarks/seen_ids.py --ids 1000000

Prints figures with the load average, never pass/fail (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rubric_engine.dialogue.seen_ids import SeenIds


def _memory_mb() -> dict[str, float]:
    """This process's resident set now (``VmRSS``) and its peak so far (``VmHWM``), MB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=1_000_000, help="rowIds to claim")
    ids = parser.parse_args().ids
    load_before = os.getloadavg()[0]
    before = _memory_mb()
    seen = SeenIds()
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(ids):
        seen.claim(f"row-{n:07d}", f"data/rows.jsonl:{n + 1}")
    repeat = seen.claim(f"row-{ids // 2:07d}", "again.jsonl:1")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = _memory_mb()
    seen.close()
    first = repeat[0] if repeat else "?"
    print(f"ids claimed:            {ids:,} (then one repeat: first at {first})")
    print(f"CPU an id:              {1e6 * cpu / ids:.2f} us   (wall {wall:.1f} s)")
    print(f"RSS before / peak after: {before['VmRSS']:.1f} MB / {after['VmHWM']:.1f} MB")
    print(f"load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
