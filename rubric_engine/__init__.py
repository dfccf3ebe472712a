"""rubric-eval: versioned rubric packs and an LLM-judge engine.

The public API, imported on first use so that ``rubric-eval --help`` stays fast::

    from rubric_engine import ScoreOptions, score, load_rubric, read_report

    result = score(ScoreOptions(inputs=[Path("rows.jsonl")], rubric="support_cs"))
    report = read_report(result.task_id)   # the typed report.json of any stored task

``evaluate(options)`` scores rows (``ScoreOptions(rows=[…])``) in a temporary store and returns
every row's result in input order, for harnesses that want results, not a stored task.
In a notebook or an async app, ``await score_async(options)`` (``score`` refuses to start a
second event loop inside a running one).
"""

from __future__ import annotations

import os
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

# litellm's import reads the first .env found walking up from its own folder (inside the
# virtualenv: the project's, or any folder above it) unless LITELLM_MODE says otherwise; which
# .env is read is rubric-eval's decision (docs/security.md), so litellm reads none
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

if TYPE_CHECKING:  # the real types for checkers; at run time each name loads on first use
    from rubric_engine.cases.eval_case import EvalCase
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.evaluate import Evaluation, evaluate, evaluate_async
    from rubric_engine.engine.options import ScoreOptions
    from rubric_engine.engine.run import (
        ScoreResult,
        score,
        score_async,
    )
    from rubric_engine.errors import ExitCode, RubricEvalError
    from rubric_engine.report import report_for_task
    from rubric_engine.report.gate import GateResult
    from rubric_engine.report.model import Diff, Report
    from rubric_engine.report.run import read_report, run_diff, run_gate
    from rubric_engine.results.model import (
        CheckResult,
        RowResult,
        WarningCode,
    )
    from rubric_engine.results.normalize import normalize_verdict
    from rubric_engine.results.row_result import row_result
    from rubric_engine.rubric.loader import load_rubric, parse_rubric
    from rubric_engine.rubric.model import (
        EvalRubric,
        HardRequirement,
        RubricIntent,
    )
    from rubric_engine.rules.evaluate import evaluate_check
    from rubric_engine.rules.evidence import evidence_from_row
    from rubric_engine.rules.model import Check
    from rubric_engine.store.task_state import TaskState
    from rubric_engine.store.task_store import TaskStore
    from rubric_engine.verdict.model import verdict_model

__version__ = "0.1.0"

#: where tasks are kept unless --store or $RUBRIC_EVAL_STORE says otherwise
DEFAULT_STORE = Path(".rubric-eval/store.sqlite")

_API = {
    "EvalRubric": "rubric_engine.rubric.model",
    "HardRequirement": "rubric_engine.rubric.model",
    "RubricIntent": "rubric_engine.rubric.model",
    "load_rubric": "rubric_engine.rubric.loader",
    "parse_rubric": "rubric_engine.rubric.loader",
    "DialogueRow": "rubric_engine.dialogue.model",
    "DialogueSource": "rubric_engine.dialogue.readers",
    "verdict_model": "rubric_engine.verdict.model",
    "normalize_verdict": "rubric_engine.results.normalize",
    "RowResult": "rubric_engine.results.model",
    "CheckResult": "rubric_engine.results.model",
    "WarningCode": "rubric_engine.results.model",
    "row_result": "rubric_engine.results.row_result",
    "ScoreOptions": "rubric_engine.engine.options",
    "Evaluation": "rubric_engine.engine.evaluate",
    "evaluate": "rubric_engine.engine.evaluate",
    "evaluate_async": "rubric_engine.engine.evaluate",
    "ScoreResult": "rubric_engine.engine.run",
    "score": "rubric_engine.engine.run",
    "score_async": "rubric_engine.engine.run",
    "TaskState": "rubric_engine.store.task_state",
    "TaskStore": "rubric_engine.store.task_store",
    "report_for_task": "rubric_engine.report",
    "Report": "rubric_engine.report.model",
    "Diff": "rubric_engine.report.model",
    "GateResult": "rubric_engine.report.gate",
    "read_report": "rubric_engine.report.run",
    "run_diff": "rubric_engine.report.run",
    "run_gate": "rubric_engine.report.run",
    "RubricEvalError": "rubric_engine.errors",
    "ExitCode": "rubric_engine.errors",
    "Check": "rubric_engine.rules.model",
    "evaluate_check": "rubric_engine.rules.evaluate",
    "evidence_from_row": "rubric_engine.rules.evidence",
    "EvalCase": "rubric_engine.cases.eval_case",
}

#: the public names (kept in step with ``_API`` by tests/test_public_api.py)
__all__ = [
    "DEFAULT_STORE",
    "Check",
    "CheckResult",
    "DialogueRow",
    "DialogueSource",
    "Diff",
    "EvalCase",
    "EvalRubric",
    "Evaluation",
    "ExitCode",
    "GateResult",
    "HardRequirement",
    "Report",
    "RowResult",
    "RubricEvalError",
    "RubricIntent",
    "ScoreOptions",
    "ScoreResult",
    "TaskState",
    "TaskStore",
    "WarningCode",
    "__version__",
    "evaluate",
    "evaluate_async",
    "evaluate_check",
    "evidence_from_row",
    "load_rubric",
    "normalize_verdict",
    "parse_rubric",
    "read_report",
    "report_for_task",
    "row_result",
    "run_diff",
    "run_gate",
    "score",
    "score_async",
    "verdict_model",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module 'rubric_engine' has no attribute {name!r}")
