"""Rubric packs: models, cross-field checks and YAML loading (SPEC §2)."""

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
