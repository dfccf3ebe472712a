"""The health demo rows as an Inspect AI eval, scored by rubric-eval's scorer.

    inspect eval examples/inspect_health.py --model mockllm/model --log-dir logs

Each demo row is a sample: its turns up to the agent's last reply are the input, and the
"model under test" is Inspect's offline ``mockllm/model`` answering with that row's recorded
last reply (preset token usage, so Inspect counts tokens without a tokenizer download). The
scorer replays the judge from ``cassettes/`` (offline), so the log's scores equal
``rubric-eval score cases/health_consult_zh.jsonl``'s. Paths are relative to this file's
folder's parent (the project root). See docs/integrations.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.solver import Generate, TaskState, solver

from rubric_engine.integrations.inspect import rubric_scorer

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "cases" / "health_consult_zh.jsonl"


def _samples() -> tuple[list[Sample], dict[str, str]]:
    samples, replies = [], {}
    for line in ROWS.read_text("utf-8").splitlines():
        row = json.loads(line)
        *turns, last = row["messages"]
        kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant}
        history = [kinds[m["role"]](content=m["content"]) for m in turns]
        samples.append(Sample(id=row["rowId"], input=history, metadata=row["metadata"]))
        replies[row["rowId"]] = last["content"]
    return samples, replies


@solver
def recorded_reply(replies: dict[str, str]):  # type: ignore[no-untyped-def]
    """Generate with mockllm/model preset to this sample's recorded reply."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        text = replies[str(state.sample_id)]
        output = ModelOutput.from_content("mockllm/model", text)
        output.usage = ModelUsage(
            input_tokens=len(state.input_text) // 4,
            output_tokens=len(text) // 4,
            total_tokens=(len(state.input_text) + len(text)) // 4,
        )
        model = get_model("mockllm/model", memoize=False, custom_outputs=[output])
        state.output = await model.generate(state.messages)
        state.messages.append(state.output.message)
        return state

    return solve


@task
def health_consultations() -> Task:
    samples, replies = _samples()
    return Task(
        dataset=samples,
        solver=recorded_reply(replies),
        scorer=rubric_scorer(
            rubric=str(ROOT / "rubrics" / "health_cs.yaml"), cassettes=str(ROOT / "cassettes")
        ),
    )
