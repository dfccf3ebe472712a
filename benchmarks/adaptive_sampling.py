"""What adaptive sampling costs and whether it finds the unstable rows (docs/stability.md).

    .venv/bin/python benchmarks/adaptive_sampling.py --rows 200 --unstable 0.2 [--mode batch]

Scores N replica rows (benchmarks/replicate.py) live against the loopback stub (``--mode
batch``: through the loopback batch fake, rubric_engine/testing/batch_stub.py) twice: once
with one sample per row, once with ``--samples 3 --samples-when unsure``. The stub is scripted
per row: a share of the rows (``--unstable``) is unstable — its answers alternate 4, 3, 4 on a
1–5 scale whose pass line is 4 — and the others answer the same every time, a clear pass (5)
or a clear fail (2). Prints the calls each run made (counted at the stub), their ratio, the
engine's own account of the extra calls, and whether every unstable row was found (its
stored result not ``stable``) and no stable row was called unstable. In batch mode the calls
are the requests submitted in batches, and the batches (turnarounds) are counted too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import load, table, workdir  # noqa: E402
from replicate import replica_id, write_rows  # noqa: E402

from rubric_engine.batch.settings import BatchSettings  # noqa: E402
from rubric_engine.engine import ScoreOptions, score  # noqa: E402
from rubric_engine.judge.retry import RetryPolicy  # noqa: E402
from rubric_engine.store.task_store import TaskStore  # noqa: E402
from rubric_engine.testing.batch_stub import BatchStub  # noqa: E402
from rubric_engine.testing.openai_stub import StubReply, StubServer, scripted_responder  # noqa: E402


def verdict(row_id: str, score: int) -> StubReply:
    return StubReply(
        content=json.dumps(
            {
                "rowId": row_id,
                "intentKey": "HEALTH_CONSULTATION",
                "score": score,
                "redFlagTypes": [],
                "unmetRequirementIds": [],
                "partialRequirementIds": [],
                "scoreExplanation": "scripted by benchmarks/adaptive_sampling.py",
            }
        )
    )


def script(rows: int, every: int) -> tuple[dict[str, list[StubReply]], set[str]]:
    """Each row's answers in order (the last repeats) and the unstable rows."""
    out: dict[str, list[StubReply]] = {}
    unstable: set[str] = set()
    for k in range(rows):
        row = replica_id(k)
        if k % every == 0:
            unstable.add(row)
            out[row] = [verdict(row, 4), verdict(row, 3), verdict(row, 4)]
        else:
            out[row] = [verdict(row, 5 if k % 2 else 2)]
    return out, unstable


def run(
    folder: Path, rows: Path, count: int, every: int, samples: int, when: str, mode: str
) -> tuple[int, int, set[str], str | None]:
    """``(calls, batches, rows found unstable, the engine's note)`` of one run."""
    answers, _ = script(count, every)
    responder = scripted_responder(answers)
    server = BatchStub(responder) if mode == "batch" else StubServer(responder)
    with server:
        result = score(
            ScoreOptions(
                inputs=[rows],
                rubric=ROOT / "rubrics" / "health_cs.yaml",
                draft=True,
                mode=mode,  # type: ignore[arg-type]
                model="openai/stub-judge",
                api_base=server.base_url,
                api_key_env="BENCH_STUB_KEY",
                store=folder / "s.sqlite",
                out=folder / f"out-{mode}-{samples}",
                concurrency=8,
                retry=RetryPolicy(max_attempts=2, base_s=0.01, max_wait_s=0.02),
                samples=samples,
                samples_when=when,
                batch=BatchSettings(poll_interval_s=0.02) if mode == "batch" else BatchSettings(),
            )
        )
        if isinstance(server, BatchStub):
            batches = len(server.submissions)
            calls = sum(len(s["customIds"]) for s in server.submissions)
            calls += sum(1 for _, path in server.requests if path.endswith("/chat/completions"))
        else:
            batches, calls = 0, len(server.requests)
    with TaskStore(folder / "s.sqlite") as store:
        flagged = {
            r.result.row_id
            for r in store.rows(result.task_id)
            if r.result.stability is not None and not r.result.stability.stable
        }
    return calls, batches, flagged, result.sampling_note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--unstable", type=float, default=0.2, help="share of unstable rows")
    parser.add_argument("--keep", type=Path, help="keep the data and store in this folder")
    parser.add_argument("--mode", choices=["live", "batch"], default="live")
    ns = parser.parse_args()
    every = max(1, round(1 / ns.unstable))
    import os

    os.environ.setdefault("BENCH_STUB_KEY", "sk-loopback")
    with workdir(ns.keep) as folder:
        replica = write_rows(folder / "data", ns.rows)
        _, unstable = script(ns.rows, every)
        before = load()
        one, one_batches, _, _ = run(folder, replica.rows, ns.rows, every, 1, "always", ns.mode)
        adaptive, batches, flagged, note = run(
            folder, replica.rows, ns.rows, every, 3, "unsure", ns.mode
        )
        columns = ["run", "rows", "unstable rows", "calls", "x one sample"]
        cells = [
            ["--samples 1", ns.rows, len(unstable), one, 1.0],
            ["--samples 3 --samples-when unsure", ns.rows, len(unstable), adaptive,
             round(adaptive / one, 2)],
        ]  # fmt: skip
        if ns.mode == "batch":
            columns.append("batches")
            cells[0].append(one_batches)
            cells[1].append(batches)
        print(f"mode {ns.mode}")
        print(table(columns, cells))
        print(f"\n{note}")
        missed, wrong = unstable - flagged, flagged - unstable
        print(
            f"unstable rows found: {len(unstable & flagged)} of {len(unstable)}; missed: "
            f"{len(missed)}; stable rows called unstable: {len(wrong)}; "
            f"load before {before}, after {load()}"
        )


if __name__ == "__main__":
    main()
