"""A rubric-eval scorer for Inspect AI (extra ``inspect``): ``rubric_scorer(rubric=…)``.

Each sample becomes a dialogue row — its messages after the solver ran (system, user,
assistant with tool calls, tool results), ``rowId`` the sample id (``id#N`` for epoch N > 1),
``metadata`` the sample's — and the samples of an eval are scored together in as few engine
runs as their arrival allows (:class:`~rubric_engine.integrations.batching.Batcher`), with the
same judge, cassettes, normalization and report as ``rubric-eval score``. The :class:`Score`:

- ``value``: the final score on the pack's scale (caps applied);
- ``answer``: the model's final output; ``explanation``: the judge's;
- ``metadata``: ``outcome`` (PASS, FAIL, RED_FLAG), ``judgeScore``, ``intentKey``,
  ``redFlagTypes``, ``unmetRequirementIds``, ``cappedBy``, ``requirements`` (each applicable
  requirement's status), ``rubric`` (``KEY@VERSION``) and ``taskId`` (the engine run);
- a JUDGE_ERROR row is :meth:`Score.unscored` with reason ``grader_failed`` and the error in
  its explanation: never a score.

Metrics: ``mean`` and ``stderr`` of the final score, and ``pass_rate`` (PASS outcomes over the
scored samples, the report's ``passRate``). See docs/integrations.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from rubric_engine.engine.options import DEFAULTS, Mode, ScoreOptions
from rubric_engine.integrations.batching import Batcher
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RequirementStatus, RowStatus

_UNMET = (RequirementStatus.VIOLATED, RequirementStatus.PARTIAL)

__all__ = ["pass_rate", "rubric_scorer", "sample_row"]


@metric
def pass_rate() -> Metric:
    """PASS outcomes over scored samples, 0–1 (unscored samples are outside it)."""

    def compute(scores: list[SampleScore]) -> float:
        outcomes = [(s.score.metadata or {}).get("outcome") for s in scores]
        scored = [o for o in outcomes if o in ("PASS", "FAIL", "RED_FLAG")]
        return sum(1 for o in scored if o == "PASS") / len(scored) if scored else float("nan")

    return compute


def sample_row(state: TaskState) -> dict[str, Any]:
    """The dialogue row of a sample after its solver ran (OpenAI chat message shape)."""
    messages: list[dict[str, Any]] = []
    for message in state.messages:
        out: dict[str, Any] = {"role": message.role, "content": message.text}
        calls = getattr(message, "tool_calls", None)
        if calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
                for c in calls
            ]  # fmt: skip
        if message.role == "tool":
            out["tool_call_id"] = getattr(message, "tool_call_id", None)
        messages.append(out)
    row_id = str(state.sample_id)
    if state.epoch > 1:
        row_id = f"{row_id}#{state.epoch}"
    return {"rowId": row_id, "messages": messages, "metadata": dict(state.metadata or {})}


@scorer(metrics=[mean(), stderr(), pass_rate()])
def rubric_scorer(
    rubric: str,
    cassettes: str = str(DEFAULTS.cassettes),
    mode: str = DEFAULTS.mode,
    model: str = DEFAULTS.model,
    api_base: str | None = None,
    api_key_env: str | None = None,
    store: str | None = None,
    wait_s: float = 0.5,
) -> Scorer:
    """Score each sample's dialogue with a rubric pack.

    Args:
        rubric: a pack file (scored as a draft) or a published ``KEY[@N]`` in ``store``.
        cassettes: the replay folder (``mode="replay"``, the default: offline).
        mode: ``replay``, ``record`` or ``live``.
        model: the judge's litellm model name; api_base: an OpenAI-compatible server.
        store: where a published rubric is read from (default the project's store); the runs
            themselves use a temporary store, so no task is added to it.
        wait_s: how long a batch of samples stays open for more.
    """
    draft = Path(rubric).is_file()
    options = ScoreOptions(
        rubric=rubric, draft=draft, cassettes=Path(cassettes), mode=_mode(mode), model=model,
        api_base=api_base, api_key_env=api_key_env,
        store=Path(store) if store else DEFAULTS.store,
    )  # fmt: skip
    batcher = Batcher(options, wait_s=wait_s)

    async def score(state: TaskState, target: Target) -> Score:
        scored = await batcher.score(sample_row(state))
        result, evaluation = scored.result, scored.evaluation
        answer = state.output.completion if state.output else None
        task = evaluation.report.task
        if result.status is RowStatus.JUDGE_ERROR:
            error = result.error
            return Score.unscored(
                reason="grader_failed", answer=answer,
                explanation=f"{error.kind}: {error.message}" if error else "JUDGE_ERROR",
                metadata={"outcome": "JUDGE_ERROR", "taskId": task.id},
            )  # fmt: skip
        pass_score = evaluation.report.totals.pass_score
        unmet = [e.requirement_id for e in result.reference_basis if e.status in _UNMET]
        return Score(
            value=result.final_score if result.final_score is not None else float("nan"),
            answer=answer,
            explanation=result.score_explanation,
            metadata={
                "outcome": row_outcome(result, pass_score),
                "judgeScore": result.judge_score,
                "intentKey": result.intent_key,
                "redFlagTypes": list(result.red_flag_types),
                "unmetRequirementIds": unmet,
                "cappedBy": list(result.capped_by),
                "requirements": {e.requirement_id: str(e.status) for e in result.reference_basis},
                "rubric": f"{task.rubric_key}@{task.rubric_version}",
                "taskId": task.id,
            },
        )

    return score


def _mode(mode: str) -> Mode:
    from rubric_engine.engine.options import MODES
    from rubric_engine.errors import ConfigurationError

    if mode not in MODES or mode == "batch":
        raise ConfigurationError(f"rubric_scorer mode {mode!r}: use replay, record or live")
    return mode  # type: ignore[return-value]
