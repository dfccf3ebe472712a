"""Rubric packs: model, checks, case level, diffs (pure); loader and versions (edges).

The names are imported on first use (PEP 562): importing the pure model
(:mod:`rubric_engine.rubric.model`) must not load the YAML loader, which is an edge module
(``tests/test_architecture.py`` enforces this).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubric_engine.rubric.loader import (
        dump_json_schema,
        load_rubric,
        load_rubric_checked,
        parse_rubric,
        parse_rubric_checked,
        rubric_json_schema,
    )
    from rubric_engine.rubric.model import (
        EvalRubric,
        HardRequirement,
        OutputParsing,
        RedFlag,
        RubricIntent,
        RubricStatus,
        ScoreScale,
        content_hash,
    )

_WHERE = {
    "EvalRubric": "model",
    "HardRequirement": "model",
    "OutputParsing": "model",
    "RedFlag": "model",
    "RubricIntent": "model",
    "RubricStatus": "model",
    "ScoreScale": "model",
    "content_hash": "model",
    "dump_json_schema": "loader",
    "load_rubric": "loader",
    "parse_rubric": "loader",
    "load_rubric_checked": "loader",
    "parse_rubric_checked": "loader",
    "rubric_json_schema": "loader",
}

__all__ = [
    "EvalRubric",
    "HardRequirement",
    "OutputParsing",
    "RedFlag",
    "RubricIntent",
    "RubricStatus",
    "ScoreScale",
    "content_hash",
    "dump_json_schema",
    "load_rubric",
    "load_rubric_checked",
    "parse_rubric",
    "parse_rubric_checked",
    "rubric_json_schema",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"rubric_engine.rubric.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'rubric_engine.rubric' has no attribute {name!r}")
