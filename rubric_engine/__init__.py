"""rubric-eval: versioned rubric packs and an LLM-judge engine.

The public API, imported on first use so that ``rubric-eval --help`` stays fast::

    from rubric_engine import ScoreOptions, score, load_rubric, normalize_verdict
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

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
    "verdict_model": "rubric_engine.verdict",
    "normalize_verdict": "rubric_engine.normalize",
    "RowResult": "rubric_engine.results",
    "WarningCode": "rubric_engine.results",
    "ScoreOptions": "rubric_engine.scoring",
    "score": "rubric_engine.scoring",
    "TaskStore": "rubric_engine.store",
    "report_for_task": "rubric_engine.report",
    "RubricEvalError": "rubric_engine.errors",
    "Check": "rubric_engine.rules.model",
    "evaluate_check": "rubric_engine.rules.evaluate",
    "evidence_from_row": "rubric_engine.rules.evidence",
    "EvalCase": "rubric_engine.cases.seed000",
}

__all__ = ["DEFAULT_STORE", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module 'rubric_engine' has no attribute {name!r}")
