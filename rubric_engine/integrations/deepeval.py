"""rubric-eval as DeepEval metrics (extra ``deepeval``): :class:`RubricMetric` for
``LLMTestCase`` and :class:`ConversationalRubricMetric` for ``ConversationalTestCase``.

A test case becomes a dialogue row (``input``/``actual_output`` as a user and an assistant
turn, or the conversation's turns; ``name`` as the ``rowId``; ``additional_metadata`` as
metadata) and the cases of one ``evaluate()`` are scored together in as few engine runs as
their arrival allows (:class:`~rubric_engine.integrations.batching.Batcher`, shared by the
copies DeepEval makes of a metric for each case). DeepEval scores are 0–1, so:

- ``score``: the final score placed on 0–1 over the pack's scale (``(s - min) / (max - min)``);
- ``threshold``: the pass score on the same 0–1 place (default: the report's pass score, one
  below the top of the scale); ``success``: the row's outcome is PASS (a red flag fails a row
  whatever its score, as in the report);
- ``reason``: the judge's explanation, with the outcome, red flags and unmet requirement ids;
- a JUDGE_ERROR row sets ``error`` (DeepEval shows the case as errored), never a score.

``score_breakdown`` holds the final and judge scores, outcome, red flags and each applicable
requirement's status. See docs/integrations.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from deepeval.metrics import BaseConversationalMetric, BaseMetric

from rubric_engine.engine.options import DEFAULTS, ScoreOptions
from rubric_engine.integrations.batching import Batcher, Scored
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RequirementStatus, RowStatus

_UNMET = (RequirementStatus.VIOLATED, RequirementStatus.PARTIAL)

__all__ = ["ConversationalRubricMetric", "RubricMetric"]


class _Rubric:
    """What both metrics share: options, the batcher and reading a result back."""

    def _setup(
        self, rubric: str, cassettes: str, mode: str, model: str, api_base: str | None,
        store: str | None, threshold: float | None, batcher: Batcher | None,
    ) -> None:  # fmt: skip
        from rubric_engine.report.outcome import default_pass_score
        from rubric_engine.rubric.versions import rubric_at

        self.rubric, self.cassettes, self.mode = rubric, cassettes, mode
        self.model_name, self.api_base, self.store = model, api_base, store
        pack, _ = rubric_at(rubric, Path(store) if store else DEFAULTS.store)
        self.scale = (pack.score_scale.min, pack.score_scale.max)
        span = self.scale[1] - self.scale[0]
        #: DeepEval needs it before any case: the pack's pass score on 0–1
        self.threshold = (
            threshold if threshold is not None
            else (default_pass_score(pack) - self.scale[0]) / span
        )  # fmt: skip
        self.async_mode = True
        self.include_reason = True
        if batcher is None:
            options = ScoreOptions(
                rubric=rubric, draft=Path(rubric).is_file(), cassettes=Path(cassettes),
                mode=mode,  # type: ignore[arg-type]  # checked by the engine
                model=model, api_base=api_base, store=Path(store) if store else DEFAULTS.store,
            )  # fmt: skip
            batcher = Batcher(options)
        #: shared with DeepEval's copies of this metric (they are built from __init__ args)
        self.batcher = batcher

    async def _measure(self, row: dict[str, Any]) -> float:
        scored = await self.batcher.score(row)
        self._read(scored)
        return float(self.score or 0.0)

    def _read(self, scored: Scored) -> None:
        result, report = scored.result, scored.evaluation.report
        scale = self.scale
        pass_score = report.totals.pass_score
        if result.status is RowStatus.JUDGE_ERROR or result.final_score is None:
            error = result.error
            self.error = f"JUDGE_ERROR {error.kind}: {error.message}" if error else "JUDGE_ERROR"
            self.score, self.success, self.reason = None, False, self.error
            return
        outcome = row_outcome(result, pass_score)
        unmet = [e.requirement_id for e in result.reference_basis if e.status in _UNMET]
        self.score = (result.final_score - scale[0]) / (scale[1] - scale[0])
        self.success = outcome == "PASS"
        flags = ", ".join(result.red_flag_types) or "none"
        self.reason = (
            f"{outcome}: final score {result.final_score} of {scale[1]} (red flags: {flags}; "
            f"unmet: {', '.join(unmet) or 'none'}). {result.score_explanation or ''}"
        ).strip()
        self.score_breakdown = {
            "finalScore": result.final_score, "judgeScore": result.judge_score,
            "outcome": outcome, "redFlagTypes": list(result.red_flag_types),
            "requirements": {e.requirement_id: str(e.status) for e in result.reference_basis},
            "rubric": f"{report.task.rubric_key}@{report.task.rubric_version}",
            "taskId": report.task.id,
        }  # fmt: skip

    def is_successful(self) -> bool:
        return bool(self.success) and getattr(self, "error", None) is None


class RubricMetric(_Rubric, BaseMetric):  # type: ignore[misc,no-untyped-call]
    """A rubric pack as a DeepEval metric for single-turn ``LLMTestCase`` values."""

    def __init__(
        self,
        rubric: str,
        cassettes: str = str(DEFAULTS.cassettes),
        mode: str = DEFAULTS.mode,
        model: str = DEFAULTS.model,
        api_base: str | None = None,
        store: str | None = None,
        threshold: float | None = None,
        batcher: Batcher | None = None,
    ) -> None:
        self._setup(rubric, cassettes, mode, model, api_base, store, threshold, batcher)

    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        return asyncio.run(self.a_measure(test_case))

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        row = {
            "rowId": test_case.name,
            "messages": [{"role": "user", "content": test_case.input},
                         {"role": "assistant", "content": test_case.actual_output}],
            "metadata": dict(test_case.additional_metadata or {}),
        }  # fmt: skip
        return await self._measure(row)

    @property
    def __name__(self) -> str:
        return f"Rubric ({Path(self.rubric).stem})"


class ConversationalRubricMetric(  # type: ignore[misc,no-untyped-call]
    _Rubric, BaseConversationalMetric
):
    """A rubric pack as a DeepEval metric for ``ConversationalTestCase`` values (the whole
    conversation is the dialogue the judge reads)."""

    def __init__(
        self,
        rubric: str,
        cassettes: str = str(DEFAULTS.cassettes),
        mode: str = DEFAULTS.mode,
        model: str = DEFAULTS.model,
        api_base: str | None = None,
        store: str | None = None,
        threshold: float | None = None,
        batcher: Batcher | None = None,
    ) -> None:
        self._setup(rubric, cassettes, mode, model, api_base, store, threshold, batcher)

    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        return asyncio.run(self.a_measure(test_case))

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        row = {
            "rowId": test_case.name,
            "messages": [{"role": t.role, "content": t.content} for t in test_case.turns],
            "metadata": dict(test_case.additional_metadata or {}),
        }
        return await self._measure(row)

    @property
    def __name__(self) -> str:
        return f"Rubric ({Path(self.rubric).stem})"
