"""rubric-eval as a promptfoo ``python`` assertion: ``get_assert(output, context)``.

promptfoo runs a Python assertion by calling ``get_assert(output: str, context: dict)`` in the
file named by the assertion's ``value`` and reads the returned *GradingResult*
(``{"pass", "score", "reason", "componentResults", "namedScores"}``); ``context`` carries the
rendered ``prompt``, the test's ``vars`` and the assertion's ``config``. Point it here::

    assert:
      - type: python
        value: file://.venv/lib/python3.12/site-packages/rubric_engine/integrations/promptfoo.py
        config: {rubric: rubrics/health_cs.yaml, cassettes: cassettes}

(or a one-line file of your own: ``from rubric_engine.integrations.promptfoo import
get_assert``). The dialogue judged is the prompt as a user turn and the output as the
assistant's; ``rowId`` is ``config.rowId``, else ``vars.rowId``, else a digest of the prompt
(the judge sees it; replay finds cassettes by it). ``config`` also takes ``mode``, ``model``,
``apiBase`` and ``store`` (where a published ``KEY[@N]`` is read from).

The result: ``pass`` is the row's outcome PASS (a red flag fails whatever the score),
``score`` the final score on 0–1 over the pack's scale, ``reason`` the outcome, red flags,
unmet requirements and the judge's explanation, one ``componentResults`` entry per applicable
requirement (FOLLOWED and NOT_APPLICABLE pass) and ``namedScores`` the final and judge scores.
A JUDGE_ERROR row fails with its error as the reason and no score. promptfoo calls the
assertion once per output, so each call is one engine run (about 0.3 s of fixed cost); for
batches, score promptfoo's exported outputs with ``rubric-eval score`` instead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rubric_engine.engine.evaluate import evaluate
from rubric_engine.engine.options import DEFAULTS, ScoreOptions
from rubric_engine.errors import ConfigurationError
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RequirementStatus, RowStatus

__all__ = ["get_assert"]

_PASSING = (RequirementStatus.FOLLOWED, RequirementStatus.NOT_APPLICABLE)


def get_assert(output: str, context: dict[str, Any]) -> dict[str, Any]:
    """promptfoo's Python assertion entry point (see the module docstring).

    Raises:
        ConfigurationError: the assertion's ``config`` has no ``rubric``; and what the engine
            raises for a bad rubric, option or cassette file (promptfoo shows it as the
            assertion's error).
    """
    config = dict(context.get("config") or {})
    if not config.get("rubric"):
        raise ConfigurationError(
            "the promptfoo assertion needs config.rubric: a pack file (scored as a draft) or a "
            "published KEY[@N]"
        )
    prompt = str(context.get("prompt") or "")
    variables = context.get("vars") or {}
    row_id = str(config.get("rowId") or variables.get("rowId") or _digest(prompt))
    rubric = str(config["rubric"])
    options = ScoreOptions(
        rows=[{"rowId": row_id, "messages": [{"role": "user", "content": prompt},
                                             {"role": "assistant", "content": output}]}],
        rubric=rubric, draft=Path(rubric).is_file(),
        cassettes=Path(config.get("cassettes") or DEFAULTS.cassettes),
        mode=config.get("mode") or DEFAULTS.mode, model=config.get("model") or DEFAULTS.model,
        api_base=config.get("apiBase"),
        store=Path(config["store"]) if config.get("store") else DEFAULTS.store,
    )  # fmt: skip
    evaluation = evaluate(options)
    [result] = evaluation.rows
    if result.status is RowStatus.JUDGE_ERROR or result.final_score is None:
        error = result.error
        why = f"{error.kind}: {error.message}" if error else "no score"
        return {"pass": False, "score": 0.0, "reason": f"JUDGE_ERROR (not a score): {why}"}
    report = evaluation.report
    scale = [int(k) for k in report.totals.score_distribution]
    low, high = min(scale), max(scale)
    outcome = row_outcome(result, report.totals.pass_score)
    unmet = [e.requirement_id for e in result.reference_basis if e.status not in _PASSING]
    flags = ", ".join(result.red_flag_types) or "none"
    return {
        "pass": outcome == "PASS",
        "score": (result.final_score - low) / (high - low),
        "reason": (
            f"{outcome}: final score {result.final_score} of {high} under "
            f"{report.task.rubric_key}@{report.task.rubric_version} (red flags: {flags}; unmet: "
            f"{', '.join(unmet) or 'none'}). {result.score_explanation or ''}"
        ).strip(),
        "componentResults": [
            {
                "pass": e.status in _PASSING,
                "score": 1.0 if e.status in _PASSING else 0.0,
                "reason": f"{e.requirement_id}: {e.status}",
            }
            for e in result.reference_basis
        ],
        "namedScores": {"finalScore": result.final_score, "judgeScore": result.judge_score},
    }


def _digest(prompt: str) -> str:
    return "pf-" + hashlib.sha256(prompt.encode()).hexdigest()[:12]
