"""The same rows through a peer: Inspect AI's ``model_graded_qa`` against the loopback stub.

Run with the peer's own interpreter (``benchmarks/.venv-peer/bin/python``), never the
project's. Each row becomes one Inspect sample: the task is the user's turns (led by a
``rowId: …`` line so the stub finds the row's authored judgment), the submission is the
agent's turns (set by a solver that calls no model: the dialogue is already written), and the
criterion is the rubric pack's requirements as prose (common + the intent's rules), so the
peer's grader, like rubric-eval's judge, reads the whole rubric for every row. Grading is
one call per row through Inspect's OpenAI provider pointed at ``--base-url``.

Prints one JSON line: ``{"rows", "wall_s", "scored", "accuracy"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loopback import guard

guard()
os.environ.setdefault("OPENAI_API_KEY", "no-key")  # the stub needs none
os.environ["INSPECT_DISPLAY"] = "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--criterion", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import model_graded_qa
    from inspect_ai.solver import Generate, TaskState, solver

    criterion = args.criterion.read_text(encoding="utf-8")
    samples = []
    for line in args.rows.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        said = {"user": [], "assistant": []}
        for message in row["messages"]:
            said.get(message["role"], []).append(str(message.get("content") or ""))
        samples.append(
            Sample(
                id=row["rowId"],
                input=f"rowId: {row['rowId']}\n" + "\n\n".join(said["user"]),
                target=criterion,
                metadata={"answer": "\n\n".join(said["assistant"])},
            )
        )

    @solver
    def written_answer():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.output = ModelOutput.from_content("written", state.metadata["answer"])
            return state

        return solve

    task = Task(dataset=samples, solver=written_answer(), scorer=model_graded_qa())
    with tempfile.TemporaryDirectory() as logs:
        started = time.perf_counter()
        [log] = inspect_eval(
            task,
            model="openai/gpt-4o-mini",
            model_base_url=args.base_url,
            max_connections=args.concurrency,
            log_dir=logs,
            display="none",
            log_samples=False,
        )
        wall = time.perf_counter() - started
    metrics = {}
    if log.results and log.results.scores:
        metrics = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    print(
        json.dumps(
            {
                "rows": len(samples),
                "wall_s": round(wall, 3),
                "status": log.status,
                "scored": log.results.completed_samples if log.results else 0,
                "accuracy": metrics.get("accuracy"),
            }
        )
    )


if __name__ == "__main__":
    main()
